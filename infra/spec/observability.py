"""Observability: the monitoring stack's retention and storage, where alerts go, and the facts derived from them
(which exporters this stack runs, so that rules and dashboards read only metrics something scrapes).

Defaults per environment: a laptop stack (simulated GPUs) keeps 2 days in memory; every other stack keeps 15 days
on a 100Gi volume of its `block` StorageClass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from . import metrics
from .base import Quantity, Strict, parse_quantity
from .storage import BLOCK

Severity = Literal["critical", "warning", "info"]
PAGED: tuple[Severity, ...] = ("critical", "warning")
RETENTION = r"^[1-9][0-9]*[hdw]$"


class Alerting(Strict):
    """Where alerts go: every alert of the listed severities to the webhook whose URL is the secret config key
    trainyard:alertWebhookUrl (without it, or for other severities, the `null` receiver)."""

    severities: list[Severity] = Field(default_factory=lambda: list(PAGED))
    group_by: list[str] = Field(default_factory=lambda: ["alertname", "cluster", "namespace", "node"],
                                alias="groupBy")
    repeat_interval: str = Field(default="4h", alias="repeatInterval", pattern=r"^[1-9][0-9]*[mhd]$")
    # Every alert's runbook_url is this plus `#<alert name in lower case>`: point it at docs/operations.md in
    # the repository's web view (e.g. https://git.example.com/platform/trainyard/blob/main/docs/operations.md).
    runbook_base: str = Field(default="docs/operations.md", alias="runbookBase", pattern=r"^\S+$")

    @field_validator("severities")
    @classmethod
    def _distinct(cls, severities: list[str]) -> list[str]:
        if len(set(severities)) != len(severities):
            raise ValueError("a severity is listed twice")
        return severities


class ObservabilitySpec(Strict):
    """`retention` (e.g. 15d), `storage` (the Prometheus volume; `none` keeps data in memory, lost on restart),
    `storageClass` (default: the stack's `block` class), `grafana`, and `alerting`."""

    enabled: bool = True
    retention: str | None = Field(default=None, pattern=RETENTION)
    storage: Quantity | Literal["none"] | None = None
    storage_class: str | None = Field(default=None, alias="storageClass", pattern=r"^[a-z0-9][-a-z0-9.]*$")
    grafana: bool = True
    alerting: Alerting = Field(default_factory=Alerting)


@dataclass(frozen=True)
class ObservabilityFacts:
    enabled: bool
    retention: str
    storage: str | None  # PVC size, None: emptyDir
    retention_size: str | None  # 85 % of the volume, so Prometheus prunes before the disk fills
    storage_class: str | None  # None: the cluster's default class
    grafana: bool
    alerting: Alerting
    dcgm: bool  # the GPU Operator's DCGM exporter runs (Trainyard installs the operator and the stack has GPUs)
    components: frozenset[str]  # metric catalog components this stack exports

    def catalog(self) -> dict[str, metrics.Metric]:
        """Every catalog series name a query may read on this stack."""
        return {name: metric for metric in metrics.CATALOG if metric.component in self.components
                for name in metrics.series_names(metric)}


def derive_observability(spec: Any, local: bool, dcgm: bool, classes: tuple[str, ...]) -> ObservabilityFacts:
    """`spec` is the ObservabilitySpec; `local` a laptop stack; `classes` the stack's StorageClass names."""
    obs: ObservabilitySpec = spec
    storage = obs.storage if obs.storage is not None else ("none" if local else "100Gi")
    size = None if storage == "none" else str(storage)
    retention_size = None
    if size is not None:
        gib = int(parse_quantity(size) * 85 / 100 / 2**30)
        retention_size = f"{gib}GB" if gib else None
    components = {metrics.KSM, metrics.KUBELET, metrics.APISERVER, metrics.PROMETHEUS, metrics.KUEUE,
                  metrics.CONTROLLERS, metrics.VELERO} | ({metrics.DCGM} if dcgm else set())
    return ObservabilityFacts(
        enabled=obs.enabled,
        retention=obs.retention or ("2d" if local else "15d"),
        storage=size,
        retention_size=retention_size,
        storage_class=obs.storage_class or (BLOCK if BLOCK in classes else None),
        grafana=obs.grafana,
        alerting=obs.alerting,
        dcgm=dcgm,
        components=frozenset(components) if obs.enabled else frozenset(),
    )
