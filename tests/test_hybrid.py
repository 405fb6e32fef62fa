"""Hybrid stacks: several clusters from one declaration, MultiKueue between them (stacks/Pulumi.hybrid-burst.yaml).

Spec edges run without the engine; the rendered objects come from one offline run of hybrid-burst."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from infra.checks.catalogue import STACK_CHECKS, run_checks, run_entries
from infra.checks.context import StackContext
from infra.checks.hybrid import mirror_findings, rbac_findings
from infra.kit.naming import cluster_scope, named
from infra.live.hybrid import contexts, multikueue_findings
from infra.offline.clusters import split
from infra.platform.multikueue import ACCOUNT
from infra.spec import SpecError, validate
from infra.spec.hybrid.model import kubeconfig_problem
from infra.spec.queues.capacity import capacity_findings
from tests.conftest import CRDS, capture_of, platform_of, raw_platform

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

STACK = "hybrid-burst"


def _validate(raw: dict[str, Any]) -> Any:
    return validate(raw, STACK)


def _error(raw: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        _validate(raw)
    return caught.value


@pytest.fixture(scope="module")
def parts() -> dict[str, list[dict[str, Any]]]:
    platform, capture = platform_of(STACK), capture_of(STACK)
    return {name: [r.inputs for r in part.resources if r.custom and r.type.startswith("kubernetes:")
                   and "helm.sh" not in r.type and "providers" not in r.type]
            for name, (_, part) in split(platform, capture).items()}


def _named(objs: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    return next(o for o in objs if o.get("kind") == kind and o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == namespace)


# --- the declaration -------------------------------------------------------------------------------------------

def test_each_cluster_gets_its_own_platform_from_the_same_teams() -> None:
    hybrid = platform_of(STACK).hybrid
    assert hybrid is not None and list(hybrid.clusters) == ["core", "burst"] and hybrid.manager == "core"
    core, burst = hybrid.clusters["core"], hybrid.clusters["burst"]
    assert [f.name for f in core.flavors] == ["h100", "cpu"] and [f.name for f in burst.flavors] == ["p5"]
    assert core.spec.cluster.kind == "existing" and burst.spec.cluster.kind == "eks"
    # On the worker a team's queue is its burst queue, reached through the LocalQueue named after the worker.
    vision = next(t for t in burst.teams if t.name == "vision")
    assert (vision.queue, vision.local_queues) == ("vision-burst", ("burst",))
    assert next(t for t in core.teams if t.name == "vision").local_queues == ("vision", "burst")


def _capacity_errors(raw: dict[str, Any]) -> list[str]:
    return [f.line() for f in capacity_findings(_validate(raw).hybrid.clusters["burst"]) if f.severity == "error"]


def test_burst_quota_exactly_at_worker_capacity_passes_one_past_fails() -> None:
    raw = raw_platform(STACK)
    raw["teams"]["vision"]["burst"]["p5"] = 8  # the p5 pool's minimum: one p5.48xlarge, 8 GPUs
    assert _capacity_errors(raw) == []
    raw["teams"]["vision"]["burst"]["p5"] = 9
    found = _capacity_errors(raw)
    assert any("flavor p5" in line and "guarantee 9 nvidia.com/gpu" in line for line in found), found


@pytest.mark.parametrize(("edit", "path", "words"), [
    (lambda r: r["pools"]["p5"].pop("cluster"), "pools.p5.cluster", "missing: name the cluster"),
    (lambda r: r["teams"]["vision"]["quota"].update(p5=8), "teams.vision.quota.p5", "worker pools go under `burst`"),
    (lambda r: r["teams"]["nlp"]["burst"].update(h100=4), "teams.nlp.burst.h100", "manager's go under `quota`"),
    (lambda r: r["clusters"]["burst"].pop("link"), "clusters.burst.link", "declares how the manager reaches it"),
    (lambda r: r["clusters"]["burst"].update(role="manager", link=None, data=None), "clusters",
     "exactly one cluster with role"),
    (lambda r: r["clusters"]["burst"]["link"].update(network="public", attachment=None), "clusters.burst.link",
     "endpoint is private"),
    (lambda r: r["clusters"]["burst"]["eks"].update(region="mars-1"), "clusters.burst.eks.region", ""),
    (lambda r: r["teams"]["vision"]["burst"].update(p5=-1), "teams.vision.burst.p5", ""),
    (lambda r: r.update(cluster={"existing": {"context": "x"}}), "cluster", "not both"),
    (lambda r: r["clusters"].update({"Cloud_2": r["clusters"].pop("burst")}), "clusters.Cloud_2", "lowercase"),
    (lambda r: r["teams"].update(nlp="x"), "teams.nlp", ""),
    (lambda r: r.update(teams=["vision"]), "teams", "mapping"),
])
def test_bad_layouts_name_the_field_path(edit: Any, path: str, words: str) -> None:
    raw = raw_platform(STACK)
    edit(raw)
    error = _error(raw)
    assert error.path == f"trainyard:platform.{path}", str(error)
    assert words in error.message


def test_public_link_needs_the_managers_egress_in_the_endpoint_cidrs() -> None:
    raw = raw_platform(STACK)
    raw["clusters"]["burst"]["eks"]["endpoint"] = {"cidrs": ["198.51.100.0/24"]}
    raw["clusters"]["burst"]["link"]["network"] = "public"
    assert "drop `attachment`" in _error(raw).message
    del raw["clusters"]["burst"]["link"]["attachment"]
    assert "not within the worker endpoint's cidrs" in _error(raw).message
    raw["clusters"]["burst"]["eks"]["endpoint"] = {"cidrs": ["192.0.2.0/24"]}
    _validate(raw)


def test_a_private_link_without_its_cloud_side_is_one_unmet_need_naming_the_attachment() -> None:
    raw = raw_platform(STACK)
    assert _burst_unmet(raw) == []
    del raw["clusters"]["burst"]["link"]["attachment"]
    unmet = _burst_unmet(raw)
    assert [capability for capability, _ in unmet] == ["link:vpn"]
    line = unmet[0][1]
    assert line.startswith("needed by multikueue (clusters.burst.link") and "link.attachment" in line, line
    assert "burst data (clusters.burst.data.manager" in line and "images (clusters.burst.data.registries" in line


def _burst_unmet(raw: dict[str, Any]) -> list[tuple[str, str]]:
    platform = _validate(raw)
    assert platform.hybrid is not None
    prerequisites = platform.hybrid.clusters["burst"].prerequisites
    return [(need.capability, prerequisites.finding_line(need)) for need in prerequisites.unmet()]


# --- the worker kubeconfig ---------------------------------------------------------------------------------------

TOKEN_KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "burst",
    "clusters": [{"name": "burst", "cluster": {"server": "https://burst.example.com:443",
                                                "certificate-authority-data": "Q0E="}}],
    "users": [{"name": "multikueue", "user": {"token": "abc"}}],
    "contexts": [{"name": "burst", "context": {"cluster": "burst", "user": "multikueue"}}],
}


def _kubeconfig(**changes: Any) -> str:
    config = copy.deepcopy(TOKEN_KUBECONFIG)
    config["users"][0]["user"].update(changes.pop("user", {}))
    config["clusters"][0]["cluster"].update(changes.pop("cluster", {}))
    return yaml.safe_dump(config)


def test_a_serviceaccount_token_kubeconfig_passes() -> None:
    assert kubeconfig_problem(_kubeconfig()) is None


@pytest.mark.parametrize(("changes", "words"), [
    ({"user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}, "exec plugin"),
    ({"user": {"tokenFile": "/var/run/token"}}, "token file"),
    ({"cluster": {"insecure-skip-tls-verify": True}}, "skips TLS verification"),
    ({"cluster": {"certificate-authority": "/etc/ca.crt"}}, "from a file"),
    ({"cluster": {"server": "http://burst.example.com"}}, "https://"),
])
def test_kubeconfigs_kueue_refuses_are_refused(changes: dict[str, Any], words: str) -> None:
    assert words in (kubeconfig_problem(_kubeconfig(**changes)) or "")


# --- what the run declares --------------------------------------------------------------------------------------

def test_names_are_distinct_per_cluster_and_single_cluster_names_unchanged() -> None:
    platform, capture = platform_of(STACK), capture_of(STACK)
    tops = {r.name for r in capture.resources if r.parent.startswith("pulumi:pulumi:Stack")}
    assert tops and all(name.startswith(("core-", "burst-")) for name in tops), sorted(tops)
    kueue_charts = sorted((r.name, r.inputs.get("name")) for r in capture.resources
                          if r.type == "kubernetes:helm.sh/v4:Chart" and r.name.endswith("-kueue"))
    assert kueue_charts == [("burst-kueue", "kueue"), ("core-kueue", "kueue")]  # the release keeps its name
    providers = {r.provider for r in capture.resources if r.type.startswith("kubernetes:") and r.custom}
    assert {f"pulumi:providers:kubernetes::{c}-kubernetes" for c in ("core", "burst")} <= providers
    assert set(split(platform, capture)) == {"core", "burst"}
    assert named("kueue") == "kueue"
    with cluster_scope("burst"):
        assert named("kueue") == "burst-kueue"


def test_multikueue_objects_on_the_manager_mirror_the_workers_queue(parts: dict[str, list[dict[str, Any]]]) -> None:
    core, burst = parts["core"], parts["burst"]
    assert not [o for o in burst if o["kind"] in ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster")]
    check = _named(core, "AdmissionCheck", "burst")
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "burst"}}
    assert _named(core, "MultiKueueConfig", "burst")["spec"] == {"clusters": ["burst"]}
    assert _named(core, "MultiKueueCluster", "burst")["spec"]["clusterSource"]["kubeConfig"] == {
        "locationType": "Secret", "location": "multikueue-burst"}
    manager_cq, worker_cq = _named(core, "ClusterQueue", "vision-burst"), _named(burst, "ClusterQueue", "vision-burst")
    assert manager_cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "burst"}]}
    assert "admissionChecksStrategy" not in worker_cq["spec"]
    assert manager_cq["spec"]["resourceGroups"] == worker_cq["spec"]["resourceGroups"]
    assert manager_cq["spec"]["cohortName"] != _named(core, "ClusterQueue", "vision")["spec"]["cohortName"]
    assert _named(core, "LocalQueue", "burst", "vision")["spec"] == {"clusterQueue": "vision-burst"}
    assert _named(burst, "LocalQueue", "burst", "vision")["spec"] == {"clusterQueue": "vision-burst"}
    configs = {name: yaml.safe_load(_named(objs, "ConfigMap", "kueue-manager-config", "kueue-system")["data"][
        "controller_manager_config.yaml"]) for name, objs in parts.items()}
    assert configs["core"]["multiKueue"]["origin"] == "lab" and "multiKueue" not in configs["burst"]


Parts = dict[str, list[dict[str, Any]]]


def test_manager_rights_on_the_worker_include_trainjobs_and_are_not_admin(parts: Parts) -> None:
    burst = parts["burst"]
    role = _named(burst, "ClusterRole", ACCOUNT)
    trainjobs = [r for r in role["rules"] if r["resources"] == ["trainjobs"]]
    assert trainjobs and {"create", "delete", "watch"} <= set(trainjobs[0]["verbs"])
    assert _named(burst, "ClusterRoleBinding", ACCOUNT)["roleRef"]["name"] == ACCOUNT
    assert rbac_findings("burst", burst) == []
    rules = [r for r in role["rules"] if r not in trainjobs]
    without = [o if o is not role else {**role, "rules": rules} for o in burst]
    assert any("trainjobs.trainer.kubeflow.org" in f.message for f in rbac_findings("burst", without))
    wildcard = [o if o is not role else {**role, "rules": [*role["rules"], {"apiGroups": ["*"], "resources": ["*"],
                                                                         "verbs": ["*"]}]} for o in burst]
    assert any("wildcard" in f.message for f in rbac_findings("burst", wildcard))
    admin = [{**o, "roleRef": {**o["roleRef"], "name": "cluster-admin"}} if o["kind"] == "ClusterRoleBinding"
             and o["metadata"]["name"] == ACCOUNT else o for o in burst]
    assert any("cluster-admin" in f.message for f in rbac_findings("burst", admin))


def test_dispatched_jobs_find_their_queue_and_priorities_on_the_worker(parts: dict[str, list[dict[str, Any]]]) -> None:
    core, burst = parts["core"], parts["burst"]
    assert [f for f in mirror_findings("burst", core, burst) if f.severity == "error"] == []
    no_queue = [o for o in burst if not (o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "nlp")]
    assert any("LocalQueue nlp/burst" in f.subject for f in mirror_findings("burst", core, no_queue))
    shifted = [{**o, "value": o["value"] + 1} if o["kind"] == "WorkloadPriorityClass" else o for o in burst]
    assert any("priorities must mean the same" in f.message for f in mirror_findings("burst", core, shifted))


def test_the_unset_worker_kubeconfig_is_reported() -> None:
    found = run_entries(STACK_CHECKS, StackContext(platform_of(STACK), capture_of(STACK)))
    unset = [f for f in found if "no kubeconfig" in f.message]
    assert [(f.severity, f.subject) for f in unset] == [("warning", "burst: MultiKueueCluster burst")]
    assert "trainyard:multikueue-burst" in unset[0].message


# --- verify -------------------------------------------------------------------------------------------------------

class _Manager:
    """The manager's Kueue objects as verify reads them."""

    def __init__(self, cluster_reason: str | None) -> None:
        def obj(name: str, reason: str | None) -> dict[str, Any]:
            status = {"type": "Active", "status": "False" if reason else "True", "reason": reason or "Active"}
            return {"metadata": {"name": name}, "status": {"conditions": [status]}}
        self._objects = {"multikueueclusters": [obj("burst", cluster_reason)], "admissionchecks": [obj("burst", None)],
                         "clusterqueues": [obj("vision-burst", None), obj("nlp-burst", None)]}

    def cluster_queues(self) -> list[dict[str, Any]]:
        return self._objects["clusterqueues"]

    def kueue_objects(self, plural: str) -> list[dict[str, Any]]:
        return self._objects[plural]


def test_verify_checks_each_worker_is_connected() -> None:
    platform = platform_of(STACK)
    assert multikueue_findings(platform, _Manager(None)) == []
    found = multikueue_findings(platform, _Manager("InsecureKubeConfig"))
    assert [f.subject for f in found] == ["MultiKueueCluster burst"] and "exec plugin" in found[0].message
    assert contexts(platform, []) == {"core": "lab-admin", "burst": "trainyard-burst"}
    assert contexts(platform, ["burst=aws-burst"])["burst"] == "aws-burst"
    with pytest.raises(SpecError):
        contexts(platform, ["elsewhere=x"])


def test_every_check_passes_on_every_cluster() -> None:
    """What the per-stack tests assert of a single-cluster stack (schemas, CEL, webhooks, admission, policy pack,
    backup, observability, prerequisites, capacity) holds on each cluster: `trainyard validate` is clean."""
    if not CRDS.is_dir():
        pytest.skip(f"{CRDS} not present")
    errors = [f.line() for f in run_checks(platform_of(STACK), capture_of(STACK), CRDS) if f.severity == "error"]
    assert errors == []
