"""The GPU pools' admission rules, from both sides, through every ValidatingAdmissionPolicy a stack renders with
its bindings (infra/apiserver/vap.py): a Pod the job controller builds from each GPU runtime, with the runtime's
pool tolerations and a GPU request, is admitted; the same Pod created by a tenant is refused, with and without
the GPU request. And the `group-claims` need arises from any one source of identity-provider groups alone."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.vap import Request, evaluate
from infra.platform.admission import JOB_CONTROLLER, gpu_namespaces
from infra.spec import validate
from infra.spec.queues.flavors import gpu_taints
from infra.vocabulary import pod_specs
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform

GPU_STACKS = [s for s in STACKS if gpu_taints(platform_of(s).flavors)]
TENANT = "oidc:alice"
TOLERATION_RULE = "must not tolerate the GPU pools' taints"


def _tolerates_a_gpu_taint(spec: dict[str, Any], taints: list[dict[str, str]]) -> bool:
    return any(t.get("key") == taint["key"] for t in spec.get("tolerations", []) for taint in taints)


def _runtime_pods(stack: str) -> list[tuple[str, dict[str, Any]]]:
    """(runtime, Pod) for every pod template of every runtime that tolerates a GPU pool's taint, as the job
    controller creates it in a GPU team's namespace, its first container asking for one GPU of the pool the
    template is pinned to (of the first GPU pool when it is not pinned)."""
    platform = platform_of(stack)
    taints = gpu_taints(platform.flavors)
    gpu = {f.pool: f.gpu_resources[0] for f in platform.flavors if f.gpu_resources}
    namespace = gpu_namespaces(platform)[0]
    pods = []
    for runtime in platform.runtimes:
        for spec in pod_specs("ClusterTrainingRuntime", runtime):
            if not _tolerates_a_gpu_taint(dict(spec), taints):
                continue
            pod_spec = copy.deepcopy(dict(spec))
            pool = next((value for value in pod_spec.get("nodeSelector", {}).values() if value in gpu), next(iter(gpu)))
            pod_spec["containers"][0].setdefault("resources", {})["limits"] = {gpu[pool]: 1}
            pods.append((runtime["metadata"]["name"], {
                "apiVersion": "v1", "kind": "Pod", "spec": pod_spec,
                "metadata": {"name": "p", "namespace": namespace, "labels": {"batch.kubernetes.io/job-name": "j"}}}))
    return pods


@functools.cache
def _cluster(stack: str) -> ClusterState:
    return ClusterState(kube_objects(capture_of(stack)))


def _refusals(stack: str, pod: dict[str, Any], user: str) -> list[str]:
    return [refusal.line() for refusal in evaluate(Request(pod, user=user), _cluster(stack)).refusals]


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_every_gpu_runtime_has_pods_that_tolerate_its_pool(stack: str) -> None:
    names = {name for name, _ in _runtime_pods(stack)}
    assert names and "torch-distributed" in names


@pytest.mark.parametrize("stack", GPU_STACKS)
@pytest.mark.parametrize("user", JOB_CONTROLLER)
def test_the_job_controllers_gpu_pods_of_each_runtime_are_admitted(stack: str, user: str) -> None:
    for runtime, pod in _runtime_pods(stack):
        assert _refusals(stack, pod, user) == [], (stack, runtime, user)


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_the_same_pods_created_by_a_tenant_are_refused(stack: str) -> None:
    for runtime, pod in _runtime_pods(stack):
        found = _refusals(stack, pod, TENANT)
        assert any(TOLERATION_RULE in line for line in found), (stack, runtime, found)
        assert any("must be created by a Job that Kueue admitted" in line for line in found), (stack, runtime)
        # Without the GPU request, the toleration alone is refused for a tenant and admitted for the controller.
        bare = copy.deepcopy(pod)
        for container in bare["spec"]["containers"]:
            container.get("resources", {}).pop("limits", None)
        found = _refusals(stack, bare, TENANT)
        assert [line for line in found if TOLERATION_RULE in line], (stack, runtime, found)
        assert _refusals(stack, bare, JOB_CONTROLLER[0]) == [], (stack, runtime)


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_a_tenant_pod_without_the_gpu_tolerations_is_admitted(stack: str) -> None:
    """The edge on the other side: a plain CPU pod of the same runtime, tolerations dropped, passes."""
    runtime, pod = _runtime_pods(stack)[0]
    plain = copy.deepcopy(pod)
    plain["spec"].pop("tolerations")
    plain["spec"]["containers"][0]["resources"].pop("limits")
    assert _refusals(stack, plain, TENANT) == [], (stack, runtime)


# --- the group-claims need -----------------------------------------------------------------------------------

GROUP_SOURCES = ["platformAdmins", "engineers", "analysts", "ci"]


def _needs(raw: dict[str, Any]) -> set[str]:
    return {need.capability for need in validate(raw, "onprem-lab").prerequisites.needs}


def _without_groups() -> dict[str, Any]:
    raw = raw_platform("onprem-lab")
    raw["identity"].pop("platformAdmins", None)
    for team in raw["teams"].values():
        team.pop("groups", None)
    return raw


def test_no_group_anywhere_needs_no_group_claims() -> None:
    assert "group-claims" not in _needs(_without_groups())


@pytest.mark.parametrize("source", GROUP_SOURCES)
def test_each_source_of_groups_alone_needs_group_claims(source: str) -> None:
    raw = _without_groups()
    if source == "platformAdmins":  # a stack with platform admins and no team groups
        raw["identity"]["platformAdmins"] = ["platform-admins"]
    else:
        next(iter(raw["teams"].values()))["groups"] = {source: ["some-group"]}
    assert "group-claims" in _needs(raw)
