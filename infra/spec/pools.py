"""Node pools: where GPUs (and CPUs) come from, declared once and turned into nodes, flavors and capacity."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import DnsLabel, LabelKey, Labels, LabelValue, PositiveInt, Quantity, Strict
from .catalog import gpu_model

POOL_LABEL = "trainyard.io/pool"
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


class Sharing(Strict):
    """How one physical GPU is offered: time-sliced replicas (capacity x replicas)."""

    time_slicing: int = Field(default=1, alias="timeSlicing", ge=1, le=64)


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


class PoolSpec(Strict):
    """A group of identical nodes. GPU pools name a GPU model; CPU pools leave `gpu` out."""

    gpu: str | None = None
    per_node: PositiveInt | None = Field(default=None, alias="perNode")
    nodes: list[DnsLabel] | None = None
    count: PositiveInt | None = None
    cpu: Quantity = "32"
    memory: Quantity = "128Gi"
    labels: Labels = Field(default_factory=dict)
    taints: list[Taint] | None = None
    capacity_type: Literal["reserved", "on-demand", "spot"] = Field(default="on-demand", alias="capacityType")
    topology: Topology | None = None
    fabric: Literal["none", "efa", "infiniband", "roce"] = "none"
    sharing: Sharing = Field(default_factory=Sharing)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, name: str | None) -> str | None:
        if name is not None:
            gpu_model(name)
        return name

    @field_validator("topology", mode="before")
    @classmethod
    def _topology_shorthand(cls, value: object) -> object:
        # `topology: {rack: label}` is shorthand for `topology: {levels: {rack: label}}`
        if isinstance(value, dict) and "levels" not in value:
            return {"levels": value}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PoolSpec:
        if self.nodes is not None and self.count is not None:
            raise ValueError("give either `nodes` (existing node names) or `count`, not both")
        if self.nodes is None and self.count is None:
            raise ValueError("give `nodes` (existing node names) or `count`")
        if self.nodes is not None and len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a node is listed twice in `nodes`")
        if self.gpu is None and (self.per_node is not None or self.sharing.time_slicing != 1):
            raise ValueError("`perNode` and `sharing` need a `gpu` model")
        if self.gpu is not None and self.per_node is None:
            raise ValueError("a GPU pool needs `perNode`, the GPUs in each node")
        if POOL_LABEL in self.labels:
            raise ValueError(f"label {POOL_LABEL} is set by Trainyard: remove it")
        return self

    @property
    def node_count(self) -> int:
        return len(self.nodes) if self.nodes is not None else int(self.count or 0)

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
