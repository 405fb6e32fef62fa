"""`trainyard admit` as the cluster answers: who asks (RBAC with `--as`), the namespace's ResourceQuota, Kueue's
rules only where Kueue registers them, and CronJobs judged by the Jobs they create. Each point: a case the cluster
refuses and its nearest case it admits."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.admit import answer
from infra.apiserver.identity import PERSONAS
from infra.apiserver.quota import Quotas
from infra.apiserver.schema import CrdIndex
from infra.apiserver.state import ClusterState
from infra.commands import main
from infra.offline.plan import objects
from tests.conftest import CRDS, ROOT, capture_of, platform_of

pytestmark = pytest.mark.usefixtures("repo_runs")

STACK = "onprem-lab"
QUEUE = "kueue.x-k8s.io/queue-name"
CPU_BATCH = ROOT / "examples" / "cpu-batch"


@pytest.fixture(scope="module")
def crds() -> CrdIndex:
    return CrdIndex(CRDS, platform_of(STACK).spec.versions.crd_dirs())


def _lines(crds: CrdIndex, *objects: dict[str, Any], as_: str | None = None) -> list[str]:
    lines, _ = answer(platform_of(STACK), capture_of(STACK), [copy.deepcopy(o) for o in objects], crds, as_)
    return [line for line in lines if not line.startswith(("not checked", "warning"))]


def _obj(kind: str, name: str, namespace: str = "vision", api: str = "v1", **body: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((CPU_BATCH / name).read_text(encoding="utf-8")) if d]


# 1. RBAC ---------------------------------------------------------------------------------------------------------

ROLE = _obj("Role", "mine", api="rbac.authorization.k8s.io/v1", rules=[])


def test_an_engineer_cannot_create_a_role_and_the_message_is_the_api_servers(crds: CrdIndex) -> None:
    assert _lines(crds, ROLE) == [
        'refused Role/vision/mine: rbac: roles.rbac.authorization.k8s.io "mine" is forbidden: User '
        '"ml-engineer@vision" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the '
        'namespace "vision"']
    assert _lines(crds, ROLE, as_="platform") == ["admitted Role/vision/mine"]


def test_an_engineer_creates_config_in_its_namespace_not_in_another_teams(crds: CrdIndex) -> None:
    assert _lines(crds, _obj("ConfigMap", "c")) == ["admitted ConfigMap/vision/c"]
    other = _lines(crds, _obj("ConfigMap", "c", "nlp"), as_="ml-engineer:vision")
    assert other == ['refused ConfigMap/nlp/c: rbac: configmaps "c" is forbidden: User "ml-engineer@vision" cannot '
                     'create resource "configmaps" in API group "" in the namespace "nlp"']
    assert _lines(crds, _obj("ConfigMap", "c", "nlp"), as_="ml-engineer:nlp") == ["admitted ConfigMap/nlp/c"]


def test_cluster_scoped_objects_are_refused_at_the_cluster_scope(crds: CrdIndex) -> None:
    namespace = _obj("Namespace", "mine", namespace="")
    assert _lines(crds, namespace)[0].endswith('cannot create resource "namespaces" in API group "" at the cluster '
                                               'scope')


def test_analysts_and_ci_get_only_their_rights(crds: CrdIndex) -> None:
    job = _docs("trainjob.yaml")[0]
    assert _lines(crds, job, as_="analyst:vision")[0].startswith("refused TrainJob/vision/tokenize-corpus: rbac:")
    assert _lines(crds, job, as_="ci:vision") == ["admitted TrainJob/vision/tokenize-corpus"]
    assert _lines(crds, job, as_="ci-serviceaccount:vision") == ["admitted TrainJob/vision/tokenize-corpus"]
    assert _lines(crds, _obj("ConfigMap", "c"), as_="ci:vision")[0].startswith("refused ConfigMap/vision/c: rbac:")
    assert _lines(crds, job, as_="platform-admin")[0].startswith("refused TrainJob/vision/tokenize-corpus: rbac:")


def test_every_persona_is_accepted(crds: CrdIndex) -> None:
    for persona in PERSONAS:
        assert _lines(crds, _obj("ConfigMap", "c"), as_=persona)  # resolves; the answer depends on the persona


@pytest.mark.parametrize("value", ["intern", "ml-engineer:nobody", "platform:vision"])
def test_an_unknown_persona_or_team_is_one_line_and_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", STACK, str(CPU_BATCH / "code.yaml"), "--as", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--as" in err


# 2. ResourceQuota -------------------------------------------------------------------------------------------------

def _service(kind: str) -> dict[str, Any]:
    return _obj("Service", "s", spec={"type": kind, "ports": [{"port": 80}], "selector": {"a": "b"}})


def test_no_load_balancer_or_node_port_service_but_a_cluster_ip_one(crds: CrdIndex) -> None:
    for kind, resource in (("LoadBalancer", "services.loadbalancers"), ("NodePort", "services.nodeports")):
        line = _lines(crds, _service(kind), as_="platform")[0]
        assert line.startswith("refused Service/vision/s: quota: exceeded quota: team-quota, requested: ") \
            and f"{resource}=1" in line and f"limited: {resource}=0" in line.replace("services.nodeports=0,", "")
    assert _lines(crds, _service("ClusterIP"), as_="platform") == ["admitted Service/vision/s"]


def _config_maps(count: int) -> list[dict[str, Any]]:
    return [_obj("ConfigMap", f"c{i}") for i in range(count)]


def test_config_maps_count_with_what_the_namespace_holds_exactly_at_the_quota_passes() -> None:
    """100 ConfigMaps a namespace: the platform's there (its backup marker, Pipelines' launcher, log archive and
    metadata configuration), Kubernetes' kube-root-ca.crt, then the call's."""
    crds = None
    ours = len([o for _, o in objects(capture_of(STACK)) if o.get("kind") == "ConfigMap"
                and o["metadata"].get("namespace") == "vision"])
    room = 100 - ours - 1
    lines, refused = answer(platform_of(STACK), capture_of(STACK), _config_maps(room), crds)
    assert refused == 0
    lines, refused = answer(platform_of(STACK), capture_of(STACK), _config_maps(room + 1), crds)
    assert refused == 1 and lines[room] == (f"refused ConfigMap/vision/c{room}: quota: exceeded quota: team-quota, "
                                            "requested: configmaps=1, used: configmaps=100, limited: configmaps=100")


def _claim(name: str, size: str) -> dict[str, Any]:
    return _obj("PersistentVolumeClaim", name, spec={"accessModes": ["ReadWriteMany"], "storageClassName":
                                                      "ceph-filesystem", "resources": {"requests": {"storage": size}}})


def test_storage_sums_across_the_call_and_the_rendered_volumes() -> None:
    lines, _ = answer(platform_of(STACK), capture_of(STACK), [_claim("big", "30Ti")], None)
    used = lines[0].split("used: requests.storage=")[1].split(",")[0]  # what the stack's own volumes take
    assert _bytes(used) > 0
    free = 20 * 2**40 - _bytes(used)
    assert answer(platform_of(STACK), capture_of(STACK), [_claim("a", str(free))], None)[1] == 0
    assert answer(platform_of(STACK), capture_of(STACK), [_claim("a", str(free - 1)), _claim("b", "2")], None)[1] == 1


def _bytes(text: str) -> int:
    units = {"Ti": 2**40, "Gi": 2**30, "Mi": 2**20, "Ki": 2**10}
    return int(text[:-2]) * units[text[-2:]] if text[-2:] in units else int(text)


def test_a_pod_over_the_namespace_gpu_quota_is_refused_at_it_admitted() -> None:
    def pod(gpus: int) -> dict[str, Any]:
        return _obj("Pod", "p", spec={"containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:25.08-py3",
                                                       "resources": {"limits": {"nvidia.com/gpu": gpus}}}]})
    rendered = [o for _, o in objects(capture_of(STACK))]
    quotas = Quotas(ClusterState(rendered), rendered)
    assert quotas.review(pod(40)) == []
    assert "requested: requests.nvidia.com/gpu=41" in quotas.review(pod(41))[0].message


# 3. Kueue only where it registers ---------------------------------------------------------------------------------

def test_a_plain_pod_gets_no_queue_check_with_the_pod_integration_off(crds: CrdIndex) -> None:
    pod = _obj("Pod", "p", spec={"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type":
                                                                                            "RuntimeDefault"}},
                                 "containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:25.08-py3",
                                                 "securityContext": {"allowPrivilegeEscalation": False,
                                                                     "capabilities": {"drop": ["ALL"]}}}]})
    pod["metadata"]["labels"] = {QUEUE: "no-such-queue"}
    assert not any(": queue:" in line for line in _lines(crds, pod, as_="platform"))
    job = _docs("publish.yaml")[0]
    job["metadata"]["labels"][QUEUE] = "no-such-queue"
    assert any("queue: metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue 'no-such-queue' does not exist"
               in line for line in _lines(crds, job))


def test_kueue_rules_skip_a_namespace_its_selector_does_not_select(crds: CrdIndex) -> None:
    job = _docs("publish.yaml")[0]
    job["metadata"]["namespace"] = "kube-system"  # no trainyard.io/team label
    job["metadata"]["labels"][QUEUE] = "Not_A_Name"
    lines = _lines(crds, job, as_="platform")
    assert not any("webhook:kueue" in line or ": queue:" in line for line in lines), lines
    job["metadata"]["namespace"] = "vision"
    assert any("webhook:kueue: metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value" in line
               for line in _lines(crds, job, as_="platform"))


# 5. CronJobs ------------------------------------------------------------------------------------------------------

def test_the_scheduled_variant_is_admitted_and_its_job_template_judged_as_a_job(crds: CrdIndex) -> None:
    cron = _docs("schedule.yaml")[0]
    assert _lines(crds, cron) == ["admitted CronJob/vision/tokenize-corpus-nightly"]
    unlabelled = copy.deepcopy(cron)
    del unlabelled["spec"]["jobTemplate"]["metadata"]["labels"][QUEUE]
    assert any(line.startswith("refused CronJob/vision/tokenize-corpus-nightly: admission-policy: spec.jobTemplate: "
                               "its Jobs would be refused: ValidatingAdmissionPolicy 'trainyard-queue-required'")
               for line in _lines(crds, unlabelled))
    latest = copy.deepcopy(cron)
    latest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] = "amazon/aws-cli:latest"
    assert any("its Jobs would be refused" in line for line in _lines(crds, latest))
    root = copy.deepcopy(cron)
    root["spec"]["jobTemplate"]["spec"]["template"]["spec"]["securityContext"] = {"runAsUser": 0}
    assert any("pod-security: spec.jobTemplate.spec.template: its Pods would be refused: violates PodSecurity "
               '"restricted:latest"' in line for line in _lines(crds, root))


def test_an_analyst_cannot_create_a_cronjob(crds: CrdIndex) -> None:
    assert _lines(crds, _docs("schedule.yaml")[0], as_="analyst:vision")[0].endswith(
        'cannot create resource "cronjobs" in API group "batch" in the namespace "vision"')


def test_the_command_names_who_asks(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in sorted(Path(CPU_BATCH).glob("*.yaml"))]
    assert main(["admit", STACK, *files, "--crds", str(CRDS), "--as", "ml-engineer:vision"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("as ml-engineer:vision: user 'ml-engineer@vision', groups oidc:vision-eng")


def _trainjob(i: int) -> dict[str, Any]:
    return _obj("TrainJob", f"t{i}", api="trainer.kubeflow.org/v1alpha1", spec={"runtimeRef": {"name": "x"}})


def test_trainjobs_count_against_count_trainjobs_exactly_at_the_quota_passes() -> None:
    rendered = [o for _, o in objects(capture_of(STACK))]
    quotas = Quotas(ClusterState(rendered), rendered)
    for i in range(100):
        assert quotas.review(_trainjob(i)) == []
        quotas.add(_trainjob(i))
    assert quotas.review(_trainjob(100))[0].message == (
        "exceeded quota: team-quota, requested: count/trainjobs.trainer.kubeflow.org=1, used: "
        "count/trainjobs.trainer.kubeflow.org=100, limited: count/trainjobs.trainer.kubeflow.org=100")


def test_storage_per_class_and_unset_compute_as_the_quota_plugin_answers() -> None:
    quota = _obj("ResourceQuota", "q", "lab", spec={"hard": {
        "fast.storageclass.storage.k8s.io/requests.storage": "10Gi",
        "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "limits.cpu": "4"}})
    state = ClusterState([quota])
    quotas = Quotas(state, [])

    def claim(name: str, size: str, storage_class: str = "fast") -> dict[str, Any]:
        found = _claim(name, size)
        found["metadata"]["namespace"], found["spec"]["storageClassName"] = "lab", storage_class
        return found
    assert quotas.review(claim("a", "10Gi")) == []
    over = quotas.review(claim("a", "11Gi"))[0].message
    assert "requested: fast.storageclass.storage.k8s.io/requests.storage=11Gi" in over
    assert quotas.review(claim("a", "11Gi", "slow")) == []  # another class: not this quota's
    quotas.add(claim("a", "1Gi"))
    assert "fast.storageclass.storage.k8s.io/persistentvolumeclaims=1" in quotas.review(claim("b", "1Gi"))[0].message
    pod = _obj("Pod", "p", "lab", spec={"containers": [{"name": "c", "image": "i"}]})
    assert quotas.review(pod)[0].message == "failed quota: q: must specify limits.cpu"
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "4"}}
    assert quotas.review(pod) == []
