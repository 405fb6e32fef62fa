"""Flavors: one Kueue ResourceFlavor per pool and the capacity it offers, per resource name.

How a pool offers its GPUs decides the resource names that flavors, team quotas and the capacity check share:
- whole GPUs: `nvidia.com/gpu`, GPUs x nodes;
- time-slicing or MPS with R replicas: `nvidia.com/gpu`, GPUs x R x nodes;
- MIG with one profile per pool: `nvidia.com/mig-<profile>` (the GPU Operator's `mixed` strategy), GPUs x
  instances-per-GPU x nodes; on GKE's own GPU stack the partitions are `nvidia.com/gpu`, as GKE exposes them.
Capacity counts the nodes a pool always has (an autoscaled pool's minimum); `max_capacity` counts its maximum,
which the cohort can lend but no team is guaranteed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Literal, TypeVar

from infra.components import GPU_OPERATOR, ISTIO, MESH_AGENT_TOLERATION
from infra.spec.base import parse_quantity
from infra.spec.catalog import gpu_model
from infra.spec.clouds import CLOUDS
from infra.spec.clouds.facts import NodeReserve
from infra.spec.cluster import ClusterSpec, GpuStack
from infra.spec.pools import GPU_RESOURCE, POOL_LABEL, PoolSpec, Taint

T = TypeVar("T")

CPU, MEMORY = "cpu", "memory"
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"  # k8s-device-plugin: per-node config selection
MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # MIG manager: the mig-parted config a node applies
# AKS taints every Spot node with this itself; a flavor for a Spot pool must tolerate it.
AKS_SPOT_TAINT = Taint(key="kubernetes.azure.com/scalesetpriority", value="spot")


@dataclass(frozen=True)
class GpuOffer:
    """How a pool's GPUs appear to the scheduler."""

    model: str
    per_node: int  # physical GPUs per node
    resource: str  # nvidia.com/gpu or nvidia.com/mig-<profile>
    units_per_gpu: int  # time-slicing/MPS replicas, or MIG instances of the profile; 1 for whole GPUs
    sharing: Literal["none", "time-slicing", "mps", "mig"]
    mig_profile: str | None
    config: str | None  # device-plugin / MIG config key the pool's nodes select by label (operator stacks)

    @property
    def units_per_node(self) -> int:
        return self.per_node * self.units_per_gpu


@dataclass(frozen=True)
class Flavor:
    """One Kueue ResourceFlavor per pool, and the capacity it offers per resource name."""

    name: str
    pool: str
    node_labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    tolerations: tuple[Mapping[str, str], ...]
    capacity: Mapping[str, Decimal]  # guaranteed: the nodes the pool always has
    gpu_resources: tuple[str, ...]
    topology_levels: Mapping[str, str]
    capacity_type: str
    max_capacity: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))  # at max nodes
    origin: str = ""  # what the capacity is derived from, for people: "4 x p5.48xlarge (8 x H100-SXM-80GB)"
    gpu: GpuOffer | None = None
    # What team pods can request: the capacity less what each node's kubelet keeps (the cloud's published
    # formula; on an existing cluster the declared per-node figures count as the kubelet's allocatable) and what
    # the platform's DaemonSets request there (components' node_requests). Quotas are held to it.
    allocatable: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    max_allocatable: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    kubelet_reserve: NodeReserve = field(default_factory=lambda: NodeReserve(Decimal(0), Decimal(0)))  # per node


def _each_once(items: Sequence[T]) -> list[T]:
    """The items in order, each once (mappings are not hashable: compared by equality)."""
    return [item for i, item in enumerate(items) if item not in items[:i]]


def gpu_taints(flavors: Sequence[Flavor]) -> list[dict[str, str]]:
    """The taints of the pools that offer GPUs, each once, with `value` always present ('' when unset)."""
    return _each_once([{"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]}
                       for flavor in flavors if flavor.gpu_resources for t in flavor.taints])


def distinct_tolerations(flavors: Sequence[Flavor]) -> list[Mapping[str, str]]:
    """The tolerations that let a pod onto every one of these flavors' pools, each once, in order."""
    return _each_once([t for flavor in flavors for t in flavor.tolerations])


def gpu_offer(name: str, pool: PoolSpec, stack: GpuStack) -> GpuOffer | None:
    if pool.gpu is None or pool.per_node is None:
        return None
    config = name if stack.operator else None
    if pool.mig is not None:
        per_gpu = gpu_model(pool.gpu).mig_per_gpu(pool.mig.profile)
        resource = GPU_RESOURCE if stack.cloud_sharing else f"nvidia.com/mig-{pool.mig.profile}"
        return GpuOffer(pool.gpu, pool.per_node, resource, per_gpu, "mig", pool.mig.profile, config)
    strategy = pool.sharing.strategy
    return GpuOffer(pool.gpu, pool.per_node, GPU_RESOURCE, pool.sharing.replicas, strategy, None,
                    config if strategy != "none" else None)


def _capacity(pool: PoolSpec, offer: GpuOffer | None, nodes: int, reserve: NodeReserve | None = None
              ) -> dict[str, Decimal]:
    """The pool's resources at `nodes` nodes; with `reserve`, less what each node keeps from team pods."""
    kept = reserve or NodeReserve(Decimal(0), Decimal(0))
    capacity = {CPU: max(parse_quantity(pool.cpu) - kept.cpu, Decimal(0)) * nodes,
                MEMORY: max(parse_quantity(pool.memory) - kept.memory, Decimal(0)) * nodes}
    if offer is not None:
        capacity[offer.resource] = Decimal(offer.units_per_node * nodes)
    return capacity


def kubelet_reserve(pool: PoolSpec, cluster: ClusterSpec) -> NodeReserve:
    """What the kubelet of one node of the pool keeps, where the cloud publishes it (else nothing)."""
    reserve, machine = CLOUDS[cluster.kind].kubelet_reserve, pool.machine
    return reserve(machine) if reserve is not None and machine is not None else NodeReserve(Decimal(0), Decimal(0))


def platform_reserve(cluster: ClusterSpec, mesh_agent: bool = False) -> NodeReserve:
    """What the platform's own DaemonSets request on every node of a pool: the GPU Operator's, where it runs (taken
    on every pool: the render may show fewer, never more), and Istio's CNI agent where it runs (`mesh_agent`)."""
    parts = [*(GPU_OPERATOR.node_requests if cluster.gpu_stack().operator else ()),
             *(ISTIO.node_requests if mesh_agent else ())]
    return NodeReserve(sum((parse_quantity(q) for r, q in parts if r == CPU), Decimal(0)),
                       sum((parse_quantity(q) for r, q in parts if r == MEMORY), Decimal(0)))


def _origin(pool: PoolSpec, offer: GpuOffer | None) -> str:
    nodes = f"{pool.autoscale.min}-{pool.autoscale.max}" if pool.autoscale else str(pool.node_count)
    what = f"{nodes} x {pool.instance_type}" if pool.instance_type else f"{nodes} nodes"
    if offer is None:
        return f"{what} ({pool.cpu} cpu, {pool.memory} each)"
    units = {"none": "", "time-slicing": f", time-sliced x{offer.units_per_gpu}",
             "mps": f", MPS x{offer.units_per_gpu}",
             "mig": f", MIG {offer.mig_profile} x{offer.units_per_gpu} per GPU"}[offer.sharing]
    return f"{what} ({offer.per_node} x {offer.model}{units})"


def _node_labels(name: str, pool: PoolSpec, offer: GpuOffer | None) -> dict[str, str]:
    """The pool label, the stack's labels, and the labels that select the pool's device-plugin / MIG config."""
    labels = {POOL_LABEL: name, **pool.labels}
    if offer is not None and offer.config is not None:
        labels[MIG_CONFIG_LABEL if offer.sharing == "mig" else DEVICE_PLUGIN_LABEL] = offer.config
    return labels


def _taints(pool: PoolSpec, cluster: ClusterSpec) -> list[Taint]:
    taints = pool.effective_taints()
    if cluster.aks is not None and pool.capacity_type == "spot":
        taints.append(AKS_SPOT_TAINT)
    return taints


def build_flavor(name: str, pool: PoolSpec, cluster: ClusterSpec, mesh_agent: bool = False) -> Flavor:
    """`mesh_agent`: the stack runs Istio's CNI agent (Pipelines' sidecars need it); it lands on untainted pools."""
    offer = gpu_offer(name, pool, cluster.gpu_stack())
    taints = _taints(pool, cluster)
    kubelet = kubelet_reserve(pool, cluster)
    agents = platform_reserve(cluster, mesh_agent and all(t.key == MESH_AGENT_TOLERATION for t in taints))
    reserve = NodeReserve(kubelet.cpu + agents.cpu, kubelet.memory + agents.memory)
    return Flavor(
        name=name,
        pool=name,
        node_labels=MappingProxyType(_node_labels(name, pool, offer)),
        taints=tuple(taint.as_k8s() for taint in taints),
        tolerations=tuple(taint.as_toleration() for taint in taints),
        capacity=MappingProxyType(_capacity(pool, offer, pool.node_count)),
        gpu_resources=(offer.resource,) if offer else (),
        topology_levels=MappingProxyType(pool.topology_levels()),
        capacity_type=pool.capacity_type,
        max_capacity=MappingProxyType(_capacity(pool, offer, pool.max_node_count)),
        origin=_origin(pool, offer),
        gpu=offer,
        allocatable=MappingProxyType(_capacity(pool, offer, pool.node_count, reserve)),
        max_allocatable=MappingProxyType(_capacity(pool, offer, pool.max_node_count, reserve)),
        kubelet_reserve=kubelet,
    )
