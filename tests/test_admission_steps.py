"""Pipeline steps meet the queue (infra/platform/admission_steps.py): `trainyard-pipeline-steps` evaluated with a CEL
interpreter on onprem-lab's policy, each place a step can ask for a GPU refused and its nearest GPU-free case
admitted; the Argo controller's GPU pods refused by `trainyard-queue-required` whatever their owner; the run's
ServiceAccount bound, in each team namespace, to create TrainJobs there and nothing more."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra.components import PIPELINES
from infra.platform.admission import policies
from infra.platform.admission_steps import PIPELINE_KINDS, STEP_ACCOUNT
from infra.platform.kfp.teams import RUNNER_ROLE
from tests import pipelines as p
from tests.cel import denials
from tests.conftest import STACKS, capture_of, kube_objects, platform_of

IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
ARGO = {"username": p.ARGO_CONTROLLER, "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow"]}
JOB_CONTROLLER = {"username": p.JOB_CONTROLLER, "groups": []}
GPU = {"limits": {"nvidia.com/gpu": 1}}


def _policy(name: str = "trainyard-pipeline-steps") -> dict[str, Any]:
    return policies(platform_of("onprem-lab"))[name]


def _denied(obj: dict[str, Any], resource: str = "workflows") -> list[str]:
    return denials(_policy(), obj, resource, "vision")


def _template(**fields: Any) -> dict[str, Any]:
    return {"name": "main", **fields}


def _box(resources: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "c", "image": IMAGE, **({"resources": resources} if resources is not None else {})}


# (a template field, its value with a GPU): every place of a template that becomes a container of the step's pod
GPU_PLACES: list[tuple[str, Any]] = [
    ("container", _box(GPU)),
    ("script", {**_box(GPU), "source": "print(1)"}),
    ("containerSet", {"containers": [_box(), _box(GPU)]}),
    ("initContainers", [_box(GPU)]),
    ("sidecars", [_box(GPU)]),
    ("podSpecPatch", '{"containers":[{"name":"main","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}'),
    ("podSpecPatch", "containers:\n- name: main\n  resources:\n    limits:\n      nvidia.com/mig-1g.10gb: 1\n"),
]


@pytest.mark.parametrize(("field", "value"), GPU_PLACES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(GPU_PLACES)])
def test_a_gpu_anywhere_in_a_template_is_refused(field: str, value: Any) -> None:
    refused = _denied(p.workflow("vision", _template(**{field: value})))
    assert len(refused) == 1 and refused[0].startswith("a pipeline step may not request GPUs")


# The nearest admitted cases: no GPU, a zero GPU, a podSpecPatch of CPU only, KFP's run-time patch placeholder.
GPU_FREE: list[tuple[str, Any]] = [
    ("container", _box({"limits": {"cpu": "1"}})),
    ("container", _box({"limits": {"nvidia.com/gpu": 0}})),
    ("container", _box({"limits": {"nvidia.com/gpu": "0"}})),
    ("containerSet", {"containers": [_box(), _box()]}),
    ("podSpecPatch", '{"containers":[{"name":"main","resources":{"limits":{"cpu":"2"}}}]}'),
    ("podSpecPatch", "{{inputs.parameters.pod-spec-patch}}"),
]


@pytest.mark.parametrize(("field", "value"), GPU_FREE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(GPU_FREE)])
def test_the_same_template_without_a_gpu_is_admitted(field: str, value: Any) -> None:
    assert _denied(p.workflow("vision", _template(**{field: value}))) == []


def test_template_defaults_and_the_workflows_own_patch_count() -> None:
    free = _template(container=_box())
    assert _denied(p.workflow("vision", free, templateDefaults={"container": _box(GPU)}))
    assert _denied(p.workflow("vision", free, podSpecPatch='{"containers":[{"name":"main","resources":{"limits":'
                                                            '{"nvidia.com/gpu":"8"}}}]}'))
    assert _denied(p.workflow("vision", free, templateDefaults={"container": _box()})) == []


def test_a_kfp_accelerator_is_refused_wherever_the_spec_passes_it() -> None:
    run = p.kfp_run("vision", p.GPU_ACCELERATOR)
    assert _denied(run) == ["a KFP task may not set an accelerator (set_accelerator_type/limit): its step pod would "
                            "run outside Kueue; have the step create a TrainJob labelled kueue.x-k8s.io/queue-name "
                            "with your team's LocalQueue (Kueue admits it against the team's quota)"]
    assert _denied(p.kfp_run("vision")) == []
    assert _denied(p.kfp_run("vision", {})) == []  # an empty accelerator asks for nothing
    # inline in a DAG task's or a step's arguments, as older compilers wrote it
    spec = json.dumps({"image": "python:3.12", "resources": {"accelerator": {"type": "nvidia.com/gpu", "count": "1"}}})
    inline = {"arguments": {"parameters": [{"name": "container", "value": spec}]}, "name": "t", "template": "x"}
    assert _denied(p.workflow("vision", _template(dag={"tasks": [inline]})))
    assert _denied(p.workflow("vision", _template(steps=[[inline]])))
    cpu = {**inline, "arguments": {"parameters": [{"name": "container", "value": json.dumps({"image": "python"})}]}}
    assert _denied(p.workflow("vision", _template(dag={"tasks": [cpu]}), _template(steps=[[cpu]]))) == []


@pytest.mark.parametrize("resource", sorted(PIPELINE_KINDS))
def test_every_kind_that_carries_a_workflow_is_judged(resource: str) -> None:
    run = p.workflow("vision", _template(container=_box(GPU)))
    obj = {"workflows": run, "workflowtemplates": {**run, "kind": "WorkflowTemplate"},
           "cronworkflows": p.cron_workflow("vision", _template(container=_box(GPU))),
           "scheduledworkflows": p.scheduled_workflow("vision", run)}[resource]
    assert _denied(obj, resource)
    free = copy.deepcopy(obj)
    path = PIPELINE_KINDS[resource][1]
    spec = free
    for key in path:
        spec = spec[key]
    spec["templates"][0]["container"] = _box()
    assert _denied(free, resource) == []


def test_the_policy_matches_the_upstream_groups_and_plurals() -> None:
    rules = _policy()["matchConstraints"]["resourceRules"]
    assert {(r["apiGroups"][0], r["resources"][0]) for r in rules} == {
        ("argoproj.io", "workflows"), ("argoproj.io", "workflowtemplates"), ("argoproj.io", "cronworkflows"),
        ("kubeflow.org", "scheduledworkflows")}
    plurals = {(c["spec"]["group"], c["spec"]["names"]["plural"]) for c in p.vendored_crds()}
    assert {(r["apiGroups"][0], r["resources"][0]) for r in rules} <= plurals


def _step_pod(**spec: Any) -> dict[str, Any]:
    pod = p.step_pod("vision", IMAGE, gpus=1)
    pod["spec"].update(spec)
    return pod


def test_the_argo_controllers_gpu_pod_is_refused_whatever_its_owner() -> None:
    """The exemption is who creates the pod (the job controller), never the ownerReference: an Argo step pod
    that claims a Job as its owner is refused like one owned by its Workflow."""
    queue = _policy("trainyard-queue-required")
    pod = _step_pod()
    assert any("a Pod that requests GPUs" in d for d in denials(queue, pod, "pods", "vision", user=ARGO))
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u",
                                           "controller": True}]
    assert any("a Pod that requests GPUs" in d for d in denials(queue, pod, "pods", "vision", user=ARGO))
    assert denials(queue, pod, "pods", "vision", user=JOB_CONTROLLER) == []
    assert denials(queue, p.step_pod("vision", IMAGE), "pods", "vision", user=ARGO) == []


def test_the_argo_controllers_pod_may_not_reach_gpu_nodes_another_way() -> None:
    queue = _policy("trainyard-queue-required")
    cpu = p.step_pod("vision", IMAGE)
    placed = {**cpu, "spec": {**cpu["spec"], "nodeName": "gpu-a01"}}
    assert any("nodeName" in d for d in denials(queue, placed, "pods", "vision", user=ARGO))
    taint = _policy("trainyard-queue-required")["variables"]
    assert any(v["name"] == "gpuTaints" and v["expression"] != "[]" for v in taint)
    tolerating = {**cpu, "spec": {**cpu["spec"], "tolerations": [{"operator": "Exists"}]}}
    assert any("tolerate the GPU pools' taints" in d for d in denials(queue, tolerating, "pods", "vision", user=ARGO))


@pytest.mark.parametrize("stack", STACKS)
def test_the_runs_service_account_may_create_trainjobs_in_each_team_namespace_only(stack: str) -> None:
    """The run account's Role (infra/platform/kfp/teams.py) in every team namespace, bound to that account of
    that namespace only; TrainJobs are its only write outside Argo's task results."""
    capture = capture_of(stack)
    def ours(obj: dict[str, Any]) -> bool:  # upstream's own `pipeline-runner` of Pipelines' namespace is not
        return obj["metadata"].get("namespace") != PIPELINES.namespace

    roles = [r for r in kube_objects(capture, "Role") if r["metadata"]["name"] == RUNNER_ROLE and ours(r)]
    bindings = [b for b in kube_objects(capture, "RoleBinding") if b["roleRef"]["name"] == RUNNER_ROLE and ours(b)]
    namespaces = sorted(ns for team in platform_of(stack).teams for ns in team.namespaces)
    assert sorted(r["metadata"]["namespace"] for r in roles) == namespaces
    assert sorted(b["metadata"]["namespace"] for b in bindings) == namespaces
    for role in roles:
        trainjobs = [r for r in role["rules"] if "trainer.kubeflow.org" in r["apiGroups"]]
        assert trainjobs and all(r["resources"] == ["trainjobs"] for r in trainjobs)
        assert "create" in trainjobs[0]["verbs"] and "escalate" not in str(role["rules"])
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": STEP_ACCOUNT,
                                        "namespace": binding["metadata"]["namespace"]}]
