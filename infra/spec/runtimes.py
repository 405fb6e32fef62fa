"""ClusterTrainingRuntimes: the manifests in runtimes/, adapted to a stack's pools.

A runtime is cluster-scoped while fabric and topology belong to a pool, so a stack gets every runtime it lists
in two shapes (runtimes/README.md):
- `<runtime>`: runs on any pool its jobs' queue admits them to; tolerates the GPU pools' taints (CPU-only
  runtimes: the CPU pools' taints), no fabric settings, no topology request;
- `<runtime>-<pool>` for each GPU pool with a fabric or a topology: pinned to that pool by its node label,
  with the pool's NCCL/libfabric environment and the Kueue topology annotation for its narrowest level.
  torchtune runtimes are the exception (`variant_name`): Trainer 2.2 reads the model from the runtime's name.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import yaml

from infra import vocabulary
from infra.kit import paths
from infra.spec.base import parse_quantity
from infra.spec.queues.flavors import distinct_tolerations

if TYPE_CHECKING:
    from infra.spec.derive import Flavor
    from infra.spec.platform import TrainerSpec
    from infra.spec.pools import PoolSpec

RUNTIMES_DIR = paths.RUNTIMES
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
ACCELERATOR_LABEL = "trainyard.io/accelerator"  # "none" on runtimes that must stay off GPU pools
TOPOLOGY_ANNOTATION = {"preferred": "kueue.x-k8s.io/podset-preferred-topology",
                       "required": "kueue.x-k8s.io/podset-required-topology"}
PODSET_GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
TRAINER_JOBS = ("node", "launcher")  # replicated jobs that train (initializers only download)

# Per fabric, what NCCL (and libfabric for EFA) need to use it; a stack adds or overrides with trainer.fabricEnv.
# EFA: the aws-ofi-nccl plugin over libfabric's efa provider; fork-safe for DataLoader workers.
# InfiniBand and RoCE: NCCL's IB verbs transport on the Mellanox HCAs (NCCL_IB_HCA is a prefix list);
# the RoCE v2 GID index is detected by NCCL.
FABRIC_ENV: dict[str, dict[str, str]] = {
    "efa": {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"},
    "infiniband": {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5"},
    "roce": {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5"},
}


def available() -> tuple[str, ...]:
    return tuple(sorted(path.stem for path in RUNTIMES_DIR.glob("*.yaml")))


@functools.cache
def _parsed(name: str) -> dict[str, Any]:
    document = yaml.load((RUNTIMES_DIR / f"{name}.yaml").read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    if not isinstance(document, dict) or document.get("kind") != "ClusterTrainingRuntime":
        raise ValueError(f"runtimes/{name}.yaml is not a ClusterTrainingRuntime")
    return document


def read(name: str) -> dict[str, Any]:
    """A fresh copy of runtimes/<name>.yaml (parsed once per process)."""
    return copy.deepcopy(_parsed(name))


def replicated_jobs(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(runtime["spec"]["template"]["spec"]["replicatedJobs"])


def pod_specs(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod spec of every replicated job in a runtime (mutable views into it)."""
    return [job["template"]["spec"]["template"]["spec"] for job in replicated_jobs(runtime)]


def cpu_only(runtime: Mapping[str, Any]) -> bool:
    return runtime["metadata"].get("labels", {}).get(ACCELERATOR_LABEL) == "none"


def _containers(pod: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod.get("initContainers", [])
    yield from pod.get("containers", [])


def requested_resources(runtime: Mapping[str, Any]) -> dict[str, Decimal]:
    """Resource name -> the largest amount one container asks for (requests, or limits where Kubernetes
    copies them to requests): what a Kueue queue must cover before it admits the runtime's jobs."""
    amounts: dict[str, Decimal] = {}
    for pod in pod_specs(runtime):
        for container in _containers(pod):
            resources = container.get("resources", {})
            for name, value in {**resources.get("limits", {}), **resources.get("requests", {})}.items():
                amounts[name] = max(amounts.get(name, Decimal(0)), parse_quantity(value))
    return amounts


def tolerates(runtime: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """Whether every pod of the runtime tolerates a node taint (Kubernetes' matching rules)."""
    return all(any(vocabulary.tolerates(t, taint) for t in pod.get("tolerations", [])) for pod in pod_specs(runtime))


def _add_tolerations(runtime: dict[str, Any], tolerations: Sequence[Mapping[str, str]]) -> None:
    for pod in pod_specs(runtime):
        existing = pod.setdefault("tolerations", [])
        existing.extend(dict(t) for t in tolerations if dict(t) not in existing)


def render(name: str, tolerations: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The generic runtime: the manifest plus tolerations for the pools it may run on."""
    runtime = read(name)
    _add_tolerations(runtime, tolerations)
    return runtime


def _set_env(container: dict[str, Any], env: Mapping[str, str]) -> None:
    if not env:
        return
    entries = [e for e in container.get("env", []) if e["name"] not in env]
    container["env"] = entries + [{"name": key, "value": value} for key, value in env.items()]


def variant_name(runtime: Mapping[str, Any], pool: str) -> str:
    """`<runtime>-<pool>`; for torchtune `<framework>.<pool>-<model>-<size>` (pool dashes as dots): Trainer
    2.2.1 refuses `tune run` unless the runtime name has exactly three dash-separated parts, the last two
    naming the model (kubeflow/trainer v2.2.1 pkg/runtime/framework/plugins/torch/torchtune.go)."""
    name = runtime["metadata"]["name"]
    if runtime["metadata"].get("labels", {}).get(FRAMEWORK_LABEL) != "torchtune":
        return f"{name}-{pool}"
    first, rest = name.split("-", 1)
    return f"{first}.{pool.replace('-', '.')}-{rest}"


def variant(name: str, pool: str, node_labels: Mapping[str, str], tolerations: Sequence[Mapping[str, str]],
            env: Mapping[str, str], topology: tuple[str, str] | None) -> dict[str, Any]:
    """`<name>-<pool>`: pinned to the pool, its fabric environment on the training containers and, when the
    pool declares topology, the Kueue topology request `(mode, level label)` on the training pod sets (one
    pod-set group, so an MPI launcher lands in the same domain as its nodes)."""
    runtime = render(name, tolerations)
    runtime["metadata"]["name"] = variant_name(runtime, pool)
    trainers = [job for job in replicated_jobs(runtime) if job["name"] in TRAINER_JOBS]
    for job in trainers:
        template = job["template"]["spec"]["template"]
        template["spec"]["nodeSelector"] = {**template["spec"].get("nodeSelector", {}), **node_labels}
        for container in template["spec"]["containers"]:
            _set_env(container, env)
        if topology:
            mode, level = topology
            annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[TOPOLOGY_ANNOTATION[mode]] = level
            if len(trainers) > 1:
                annotations[PODSET_GROUP_ANNOTATION] = "trainer"
    return runtime


def fabric_env(fabric: str, overrides: Mapping[str, str]) -> dict[str, str]:
    return {**FABRIC_ENV.get(fabric, {}), **overrides}


def render_stack(trainer: TrainerSpec, flavors: Sequence[Flavor],
                 pools: Mapping[str, PoolSpec]) -> tuple[dict[str, Any], ...]:
    """Every runtime the stack lists, generic and per pool with fabric or topology, in a stable order."""
    gpu = [f for f in flavors if f.gpu_resources]
    gpu_tolerations = distinct_tolerations(gpu)
    cpu_tolerations = distinct_tolerations([f for f in flavors if not f.gpu_resources])
    overrides: dict[str, Mapping[str, str]] = {str(k): v for k, v in trainer.fabric_env.items()}
    rendered: list[dict[str, Any]] = []
    for name in trainer.runtimes:
        if cpu_only(read(name)):
            rendered.append(render(name, cpu_tolerations))
            continue
        rendered.append(render(name, gpu_tolerations))
        for flavor in gpu:
            pool = pools[flavor.pool]
            levels = list(flavor.topology_levels.values())
            if pool.fabric == "none" and not levels:
                continue
            topology = (trainer.topology, levels[-1]) if levels else None
            rendered.append(variant(name, flavor.name, dict(flavor.node_labels), flavor.tolerations,
                                    fabric_env(pool.fabric, overrides.get(pool.fabric, {})), topology))
    return tuple(rendered)
