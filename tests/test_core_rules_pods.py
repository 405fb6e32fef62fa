"""The API server's refusals of a pod spec beyond its schema (infra/apiserver/core_rules/pods.py, resources.py), through
check_core, the entry point `trainyard validate`, `plan` and `admit` use: each rule at its edge, the valid object
admitted and the one just past refused with the server's text (k8s.io/kubernetes pkg/apis/core/validation)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.schema import check_core

K8S = "1.34"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"containers": list(containers), **spec}}


def _container(name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, **fields}


def _problems(pod: dict[str, Any]) -> list[str]:
    return check_core(pod, K8S)


def test_a_plain_pod_is_admitted() -> None:
    assert _problems(_pod(_container())) == []


def test_containers_are_required() -> None:
    assert "spec.containers: Required value" in _problems(_pod())


def test_container_names_are_unique_across_init_and_regular_containers() -> None:
    assert _problems(_pod(_container(), initContainers=[_container("setup")])) == []
    assert _problems(_pod(_container(), initContainers=[_container("main")])) == [
        'spec.initContainers[0].name: Duplicate value: "main"']
    assert _problems(_pod(_container(), _container())) == ['spec.containers[1].name: Duplicate value: "main"']


def test_a_container_name_is_a_dns_label_of_at_most_63_characters() -> None:
    assert _problems(_pod(_container("a" * 63))) == []
    assert _problems(_pod(_container("a" * 64))) == [
        f'spec.containers[0].name: Invalid value: "{"a" * 64}": must be no more than 63 characters']
    assert any(p.startswith('spec.containers[0].name: Invalid value: "Main": a lowercase RFC 1123 label')
               for p in _problems(_pod(_container("Main"))))


def test_a_container_needs_an_image() -> None:
    container = _container()
    del container["image"]
    assert _problems(_pod(container)) == ["spec.containers[0].image: Required value"]
    assert _problems(_pod(_container(), initContainers=[{"name": "setup"}])) == [
        "spec.initContainers[0].image: Required value"]


def test_a_volume_mount_names_a_volume_of_the_pod() -> None:
    mounted = _container(volumeMounts=[{"name": "data", "mountPath": "/data"}])
    assert _problems(_pod(mounted, volumes=[{"name": "data", "emptyDir": {}}])) == []
    assert _problems(_pod(mounted, volumes=[{"name": "date", "emptyDir": {}}])) == [
        'spec.containers[0].volumeMounts[0].name: Not found: "data"']
    # a volume whose name is refused is no volume a container can mount
    assert _problems(_pod(_container(volumeMounts=[{"name": "Data", "mountPath": "/data"}]),
                          volumes=[{"name": "Data", "emptyDir": {}}]))[-1] == \
        'spec.containers[0].volumeMounts[0].name: Not found: "Data"'


def test_volume_names_are_unique() -> None:
    volumes = [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]
    assert _problems(_pod(_container(), volumes=volumes)) == ['spec.volumes[1].name: Duplicate value: "data"']


def test_mount_paths_are_unique_per_container() -> None:
    mounts = [{"name": "a", "mountPath": "/data"}, {"name": "b", "mountPath": "/data"}]
    volumes = [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]
    assert _problems(_pod(_container(volumeMounts=mounts), volumes=volumes)) == [
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique']


def test_a_volume_device_names_a_claim_of_the_pod() -> None:
    device = _container(volumeDevices=[{"name": "disk", "devicePath": "/dev/xvda"}])
    assert _problems(_pod(device, volumes=[{"name": "disk", "persistentVolumeClaim": {"claimName": "c"}}])) == []
    assert _problems(_pod(device)) == ['spec.containers[0].volumeDevices[0].name: Not found: "disk"']
    assert _problems(_pod(device, volumes=[{"name": "disk", "emptyDir": {}}])) == [
        'spec.containers[0].volumeDevices[0].name: Invalid value: "disk": can only use volume source type of '
        'PersistentVolumeClaim or Ephemeral for block mode']


def _resources(requests: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    return _pod(_container(resources={k: v for k, v in (("requests", requests), ("limits", limits)) if v}))


GPU = "nvidia.com/gpu"


def test_a_gpu_request_equal_to_its_limit_is_admitted_one_more_is_refused() -> None:
    assert _problems(_resources({GPU: 1}, {GPU: 1})) == []
    assert _problems(_resources({GPU: "2"}, {GPU: "1"})) == [
        'spec.containers[0].resources.requests: Invalid value: "2": must be equal to nvidia.com/gpu limit of 1']
    assert _problems(_resources({GPU: 1}, {GPU: 2})) == [
        'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2']


def test_a_gpu_limit_alone_is_admitted_a_request_alone_is_refused() -> None:
    assert _problems(_resources({}, {GPU: 4})) == []
    assert _problems(_resources({GPU: 4}, {})) == [
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"]


@pytest.mark.parametrize("name", ["nvidia.com/mig-1g.10gb", "rdma/rdma_shared_device_a", "hugepages-2Mi"])
def test_every_resource_outside_kubernetes_io_and_hugepages_cannot_be_overcommitted(name: str) -> None:
    amount = "2Mi" if name.startswith("hugepages") else 1
    base = {"cpu": "1"} if name.startswith("hugepages") else {}  # hugepages need cpu or memory
    assert _problems(_resources({name: amount, **base}, {name: amount, **base})) == []
    assert _problems(_resources({name: amount, **base}, base))[-1] == (
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources")


def test_an_extended_resource_is_counted_in_whole_units() -> None:
    assert _problems(_resources({}, {GPU: "1000m"})) == []
    assert _problems(_resources({}, {GPU: "500m"})) == [
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer']


@pytest.mark.parametrize(("name", "limit", "at", "past"), [
    ("cpu", "1", "1000m", "1001m"), ("memory", "1Gi", "1024Mi", "1025Mi"),
    ("ephemeral-storage", "10Gi", "10Gi", "11Gi")])
def test_a_native_request_may_reach_its_limit_not_pass_it(name: str, limit: str, at: str, past: str) -> None:
    assert _problems(_resources({name: "1m" if name == "cpu" else "1Mi"}, {name: limit})) == []  # overcommitted
    assert _problems(_resources({name: at}, {name: limit})) == []
    assert _problems(_resources({name: past}, {name: limit})) == [
        f'spec.containers[0].resources.requests: Invalid value: "{past}": must be less than or equal to {name} '
        f"limit of {limit}"]


def test_a_quantity_is_not_negative() -> None:
    assert _problems(_resources({"cpu": "-1"}, {}))[-1] == \
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'


def _ports(*ports: dict[str, Any]) -> dict[str, Any]:
    return _pod(_container(ports=list(ports)))


def test_a_port_name_has_at_most_15_characters() -> None:
    assert _problems(_ports({"name": "a" * 15, "containerPort": 80})) == []
    assert _problems(_ports({"name": "a" * 16, "containerPort": 80})) == [
        f'spec.containers[0].ports[0].name: Invalid value: "{"a" * 16}": must be no more than 15 characters']


@pytest.mark.parametrize(("name", "detail"), [
    ("HTTP", "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
    ("8080", "must contain at least one letter (a-z)"),
    ("metrics--tls", "must not contain consecutive hyphens"),
    ("-metrics", "must not begin or end with a hyphen")])
def test_a_port_name_is_an_iana_service_name(name: str, detail: str) -> None:
    assert f'spec.containers[0].ports[0].name: Invalid value: "{name}": {detail}' in _problems(
        _ports({"name": name, "containerPort": 80}))


def test_port_names_are_unique_per_container() -> None:
    assert _problems(_ports({"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81})) == [
        'spec.containers[0].ports[1].name: Duplicate value: "http"']
    other = _pod(_container(ports=[{"name": "http", "containerPort": 80}]),
                 _container("side", ports=[{"name": "http", "containerPort": 81}]))
    assert _problems(other) == []


def test_a_container_port_is_between_1_and_65535() -> None:
    assert _problems(_ports({"containerPort": 1}, {"containerPort": 65535})) == []
    assert _problems(_ports({"containerPort": 65536})) == [
        "spec.containers[0].ports[0].containerPort: Invalid value: 65536: must be between 1 and 65535, inclusive"]
    assert "spec.containers[0].ports[0].containerPort: Required value" in _problems(_ports({"containerPort": 0}))
    assert _problems(_ports({"containerPort": 80, "hostPort": 65536})) == [
        "spec.containers[0].ports[0].hostPort: Invalid value: 65536: must be between 1 and 65535, inclusive"]


def test_a_pod_restart_policy_defaults_to_always_and_takes_three_values() -> None:
    for policy in ("Always", "OnFailure", "Never"):
        assert _problems(_pod(_container(), restartPolicy=policy)) == []
    assert 'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"' \
        in _problems(_pod(_container(), restartPolicy="Sometimes"))


def test_only_init_containers_take_a_restart_policy() -> None:
    sidecar = _container("proxy", restartPolicy="Always")
    assert _problems(_pod(_container(), initContainers=[sidecar])) == []
    assert "spec.containers[1].restartPolicy: Forbidden: may not be set for non-init containers" in _problems(
        _pod(_container(), copy.deepcopy(sidecar)))


def test_a_malformed_spec_is_the_schemas_finding_not_a_crash() -> None:
    pod = _pod(_container(ports="80", resources={"limits": "all", "requests": {1: "x", "cpu": [1]}}), volumes="none")
    pod["spec"]["containers"].append("not a container")
    assert _problems(pod)  # refused by the schema; the rules read nothing they cannot
