"""Node pools: where GPUs (and CPUs) come from, declared once and turned into nodes, flavors and capacity.

An on-prem pool names its GPU model, GPUs per node, cpu and memory, and lists its nodes. A cloud pool names
an `instanceType` instead: the GPU model, GPUs per node, cpu, memory and fabric are filled in from
infra/spec/clouds, so they are never typed twice, and it gives a fixed `count` or an `autoscale` range.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from infra.spec.base import (
    Bytes,
    DnsLabel,
    LabelKey,
    Labels,
    LabelValue,
    NonNegativeInt,
    PositiveInt,
    Quantity,
    Strict,
    dns_label,
    label_key,
    parse_quantity,
)
from infra.spec.catalog import gpu_model
from infra.spec.clouds import MACHINES, Machine, machine
from infra.spec.clouds.aws import EFA_RESOURCE
from infra.spec.input.errors import shown

POOL_LABEL = "trainyard.io/pool"
# Kubernetes supports clusters of at most 5,000 nodes ("Considerations for large clusters",
# kubernetes.io/docs/setup/best-practices/cluster-large/): a pool (or all pools together) beyond that is a typo.
MAX_NODES = 5000
# One node's cpu and memory, bounded well above the largest machines sold (under a thousand vCPUs; AWS High Bytes
# instances hold tens of TiB: docs.aws.amazon.com/AWSEC2/latest/UserGuide/memory-optimized-instances.html): a
# larger figure is a pool's total or a typo.
MAX_NODE_CPU = 4096
MAX_NODE_MEMORY_TI = 64
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"

Effect = Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]


class Taint(Strict):
    key: LabelKey
    value: LabelValue = ""
    effect: Effect = "NoSchedule"

    def as_k8s(self) -> dict[str, str]:
        taint = {"key": self.key, "effect": self.effect}
        if self.value:
            taint["value"] = self.value
        return taint

    def as_toleration(self) -> dict[str, str]:
        toleration = {"key": self.key, "operator": "Equal" if self.value else "Exists", "effect": self.effect}
        if self.value:
            toleration["value"] = self.value
        return toleration


SharingStrategy = Literal["none", "time-slicing", "mps"]


class Sharing(Strict):
    """How one physical GPU is offered: as R time-sliced or MPS replicas, so a pool offers GPUs x R units of
    nvidia.com/gpu (and team quotas count those units)."""

    time_slicing: int = Field(default=1, alias="timeSlicing", ge=1, le=64)
    mps: int | None = Field(default=None, ge=2, le=48)

    @model_validator(mode="after")
    def _one_strategy(self) -> Sharing:
        if self.mps is not None and self.time_slicing != 1:
            raise ValueError("time-slicing and MPS are exclusive: give either `timeSlicing` or `mps`")
        return self

    @property
    def replicas(self) -> int:
        return self.mps or self.time_slicing

    @property
    def strategy(self) -> SharingStrategy:
        if self.mps is not None:
            return "mps"
        return "time-slicing" if self.time_slicing > 1 else "none"


class Mig(Strict):
    """MIG with one profile per pool: every GPU of the pool's nodes is split into instances of `profile`, and
    the pool offers them (not whole GPUs); team quotas count MIG instances."""

    profile: str = Field(pattern=r"^[1-7]g\.[0-9]+gb$")


class Autoscale(Strict):
    """An autoscaled cloud pool. The rule: teams can be guaranteed only what the `min` nodes hold (the
    capacity check counts `min`); the nodes up to `max` are borrowable through the cohort, and the cloud's
    autoscaler adds them when admitted work does not fit."""

    min: NonNegativeInt = Field(le=MAX_NODES)
    max: PositiveInt = Field(le=MAX_NODES)

    @model_validator(mode="after")
    def _ordered(self) -> Autoscale:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class Topology(Strict):
    """Ordered topology levels, broadest first, as node labels (Kueue TAS appends kubernetes.io/hostname)."""

    levels: dict[DnsLabel, LabelKey]

    @field_validator("levels")
    @classmethod
    def _not_empty(cls, levels: dict[str, str]) -> dict[str, str]:
        if not levels:
            raise ValueError("declare at least one level, e.g. {rack: topology.kubernetes.io/rack}")
        if "kubernetes.io/hostname" in levels.values():
            raise ValueError("kubernetes.io/hostname is always the lowest level: leave it out")
        return levels


class FabricDevice(Strict):
    """The extended resource through which a pod reaches an InfiniBand or RoCE pool's fabric, as the cluster's
    RDMA or SR-IOV device plugin advertises it (with the NVIDIA Network Operator's RDMA shared device plugin,
    e.g. `rdma/rdma_shared_device_a`), and how many of it one training pod per node requests. EFA pools need
    none: their devices follow from the instance type."""

    resource: LabelKey
    per_node: PositiveInt = Field(default=1, alias="perNode")

    @field_validator("resource")
    @classmethod
    def _extended(cls, value: str) -> str:
        if "/" not in value or value.startswith(("kubernetes.io/", "k8s.io/")):
            raise ValueError(f"'{value}' is not an extended resource name: use <domain>/<name>, e.g. "
                             "rdma/rdma_shared_device_a")
        return value


# What a cloud pool's instance type fixes; a stack that also types one of these gets an error.
_FROM_CATALOG = ("gpu", "perNode", "per_node", "cpu", "memory")


class PoolSpec(Strict):
    """A group of identical nodes. GPU pools name a GPU model (or an instance type that has GPUs); CPU pools
    leave `gpu` out. `cpu` and `memory` are one node's (above zero, at most 4096 cores and 64Ti)."""

    instance_type: str | None = Field(default=None, alias="instanceType")
    gpu: str | None = None
    per_node: PositiveInt | None = Field(default=None, alias="perNode")
    nodes: list[DnsLabel] | None = Field(default=None, max_length=MAX_NODES)
    count: PositiveInt | None = Field(default=None, le=MAX_NODES)
    cpu: Quantity = "32"
    memory: Bytes = "128Gi"
    labels: Labels = Field(default_factory=dict)
    taints: list[Taint] | None = None
    capacity_type: Literal["reserved", "on-demand", "spot"] = Field(default="on-demand", alias="capacityType")
    topology: Topology | None = None
    fabric: Literal["none", "efa", "infiniband", "roce"] = "none"
    fabric_device: FabricDevice | None = Field(default=None, alias="fabricDevice")
    sharing: Sharing = Field(default_factory=Sharing)
    mig: Mig | None = None
    autoscale: Autoscale | None = None
    zone: str | None = Field(default=None, pattern=r"^[a-z0-9-]+$")
    reservation: str | None = Field(default=None, min_length=1)
    compact: bool = False
    # What one GPU-hour of this pool costs (one currency for the whole stack; `trainyard report usage`). Default: a
    # cloud pool's list price (infra/spec/clouds/<cloud>.py) over its GPUs; an on-prem pool declares its amortised
    # figure (hardware, power, space and support over the depreciation period, per GPU-hour).
    price_per_gpu_hour: Decimal | None = Field(default=None, alias="pricePerGpuHour", ge=0, le=10000, strict=False,
                                               decimal_places=4)

    @model_validator(mode="before")
    @classmethod
    def _from_catalog(cls, data: Any) -> Any:
        """A known instance type fills in gpu, perNode, cpu, memory and (unless set) fabric."""
        if not isinstance(data, dict):
            return data
        name = data.get("instanceType", data.get("instance_type"))
        if not isinstance(name, str) or name not in MACHINES:
            return data  # an unknown name fails on the instanceType field itself
        entry = MACHINES[name]
        typed = [key for key in _FROM_CATALOG if key in data]
        if typed:
            raise ValueError(f"`{typed[0]}` comes from instanceType {name} ({entry.describe()}): remove it")
        derived: dict[str, Any] = {"cpu": str(entry.vcpu), "memory": f"{entry.memory_gib}Gi"}
        if entry.gpu is not None:
            derived |= {"gpu": entry.gpu, "perNode": entry.gpus}
        # `fabric` stays unset where the machine has none, so that a pool typing `fabric: none` is told apart (a GKE
        # A3 pool: TCP chosen knowingly over the GPUDirect NICs Trainyard does not provision, infra/checks/fabric.py).
        return {**({"fabric": entry.fabric} if entry.fabric != "none" else {}), **data, **derived}

    @field_validator("instance_type")
    @classmethod
    def _known_instance_type(cls, name: str | None) -> str | None:
        if name is not None:
            machine(name)
        return name

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, name: str | None) -> str | None:
        if name is not None:
            gpu_model(name)
        return name

    @field_validator("cpu", "memory")
    @classmethod
    def _one_node(cls, value: str, info: ValidationInfo) -> str:
        amount = parse_quantity(value)
        limit, shown = ((Decimal(MAX_NODE_CPU), f"{MAX_NODE_CPU} cores") if info.field_name == "cpu" else
                        (Decimal(MAX_NODE_MEMORY_TI * 2**40), f"{MAX_NODE_MEMORY_TI}Ti"))
        if amount <= 0:
            raise ValueError(f"{value!r} is nothing: a node needs some {info.field_name}; give what one node has")
        if amount > limit:
            raise ValueError(f"{value!r} is more {info.field_name} than one node has (at most {shown}): give one "
                             "node's, not the pool's")
        return value

    @field_validator("per_node")
    @classmethod
    def _fits_a_node(cls, per_node: int | None, info: ValidationInfo) -> int | None:
        gpu = info.data.get("gpu")
        if per_node is not None and gpu is not None and per_node > gpu_model(gpu).max_per_node:
            model = gpu_model(gpu)
            raise ValueError(f"{per_node} is more {gpu} GPUs than one node holds (at most {model.max_per_node}; "
                             "see infra/spec/catalog.py): give the GPUs of one node, not of the pool")
        return per_node

    @field_validator("taints")
    @classmethod
    def _distinct_taints(cls, taints: list[Taint] | None) -> list[Taint] | None:
        seen: set[tuple[str, str]] = set()
        for taint in taints or []:
            if (taint.key, taint.effect) in seen:
                raise ValueError(f"taint {taint.key}:{taint.effect} is given twice (a node keeps one taint per key "
                                 "and effect): keep one")
            seen.add((taint.key, taint.effect))
        return taints

    @field_validator("mig")
    @classmethod
    def _mig_profile_exists(cls, mig: Mig | None, info: ValidationInfo) -> Mig | None:
        gpu = info.data.get("gpu")
        if mig is not None and gpu is not None:
            gpu_model(gpu).mig_per_gpu(mig.profile)
        return mig

    @field_validator("topology", mode="before")
    @classmethod
    def _topology_shorthand(cls, value: object) -> object:
        # `topology: {rack: label}` is shorthand for `topology: {levels: {rack: label}}`; its levels are checked
        # here so that an error names the key the user wrote (topology.rack), not the field it becomes.
        if isinstance(value, dict) and "levels" not in value:
            for level, label in value.items():
                if not isinstance(label, str):
                    raise ValueError(f"{level}: {shown(label)} is not a node label: give one such as "
                                     "topology.kubernetes.io/rack")
                try:
                    dns_label(str(level))
                    label_key(label)
                except ValueError as error:
                    raise ValueError(f"{level}: {error}") from None
            return {"levels": value}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PoolSpec:
        if self.nodes is not None and self.count is not None:
            raise ValueError("give either `nodes` (existing node names) or `count`, not both")
        if self.autoscale is not None and self.nodes is not None:
            raise ValueError("a pool of listed `nodes` has a fixed size: `autoscale` is for cloud pools")
        if self.autoscale is not None and self.count is not None:
            raise ValueError("give either a fixed `count` or an `autoscale` range, not both")
        if self.nodes is None and self.count is None and self.autoscale is None:
            raise ValueError("give `nodes` (existing node names), `count`, or for a cloud pool `autoscale`")
        if self.nodes is not None and len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a node is listed twice in `nodes`")
        if self.gpu is None and (self.per_node is not None or self.sharing.replicas != 1 or self.mig
                                 or self.price_per_gpu_hour is not None):
            raise ValueError("`perNode`, `sharing`, `mig` and `pricePerGpuHour` need a `gpu` model")
        if self.gpu is not None and self.per_node is None:
            raise ValueError("a GPU pool needs `perNode`, the GPUs in each node")
        if self.mig is not None and self.sharing.replicas != 1:
            raise ValueError("a MIG pool shares GPUs by partitioning them: leave `sharing` out")
        if self.fabric_device is not None and self.fabric not in ("infiniband", "roce"):
            raise ValueError("`fabricDevice` is for infiniband and roce pools (EFA devices come with the instance "
                             "type): set `fabric` or drop it")
        if POOL_LABEL in self.labels:
            raise ValueError(f"label {POOL_LABEL} is set by Trainyard: remove it")
        self._check_cloud_fields()
        return self

    def _check_cloud_fields(self) -> None:
        entry = self.machine
        cloud_only = [key for key, value in (("autoscale", self.autoscale), ("zone", self.zone),
                                             ("reservation", self.reservation), ("compact", self.compact))
                      if value]
        if entry is None:
            if cloud_only:
                raise ValueError(f"`{cloud_only[0]}` is for cloud pools: give the pool an `instanceType`")
            return
        if self.fabric not in ("none", entry.fabric):
            raise ValueError(f"fabric: {entry.name} has no {self.fabric} fabric (it offers "
                             f"{'none' if entry.fabric == 'none' else entry.fabric}): change `fabric`")
        if self.reservation is not None and self.capacity_type != "reserved":
            raise ValueError("a `reservation` is consumed by `capacityType: reserved` pools: set it or drop the "
                             "reservation")
        if self.capacity_type == "reserved" and self.reservation is None:
            raise ValueError("a reserved cloud pool names its `reservation` (capacity block, reservation or "
                             "capacity reservation group id)")

    @property
    def machine(self) -> Machine | None:
        return MACHINES[self.instance_type] if self.instance_type else None

    @property
    def efa_interfaces(self) -> int:
        """The EFA interfaces each node advertises (and one training pod requests); 0 without EFA."""
        return self.machine.efa_interfaces if self.machine is not None and self.fabric == "efa" else 0

    @property
    def fabric_resource(self) -> str | None:
        """The extended resource of the pool's fabric devices, when its pods reach the fabric through one."""
        if self.fabric == "efa":
            return EFA_RESOURCE
        return self.fabric_device.resource if self.fabric_device is not None else None

    @property
    def fabric_request(self) -> tuple[str, int] | None:
        """(extended resource, amount) that one training pod per node requests to reach the fabric."""
        if self.efa_interfaces:
            return EFA_RESOURCE, self.efa_interfaces
        if self.fabric_device is not None:
            return self.fabric_device.resource, self.fabric_device.per_node
        return None

    @property
    def node_count(self) -> int:
        """The nodes the pool always has: listed nodes, the fixed count, or an autoscaled pool's minimum."""
        if self.autoscale is not None:
            return self.autoscale.min
        return len(self.nodes) if self.nodes is not None else int(self.count or 0)

    @property
    def max_node_count(self) -> int:
        """The most nodes the pool can have: an autoscaled pool's maximum, else node_count."""
        return self.autoscale.max if self.autoscale is not None else self.node_count

    @property
    def is_gpu(self) -> bool:
        return self.gpu is not None

    def effective_taints(self) -> list[Taint]:
        """GPU pools are tainted nvidia.com/gpu:NoSchedule unless the stack says otherwise."""
        if self.taints is not None:
            return list(self.taints)
        return [Taint(key=GPU_TAINT_KEY, value="present")] if self.is_gpu else []

    def topology_levels(self) -> dict[str, str]:
        return dict(self.topology.levels) if self.topology else {}
