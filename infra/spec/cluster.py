"""Where the nodes come from. One key per kind; exactly one is set."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import DnsLabel, Strict


class ExistingCluster(Strict):
    """A cluster that already exists (on-prem, or a laptop kind cluster), reached by kubeconfig context."""

    context: str = Field(min_length=1)
    name: DnsLabel | None = None
    simulated_gpus: bool = Field(default=False, alias="simulatedGpus")


class ClusterSpec(Strict):
    existing: ExistingCluster | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ClusterSpec:
        kinds = [name for name, value in self if value is not None]
        if len(kinds) != 1:
            raise ValueError("set exactly one cluster kind: existing")
        return self

    @property
    def kind(self) -> str:
        return next(name for name, value in self if value is not None)

    def identifier(self, stack: str) -> str:
        """The name used for cluster_identifier and labels; the stack name unless the stack sets one."""
        spec = self.existing
        return (spec.name if spec and spec.name else None) or stack
