"""The API server's refusals of the workload kinds' templates (infra/apiserver/core_rules/workloads.py) and of the
templates custom resources hand to controllers (children.py): restartPolicy per kind, selectors that must match the
template's labels, a StatefulSet's and a JobSet's controller-made volumes, a runtime whose Jobs would be refused;
through check_core and schema_findings (what validate and plan call) and through `trainyard admit`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.schema import CrdIndex, check_core, schema_findings
from infra.commands import main
from tests.conftest import CRDS, ROOT, platform_of

K8S = "1.34"
STACK = "onprem-lab"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
LABELS = {"app": "train"}


def _template(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": dict(LABELS if labels is None else labels)},
            "spec": {"containers": [{"name": "main", "image": IMAGE}], **spec}}


def _job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "vision"},
            "spec": {"template": _template(restartPolicy="Never"), **spec}}


def _replicated(kind: str, selector: dict[str, Any] | None = None, **pod: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "d", "namespace": "vision"},
            "spec": {"selector": {"matchLabels": LABELS} if selector is None else selector,
                     "template": _template(**pod)}}


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_a_job_restarts_on_failure_or_never(policy: str) -> None:
    job = _job()
    job["spec"]["template"]["spec"]["restartPolicy"] = policy
    assert check_core(job, K8S) == []


@pytest.mark.parametrize("policy", [None, "Always"])
def test_a_job_without_restart_policy_or_always_is_refused(policy: str | None) -> None:
    job = _job()
    job["spec"]["template"]["spec"].pop("restartPolicy")
    if policy:
        job["spec"]["template"]["spec"]["restartPolicy"] = policy
    assert check_core(job, K8S) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']


def test_a_pod_failure_policy_needs_restart_policy_never() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    assert check_core(_job(podFailurePolicy=policy), K8S) == []
    job = _job(podFailurePolicy=policy)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert check_core(job, K8S) == ['spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is '
                                    "supported when podFailurePolicy is specified"]


def test_a_manual_job_selector_must_match_the_template_labels() -> None:
    assert check_core(_job(manualSelector=True, selector={"matchLabels": LABELS}), K8S) == []
    assert check_core(_job(manualSelector=True, selector={"matchLabels": {"app": "other"}}), K8S) == [
        'spec.template.metadata.labels: Invalid value: {"app":"train"}: `selector` does not match template `labels`']
    # without manualSelector the server generates the selector from the Job's uid: nothing to match
    assert check_core(_job(), K8S) == []


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"])
def test_a_replicated_workload_selects_its_template(kind: str) -> None:
    assert check_core(_replicated(kind), K8S) == []
    expression = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["train", "serve"]}]}
    assert check_core(_replicated(kind, expression), K8S) == []
    assert check_core(_replicated(kind, {"matchLabels": {"app": "serve"}}), K8S) == [
        'spec.template.metadata.labels: Invalid value: {"app":"train"}: `selector` does not match template `labels`']


@pytest.mark.parametrize(("kind", "detail"), [
    ("Deployment", "empty selector is invalid for deployment"),
    ("DaemonSet", "empty selector is invalid for daemonset"),
    ("StatefulSet", "empty selector is not valid for statefulset.")])
def test_an_empty_selector_is_refused(kind: str, detail: str) -> None:
    assert check_core(_replicated(kind, {}), K8S) == [f"spec.selector: Invalid value: {{}}: {detail}"]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"])
def test_a_replicated_workload_restarts_always(kind: str) -> None:
    assert check_core(_replicated(kind, restartPolicy="Always"), K8S) == []
    assert check_core(_replicated(kind, restartPolicy="OnFailure"), K8S) == [
        'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"']


@pytest.mark.parametrize("selector", [{"matchLabels": "app=train"}, {"matchExpressions": ["app in (train)"]}, "app"])
def test_a_malformed_selector_is_the_schemas_finding_not_a_crash(selector: Any) -> None:
    assert check_core(_replicated("Deployment", selector), K8S)  # the schema refuses it
    assert check_core(_job(manualSelector=True, selector=selector), K8S)


def test_a_deployment_template_meets_the_pod_spec_rules() -> None:
    deployment = _replicated("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 1}}
    assert check_core(deployment, K8S) == ["spec.template.spec.containers[0].resources.limits: Required value: "
                                           "Limit must be set for non overcommitable resources"]


def test_a_statefulset_pod_mounts_its_claim_templates() -> None:
    mount = [{"name": "data", "mountPath": "/data"}]
    stateful = _replicated("StatefulSet")
    stateful["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = mount
    stateful["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"},
                                                 "spec": {"accessModes": ["ReadWriteOnce"],
                                                          "resources": {"requests": {"storage": "1Gi"}}}}]
    assert check_core(stateful, K8S) == []
    stateful["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] = "state"
    assert check_core(stateful, K8S) == ['spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data" '
                                         "(the StatefulSet's Pods would be refused)"]


def test_a_pod_template_meets_the_pod_spec_rules() -> None:
    template: dict[str, Any] = {"apiVersion": "v1", "kind": "PodTemplate",
                                "metadata": {"name": "t", "namespace": "vision"}, "template": _template()}
    assert check_core(template, K8S) == []
    del template["template"]["spec"]["containers"][0]["image"]
    assert check_core(template, K8S) == ["template.spec.containers[0].image: Required value"]


def _cron(**job: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "vision"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {**_job()["spec"], **job}}}}


def test_a_cron_job_template_is_a_job_whose_selector_is_generated() -> None:
    assert check_core(_cron(), K8S) == []
    cron = _cron()
    del cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"]
    assert check_core(cron, K8S) == ['spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid '
                                     'values: "OnFailure", "Never"']
    assert check_core(_cron(selector={"matchLabels": LABELS}), K8S) == [
        'spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"app":"train"}}: `selector` will be '
        "auto-generated"]


@pytest.fixture(scope="module")
def crds() -> CrdIndex:
    return CrdIndex(CRDS, platform_of(STACK).spec.versions.crd_dirs())


def _custom(obj: dict[str, Any], crds: CrdIndex) -> list[str]:
    """What plan and validate find in a custom resource: its own schema's refusals, then its Jobs'."""
    return [finding.message for finding in schema_findings([obj], crds, K8S)]


def _jobset(**pod: Any) -> dict[str, Any]:
    job = {"template": _template(**pod)}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "vision"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}]}}


def test_a_jobset_restart_policy_defaults_to_on_failure_always_is_refused(crds: CrdIndex) -> None:
    assert _custom(_jobset(), crds) == []  # the JobSet webhook defaults it to OnFailure
    assert _custom(_jobset(restartPolicy="Always"), crds) == [
        'spec.replicatedJobs[0].template.spec.template.spec.restartPolicy: Required value: valid values: '
        '"OnFailure", "Never" (the Jobs the JobSet controller creates from it would be refused)']


def test_a_jobset_pod_mounts_its_volume_claim_policies(crds: CrdIndex) -> None:
    jobset = _jobset()
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/scratch"}]
    jobset["spec"]["volumeClaimPolicies"] = [{"templates": [
        {"metadata": {"name": "scratch"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}]}]
    assert _custom(jobset, crds) == []
    jobset["spec"]["volumeClaimPolicies"][0]["templates"][0]["metadata"]["name"] = "cache"
    assert _custom(jobset, crds) == [
        'spec.replicatedJobs[0].template.spec.template.spec.containers[0].volumeMounts[0].name: Not found: "scratch" '
        "(the Jobs the JobSet controller creates from it would be refused)"]


def _runtime() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((ROOT / "runtimes" / "torch-distributed.yaml").read_text(encoding="utf-8")))


def _node(runtime: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return node["spec"]["containers"][0]


def test_a_runtime_whose_jobs_the_api_server_refuses_is_refused(crds: CrdIndex) -> None:
    runtime = _runtime()
    assert _custom(runtime, crds) == []
    _node(runtime)["resources"] = {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}
    assert _custom(runtime, crds) == []
    _node(runtime)["resources"]["requests"]["nvidia.com/gpu"] = 9
    assert _custom(runtime, crds) == [
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.requests: Invalid "
        'value: "9": must be equal to nvidia.com/gpu limit of 8 (every TrainJob on this runtime fails: the Jobs the '
        "JobSet controller creates for it would be refused)"]


def _write(tmp_path: Path, obj: dict[str, Any]) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(obj), encoding="utf-8")
    return str(path)


def _gpu_job(request: int, limit: int) -> dict[str, Any]:
    job = _job()
    job["metadata"] = {"name": "gpu-check", "namespace": "vision", "labels": {"kueue.x-k8s.io/queue-name": "vision"}}
    pod = job["spec"]["template"]["spec"]
    pod["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    pod["containers"][0].update(
        name="check", securityContext={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        resources={"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": request},
                   "limits": {"memory": "1Gi", "nvidia.com/gpu": limit}})
    return job


@pytest.mark.usefixtures("repo_runs")  # the session's run of the unchanged stack
def test_trainyard_admit_refuses_a_job_the_api_server_refuses(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", STACK, _write(tmp_path, _gpu_job(1, 1)), "--crds", str(CRDS)]) == 0
    assert "admitted Job/vision/gpu-check" in capsys.readouterr().out
    assert main(["admit", STACK, _write(tmp_path, _gpu_job(2, 1)), "--crds", str(CRDS)]) == 1
    assert ('refused Job/vision/gpu-check: schema: spec.template.spec.containers[0].resources.requests: Invalid '
            'value: "2": must be equal to nvidia.com/gpu limit of 1') in capsys.readouterr().out


@pytest.mark.usefixtures("repo_runs")
def test_trainyard_admit_refuses_a_runtime_whose_jobs_would_be_refused(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    runtime = _runtime()
    runtime["metadata"]["name"] = "torch-custom"
    _node(runtime)["ports"] = [{"name": "torch-rendezvous", "containerPort": 29500}]  # 16 characters
    assert main(["admit", STACK, _write(tmp_path, runtime), "--crds", str(CRDS), "--as", "platform"]) == 1
    assert ('refused ClusterTrainingRuntime/torch-custom: schema: spec.template.spec.replicatedJobs[0].template.spec.'
            'template.spec.containers[0].ports[0].name: Invalid value: "torch-rendezvous": must be no more than 15 '
            "characters (every TrainJob on this runtime fails") in capsys.readouterr().out
