"""ClusterTrainingRuntimes: every manifest in runtimes/ is valid for the pinned Trainer (its CRD and its API
models), pinned, Pod Security "restricted", tolerates the right pools, and the `<runtime>-<pool>` variants carry
the fabric settings and the Kueue topology request exactly where a pool declares them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubeflow_trainer_api.models import TrainerV1alpha1ClusterTrainingRuntime

from infra.apiserver.schema import CrdIndex, check_custom
from infra.spec import SpecError, validate
from infra.spec import runtimes as rt
from infra.spec.versions import DEFAULT_TRAINER, Versions
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw

RUNTIMES = rt.available()
TOPOLOGY_KEYS = ("kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-required-topology")
GKE = {"block": "cloud.google.com/gce-topology-block", "subblock": "cloud.google.com/gce-topology-subblock",
       "host": "cloud.google.com/gce-topology-host"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret", "name"}


def restricted_problems(pod: Mapping[str, Any]) -> list[str]:
    """What Pod Security "restricted" (Kubernetes 1.34) would refuse in a pod spec."""
    problems = []
    pod_ctx = pod.get("securityContext", {})
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append("host namespaces")
    for volume in pod.get("volumes", []):
        if set(volume) - RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: {sorted(set(volume) - RESTRICTED_VOLUMES)}")
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        ctx, name = container.get("securityContext", {}), container["name"]
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            problems.append(f"{name}: runAsNonRoot is not true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            problems.append(f"{name}: runs as uid 0")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile {seccomp}")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if "ALL" not in ctx.get("capabilities", {}).get("drop", []):
            problems.append(f"{name}: capabilities not dropped")
        if set(ctx.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities")
        if ctx.get("privileged"):
            problems.append(f"{name}: privileged")
    return problems


def _trainer_index(crds: Path) -> CrdIndex:
    return CrdIndex(crds, Versions().crd_dirs())


def _containers(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for pod in rt.pod_specs(runtime) for c in [*pod.get("initContainers", []), *pod["containers"]]]


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _annotations(runtime: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Replicated job -> its pod template annotations."""
    return {job["name"]: job["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
            for job in rt.replicated_jobs(runtime)}


def _by_name(runtimes: Any) -> dict[str, Mapping[str, Any]]:
    return {r["metadata"]["name"]: r for r in runtimes}


@pytest.mark.parametrize("name", RUNTIMES)
def test_every_runtime_file_validates_against_the_pinned_trainer_crd(name: str, crds_dir: Path) -> None:
    assert Versions().crd_dirs()["trainer"] == "trainer/v2.2"
    assert check_custom(rt.read(name), _trainer_index(crds_dir)) == []


@pytest.mark.parametrize("name", RUNTIMES)
def test_every_runtime_round_trips_through_the_trainer_api_model(name: str) -> None:
    """kubeflow-trainer-api 2.2.1 drops fields it does not know and rejects wrong types: a lossless round trip
    means the manifest is exactly what Trainer 2.2.1's types describe."""
    manifest = rt.read(name)
    assert TrainerV1alpha1ClusterTrainingRuntime.from_dict(manifest).to_dict() == manifest


def test_the_full_runtime_set_is_there() -> None:
    frameworks = {rt.read(n)["metadata"]["labels"]["trainer.kubeflow.org/framework"] for n in RUNTIMES}
    assert {"torch", "deepspeed", "mpi", "jax", "xgboost", "mlx", "torchtune", "plainml"} <= frameworks
    assert {"torch-distributed", "torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b",
            "cpu-batch"} <= set(RUNTIMES)
    assert [n for n in RUNTIMES if rt.cpu_only(rt.read(n))] == ["cpu-batch"]


@pytest.mark.parametrize("name", RUNTIMES)
def test_images_are_pinned_and_trainer_images_at_the_release(name: str) -> None:
    for container in _containers(rt.read(name)):
        image = container["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest" and "/" not in tag, image
        if repository.startswith("ghcr.io/kubeflow/trainer/"):
            assert tag == f"v{DEFAULT_TRAINER}", image


@pytest.mark.parametrize("name", RUNTIMES)
def test_every_pod_is_pod_security_restricted(name: str) -> None:
    for pod in rt.pod_specs(rt.read(name)):
        assert restricted_problems(pod) == []


def test_the_restricted_check_can_fail() -> None:
    pod = rt.pod_specs(rt.read("deepspeed-distributed"))[1]
    pod["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    assert len(restricted_problems(pod)) == 3


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_runtimes_of_every_stack_are_valid(stack: str, crds_dir: Path) -> None:
    platform = platform_of(stack)
    index = _trainer_index(crds_dir)
    rendered = kube_objects(capture_of(stack), "ClusterTrainingRuntime")
    assert sorted(r["metadata"]["name"] for r in rendered) == sorted(_by_name(platform.runtimes))
    for runtime in rendered:
        assert check_custom(runtime, index) == [], runtime["metadata"]["name"]
    for declared in platform.runtimes:
        assert TrainerV1alpha1ClusterTrainingRuntime.from_dict(dict(declared)).to_dict() == declared


def test_generic_gpu_runtimes_tolerate_every_gpu_pool_and_cpu_batch_only_cpu_pools() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["cpu"]["taints"] = [{"key": "trainyard.io/batch", "value": "spare"}]
    platform = validate(raw, "onprem-lab")
    gpu_taints = [t for f in platform.flavors if f.gpu_resources for t in f.taints]
    cpu_taint = {"key": "trainyard.io/batch", "value": "spare", "effect": "NoSchedule"}
    assert gpu_taints
    runtimes = _by_name(platform.runtimes)
    for name in RUNTIMES:
        runtime = runtimes[name]
        if name == "cpu-batch":
            assert not any(rt.tolerates(runtime, t) for t in gpu_taints)
            assert rt.tolerates(runtime, cpu_taint)
        else:
            assert all(rt.tolerates(runtime, t) for t in gpu_taints), name
            assert not rt.tolerates(runtime, cpu_taint), name


def _mixed_stack() -> dict[str, Any]:
    """onprem-lab plus a RoCE pool without topology and a pool with GKE's topology labels and no fabric (EFA is
    AWS-only: its variants are checked on aws-prod)."""
    raw = raw_platform("onprem-lab")
    raw["pools"]["a100"] = {"gpu": "A100-SXM-80GB", "perNode": 8, "nodes": ["gpu-c01", "gpu-c02"], "fabric": "roce",
                            "fabricDevice": {"resource": "rdma/rdma_shared_device_b"}}
    raw["pools"]["h200"] = {"gpu": "H200-SXM-141GB", "perNode": 8, "nodes": ["gpu-d01", "gpu-d02"],
                            "topology": GKE}
    return raw


def _variants(names: Sequence[str], pools: Sequence[str]) -> dict[str, str]:
    """Variant name -> its pool, for these runtimes on these pools."""
    return {rt.variant_name(rt.read(name), pool): pool for name in names for pool in pools}


def test_torchtune_variants_keep_the_model_in_the_three_part_name() -> None:
    assert rt.variant_name(rt.read("torchtune-llama3.2-1b"), "h100") == "torchtune.h100-llama3.2-1b"
    assert rt.variant_name(rt.read("torchtune-qwen2.5-1.5b"), "p5-spot") == "torchtune.p5.spot-qwen2.5-1.5b"
    assert rt.variant_name(rt.read("torch-distributed"), "p5-spot") == "torch-distributed-p5-spot"


def test_topology_annotation_exactly_where_the_pool_declares_topology() -> None:
    raw = _mixed_stack()
    platform = validate(raw, "onprem-lab")
    runtimes = _by_name(platform.runtimes)
    gpu_runtimes = [n for n in RUNTIMES if n != "cpu-batch"]
    narrowest = {"h100": raw["pools"]["h100"]["topology"]["rack"], "h200": GKE["host"]}
    variants = _variants(gpu_runtimes, ("h100", "a100", "h200"))
    assert set(runtimes) == {*gpu_runtimes, *variants, "cpu-batch"}  # l40s and cpu: neither fabric nor topology
    for name, runtime in runtimes.items():
        requested = {key: value for ann in _annotations(runtime).values() for key, value in ann.items()
                     if key in TOPOLOGY_KEYS}
        pool = variants.get(name)
        if pool in narrowest:
            assert requested == {TOPOLOGY_KEYS[0]: narrowest[pool]}, name
            trainers = [job for job, ann in _annotations(runtime).items() if TOPOLOGY_KEYS[0] in ann]
            assert set(trainers) == {job["name"] for job in rt.replicated_jobs(runtime)} & {"node", "launcher"}
        else:
            assert requested == {}, name
    capture = run_raw("onprem-lab", raw)
    flavors = {f["metadata"]["name"]: f["spec"] for f in kube_objects(capture, "ResourceFlavor")}
    topologies = {t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
                  for t in kube_objects(capture, "Topology")}
    assert {name for name, spec in flavors.items() if "topologyName" in spec} == {"h100", "h200"}
    assert topologies[flavors["h200"]["topologyName"]] == [*GKE.values(), "kubernetes.io/hostname"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_requests_topology_only_on_variants_of_pools_with_topology(stack: str) -> None:
    platform = platform_of(stack)
    with_topology = {name: list(pool.topology_levels().values()) for name, pool in platform.spec.pools.items()
                     if pool.topology_levels()}
    for runtime in kube_objects(capture_of(stack), "ClusterTrainingRuntime"):
        name = runtime["metadata"]["name"]
        requested = {v for ann in _annotations(runtime).values() for k, v in ann.items() if k in TOPOLOGY_KEYS}
        pool = _variants(RUNTIMES, tuple(with_topology)).get(name)
        assert requested == ({with_topology[pool][-1]} if pool else set()), (stack, name)


def test_variants_carry_their_fabric_and_are_pinned_to_their_pool() -> None:
    raw = _mixed_stack()
    raw["trainer"]["fabricEnv"] = {"infiniband": {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}}
    runtimes = _by_name(validate(raw, "onprem-lab").runtimes)
    ib = [_env(c) for c in _containers(runtimes["torch-distributed-h100"])]
    roce = [_env(c) for c in _containers(runtimes["deepspeed-distributed-a100"])]
    efa = [_env(c) for c in _containers(_by_name(platform_of("aws-prod").runtimes)["deepspeed-distributed-h100"])]
    assert all(env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1" and env["NCCL_IB_DISABLE"] == "0" for env in ib)
    assert all(env["NCCL_IB_HCA"] == "mlx5" and "FI_PROVIDER" not in env for env in roce) and len(roce) == 2
    assert all(env["FI_PROVIDER"] == "efa" for env in efa) and len(efa) == 2  # launcher and node
    topology_only = [_env(c) for c in _containers(runtimes["jax-distributed-h200"])]
    assert not any("FI_PROVIDER" in env or "NCCL_IB_HCA" in env for env in topology_only)
    for name in RUNTIMES:
        if name != "cpu-batch":
            assert not any(k.startswith(("NCCL_", "FI_")) for c in _containers(runtimes[name]) for k in _env(c))
    for pool in ("h100", "a100", "h200"):
        variant = runtimes[f"torch-distributed-{pool}"]
        pods = rt.pod_specs(variant)
        assert all(pod["nodeSelector"]["trainyard.io/pool"] == pool for pod in pods)
        assert {t["key"] for pod in pods for t in pod["tolerations"]} == {"nvidia.com/gpu"}


def test_mpi_variants_place_launcher_and_nodes_as_one_group() -> None:
    runtime = _by_name(platform_of("onprem-lab").runtimes)["mpi-distributed-h100"]
    annotations = _annotations(runtime)
    assert set(annotations) == {"launcher", "node"}
    assert {a["kueue.x-k8s.io/podset-group-name"] for a in annotations.values()} == {"trainer"}
    single = _annotations(_by_name(platform_of("onprem-lab").runtimes)["torch-distributed-h100"])
    assert "kueue.x-k8s.io/podset-group-name" not in single["node"]


def test_required_topology_when_the_stack_asks_for_it() -> None:
    raw = raw_platform("onprem-lab")
    raw["trainer"]["topology"] = "required"
    runtime = _by_name(validate(raw, "onprem-lab").runtimes)["torch-distributed-h100"]
    assert _annotations(runtime)["node"] == {TOPOLOGY_KEYS[1]: raw["pools"]["h100"]["topology"]["rack"]}


def test_a_stack_installs_exactly_the_runtimes_it_lists() -> None:
    raw = raw_platform("onprem-lab")
    raw["trainer"]["runtimes"] = ["cpu-batch", "jax-distributed"]
    assert set(_by_name(validate(raw, "onprem-lab").runtimes)) == {"cpu-batch", "jax-distributed",
                                                                   "jax-distributed-h100"}


@pytest.mark.parametrize("runtimes, message", [
    (["torchx"], "unknown runtime 'torchx'"),
    (["cpu-batch", "cpu-batch"], "listed twice"),
])
def test_bad_runtime_lists_are_config_errors(runtimes: list[str], message: str) -> None:
    raw = raw_platform("onprem-lab")
    raw["trainer"]["runtimes"] = runtimes
    with pytest.raises(SpecError) as error:
        validate(raw, "onprem-lab")
    assert "trainer.runtimes" in error.value.path and message in error.value.message
