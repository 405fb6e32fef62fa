"""Observability: the monitoring stack's retention and storage, where alerts go, and the facts derived from them
(which exporters this stack runs, so that rules and dashboards read only metrics something scrapes).

Defaults per environment: a laptop stack (simulated GPUs) keeps 2 days in memory; every other stack keeps 15 days
on a 100Gi volume of its `block` StorageClass.

`managedPrometheus: true` also sends every sample to the cloud's managed Prometheus, as the Prometheus pod's
workload identity: remote write to Amazon Managed Service for Prometheus on EKS and to Azure Monitor managed
Prometheus on AKS; on GKE, Google's drop-in Prometheus binary exports to Managed Service for Prometheus itself
(self-deployed collection). The in-cluster Prometheus keeps scraping, evaluating the rules and alerting, so the
offline rule checks hold whatever the destination. Refused on existing clusters (no cloud to write to).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from infra.components import MONITORING
from infra.spec import metrics
from infra.spec.base import Strict, VolumeSize, parse_quantity
from infra.spec.clouds import CLOUDS
from infra.spec.clouds.gcp import GOOGLE_MANAGED_PROMETHEUS
from infra.spec.storage.model import BLOCK
from infra.spec.usage import UsageSpec

Severity = Literal["critical", "warning", "info"]
PAGED: tuple[Severity, ...] = ("critical", "warning")
RETENTION = r"^[1-9][0-9]*[hdw]$"
# A Prometheus label name (the form Alertmanager's group_by accepts), and group_by's "every label".
LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
GROUP_BY_ALL = "..."
# The Prometheus pods' service account as kube-prometheus-stack names it (release kube-prometheus-stack):
# the account the cloud identity that writes to the managed Prometheus is bound to.
PROMETHEUS_ACCOUNT = (MONITORING.namespace, "kube-prometheus-stack-prometheus")
# Cluster kind -> the managed Prometheus the samples reach. GKE's takes no remote write (prometheus-operator
# 0.93.1's RemoteWriteSpec has no Google authentication either): there Prometheus runs Google's fork, which
# exports through the Cloud Monitoring API (versions.GMP_PROMETHEUS_IMAGE).
GOOGLE = GOOGLE_MANAGED_PROMETHEUS
MANAGED = {kind: facts.managed_prometheus for kind, facts in CLOUDS.items() if facts.managed_prometheus}


RELATIVE_RUNBOOK = "docs/operations.md"


class Alerting(Strict):
    """Where alerts go: every alert of the listed severities to the webhook whose URL is the secret config key
    trainyard:alertWebhookUrl (without it, or for other severities, the `null` receiver). `groupBy` lists label
    names (letters, digits, '_'), each once, or is `['...']` to group by every label."""

    severities: list[Severity] = Field(default_factory=lambda: list(PAGED))
    group_by: list[str] = Field(default_factory=lambda: ["alertname", "cluster", "namespace", "node"],
                                alias="groupBy")
    repeat_interval: str = Field(default="4h", alias="repeatInterval", pattern=r"^[1-9][0-9]*[mhd]$")
    # Every alert's runbook_url is this plus `#<alert name in lower case>`: docs/operations.md in the repository's
    # web view (e.g. https://git.example.com/platform/trainyard/blob/main/docs/operations.md). The repository names
    # no URL of its own, so each stack declares it: without it the links stay relative (RELATIVE_RUNBOOK), which
    # no Alertmanager receiver can open, and the check `alert-runbooks-absolute` refuses the stack.
    runbook_base: str | None = Field(default=None, alias="runbookBase", pattern=r"^https?://\S+$")

    @field_validator("severities")
    @classmethod
    def _distinct(cls, severities: list[str]) -> list[str]:
        if len(set(severities)) != len(severities):
            raise ValueError("a severity is listed twice")
        return severities

    @field_validator("group_by")
    @classmethod
    def _label_names(cls, labels: list[str]) -> list[str]:
        """Alertmanager refuses its whole configuration (and sends nothing) for a group_by with an invalid or
        repeated label name, or with `...` (every label) beside other names."""
        for label in labels:
            if label != GROUP_BY_ALL and not LABEL_NAME.fullmatch(label):
                raise ValueError(f"'{label}' is not a label name: use letters, digits and '_', not starting with a "
                                 "digit (or '...' alone to group by every label)")
        if len(set(labels)) != len(labels):
            raise ValueError("a label is listed twice")
        if GROUP_BY_ALL in labels and len(labels) > 1:
            raise ValueError("'...' groups by every label: give it alone or list the labels")
        return labels


class ObservabilitySpec(Strict):
    """`retention` (e.g. 15d), `storage` (the Prometheus volume's size, e.g. 100Gi; `none` keeps data in memory,
    lost on restart), `storageClass` (default: the stack's `block` class), `grafana`, `alerting`, and
    `managedPrometheus` (also send every sample to the cloud's managed Prometheus: EKS, GKE and AKS,
    docs/observability.md) and `usage` (when an admitted GPU counts as busy, how long idle ones may wait)."""

    enabled: bool = True
    retention: str | None = Field(default=None, pattern=RETENTION)
    storage: VolumeSize | Literal["none"] | None = None
    storage_class: str | None = Field(default=None, alias="storageClass", pattern=r"^[a-z0-9][-a-z0-9.]*$")
    grafana: bool = True
    alerting: Alerting = Field(default_factory=Alerting)
    managed_prometheus: bool = Field(default=False, alias="managedPrometheus")
    usage: UsageSpec = Field(default_factory=UsageSpec)


def check_managed_prometheus(spec: ObservabilitySpec, cluster_kind: str) -> None:
    """The option needs the in-cluster Prometheus (it remote-writes) and a cloud with a managed Prometheus."""
    if not spec.managed_prometheus:
        return
    where = "observability.managedPrometheus"
    if not spec.enabled:
        raise ValueError(f"{where}: true needs observability.enabled (the in-cluster Prometheus sends the samples): "
                         "enable observability or remove managedPrometheus")
    if cluster_kind not in MANAGED:
        kinds = list(MANAGED)
        raise ValueError(f"{where}: true needs a cloud cluster with a managed Prometheus "
                         f"({', '.join(kinds[:-1])} or {kinds[-1]}), not an "
                         f"{cluster_kind} cluster (on-prem or laptop): remove managedPrometheus")


@dataclass(frozen=True)
class ObservabilityFacts:
    enabled: bool
    retention: str
    storage: str | None  # PVC size, None: emptyDir
    retention_size: str | None  # 85 % of the volume, so Prometheus prunes before the disk fills
    storage_class: str | None  # None: the cluster's default class
    grafana: bool
    alerting: Alerting
    usage: UsageSpec
    dcgm: bool  # the GPU Operator's DCGM exporter runs (Trainyard installs the operator and the stack has GPUs)
    managed_prometheus: str | None  # the cloud's managed Prometheus Prometheus remote-writes to (MANAGED), or None
    components: frozenset[str]  # metric catalog components this stack exports
    # Google's Prometheus: the external labels naming where its exported series live (project_id, location).
    export_labels: tuple[tuple[str, str], ...] = ()

    def catalog(self) -> dict[str, metrics.Metric]:
        """Every catalog series name a query may read on this stack."""
        return {name: metric for metric in metrics.CATALOG if metric.component in self.components
                for name in metrics.series_names(metric)}


def derive_observability(spec: Any, local: bool, dcgm: bool, classes: tuple[str, ...],
                         cluster_kind: str, gcp_location: tuple[str, str] | None = None) -> ObservabilityFacts:
    """`spec` is the ObservabilitySpec (checked by check_managed_prometheus); `local` a laptop stack; `classes` the
    stack's StorageClass names; `gcp_location` a GKE cluster's (project, region)."""
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
        usage=obs.usage,
        dcgm=dcgm,
        managed_prometheus=MANAGED[cluster_kind] if obs.managed_prometheus else None,
        components=frozenset(components) if obs.enabled else frozenset(),
        # The fork reads these labels before its own detection (its --export.label.* help): explicit, not guessed.
        export_labels=(("location", gcp_location[1]), ("project_id", gcp_location[0]))
        if obs.managed_prometheus and cluster_kind == "gke" and gcp_location else (),
    )
