"""What the admission policies admit and deny, evaluated with a CEL interpreter over sample objects of the
onprem-lab stack (team vision: namespace and LocalQueue `vision`, GPU quota; registries ghcr.io/kubeflow and
nvcr.io/nvidia plus the runtimes' own)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.platform.admission import fabric_runtimes, policies
from infra.spec.cloud_catalog import EFA_RESOURCE

from .cel import denials
from .conftest import platform_of

QUEUE = "kueue.x-k8s.io/queue-name"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"


def _policy(name: str) -> dict[str, Any]:
    return policies(platform_of("onprem-lab"))[name]


def _trainjob(**trainer: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "resnet", "namespace": "vision", "labels": {QUEUE: "vision"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"image": IMAGE, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}, **trainer}}}


def _pod(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"containers": [{"name": "c", "image": IMAGE, **container}]}}


def test_a_plain_trainjob_passes_every_policy() -> None:
    for name, policy in policies(platform_of("onprem-lab")).items():
        assert denials(policy, _trainjob(), "trainjobs", "vision") == [], name


@pytest.mark.parametrize(("labels", "allowed"), [({QUEUE: "vision"}, True), ({QUEUE: "nlp"}, False), ({}, False)])
def test_a_trainjob_must_name_the_local_queue_of_its_namespace(labels: dict[str, str], allowed: bool) -> None:
    job = _trainjob()
    job["metadata"]["labels"] = labels
    assert (denials(_policy("trainyard-queue-required"), job, "trainjobs", "vision") == []) is allowed


def test_a_gpu_pod_must_belong_to_a_job() -> None:
    policy = _policy("trainyard-queue-required")
    gpu_pod = _pod(resources={"limits": {"nvidia.com/gpu": 1}})
    assert denials(policy, gpu_pod, "pods", "vision")
    assert denials(policy, _pod(), "pods", "vision") == []
    owned = copy.deepcopy(gpu_pod)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u",
                                             "controller": True}]
    assert denials(policy, owned, "pods", "vision") == []


@pytest.mark.parametrize(("change", "allowed"), [
    ({}, True),
    ({"securityContext": {"privileged": True}}, False),
    ({"securityContext": {"privileged": False}}, True),
])
def test_privileged_containers_are_denied(change: dict[str, Any], allowed: bool) -> None:
    assert (denials(_policy("trainyard-pod-security"), _pod(**change), "pods", "vision") == []) is allowed


def test_host_path_volumes_are_denied() -> None:
    pod = _pod()
    pod["spec"]["volumes"] = [{"name": "h", "hostPath": {"path": "/"}}]
    assert denials(_policy("trainyard-pod-security"), pod, "pods", "vision")


@pytest.mark.parametrize(("image", "allowed"), [
    (IMAGE, True),
    ("ghcr.io/kubeflow/trainer/torchtune-trainer:v2.2.1", True),
    ("docker.io/evil/miner:1.0", False),
    ("evil/miner:1.0", False),  # docker.io/evil/miner
    ("nvcr.io/nvidia-fake/x:1", False),  # a prefix must end at a path boundary
])
def test_images_come_from_allowed_registries(image: str, allowed: bool) -> None:
    policy = _policy("trainyard-allowed-registries")
    assert (denials(policy, _pod(image=image), "pods", "vision") == []) is allowed
    assert (denials(policy, _trainjob(image=image), "trainjobs", "vision") == []) is allowed


def test_gpus_only_where_the_team_has_a_gpu_quota() -> None:
    policy = _policy("trainyard-gpu-quota")
    assert denials(policy, _trainjob(), "trainjobs", "vision") == []
    gpu_free = "cpu-only-team"  # every onprem-lab team has a GPU quota; any other namespace has none
    assert denials(policy, _trainjob(), "trainjobs", gpu_free)
    assert denials(policy, _trainjob(resourcesPerNode={"limits": {"cpu": 4}}), "trainjobs", gpu_free) == []


@pytest.mark.parametrize(("runtime", "resources", "allowed"), [
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: 32}}, True),
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: "32"}}, True),
    ("torch-distributed-h100", {"requests": {EFA_RESOURCE: 32}, "limits": {"nvidia.com/gpu": 8}}, True),
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8}}, False),  # NCCL would fall back to TCP
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: 4}}, False),
    ("torch-distributed-h100", None, False),
    ("torch-distributed", {"limits": {"nvidia.com/gpu": 8}}, True),  # the generic runtime: any pool
])
def test_trainjobs_on_efa_runtimes_request_every_efa_interface(runtime: str, resources: dict[str, Any] | None,
                                                               allowed: bool) -> None:
    platform = platform_of("aws-prod")
    # 32 interfaces per p5.48xlarge
    assert fabric_runtimes(platform)["torch-distributed-h100"] == {"resource": EFA_RESOURCE, "count": 32}
    job = _trainjob()
    job["spec"]["runtimeRef"]["name"] = runtime
    if resources is None:
        del job["spec"]["trainer"]["resourcesPerNode"]
    else:
        job["spec"]["trainer"]["resourcesPerNode"] = resources
    policy = policies(platform)["trainyard-fabric-request"]
    assert (denials(policy, job, "trainjobs", "vision") == []) is allowed


@pytest.mark.parametrize(("limits", "allowed"), [
    ({"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}, True),
    ({"nvidia.com/gpu": 8}, False),
])
def test_trainjobs_on_infiniband_runtimes_request_the_declared_rdma_device(limits: dict[str, Any],
                                                                         allowed: bool) -> None:
    job = _trainjob(resourcesPerNode={"limits": limits})
    job["spec"]["runtimeRef"]["name"] = "torch-distributed-h100"
    policy = _policy("trainyard-fabric-request")
    assert (denials(policy, job, "trainjobs", "vision") == []) is allowed


def test_stacks_without_fabric_devices_have_no_fabric_policy() -> None:
    for stack in ("gcp-prod", "azure-prod", "local"):
        assert "trainyard-fabric-request" not in policies(platform_of(stack)), stack
