"""Teams: declared once, each becomes namespaces, quotas, queues and access bindings."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, field_validator, model_validator

from .base import DnsLabel, NonNegativeInt, Quantity, Strict

RESERVED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system", "kubeflow-system",
     "gpu-operator", "velero", "monitoring", "trainyard-system"}
)


class PoolQuota(Strict):
    """A team's guaranteed share of one pool. GPUs count whole devices (or time-sliced replicas);
    cpu and memory default to the GPUs' share of the pool's nodes."""

    gpus: NonNegativeInt | None = None
    cpu: Quantity | None = None
    memory: Quantity | None = None
    borrowing_limit: NonNegativeInt | None = Field(default=None, alias="borrowingLimit")
    lending_limit: NonNegativeInt | None = Field(default=None, alias="lendingLimit")


class Groups(Strict):
    """Identity-provider groups per persona (names without the stack's groupPrefix)."""

    engineers: list[str] = Field(default_factory=list)
    analysts: list[str] = Field(default_factory=list)

    @field_validator("engineers", "analysts", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class TeamSpec(Strict):
    namespaces: list[DnsLabel] | None = None
    quota: dict[DnsLabel, NonNegativeInt | PoolQuota]
    weight: Decimal = Field(default=Decimal(1), gt=0, le=1000)
    borrowing_limit: NonNegativeInt | None = Field(default=None, alias="borrowingLimit")
    groups: Groups = Field(default_factory=Groups)

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, names: list[str] | None) -> list[str] | None:
        if names is not None:
            if not names:
                raise ValueError("list at least one namespace, or leave `namespaces` out")
            if len(set(names)) != len(names):
                raise ValueError("a namespace is listed twice")
            reserved = sorted(set(names) & RESERVED_NAMESPACES)
            if reserved:
                raise ValueError(f"namespace '{reserved[0]}' is reserved for the platform: choose another")
        return names

    @model_validator(mode="after")
    def _has_quota(self) -> TeamSpec:
        if not self.quota:
            raise ValueError("`quota` needs at least one pool")
        return self

    def pool_quota(self, pool: str) -> PoolQuota:
        value = self.quota[pool]
        return PoolQuota(gpus=value) if isinstance(value, int) else value
