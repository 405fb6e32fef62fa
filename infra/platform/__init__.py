"""In-cluster platform: one ComponentResource per concern, built from the spec and the cluster's contract.

The contract's provider waits for the node pools (or node patches): nothing here is applied, and no pod
scheduled, before the nodes carry their labels and taints. Nothing here imports the cluster layer or a cloud SDK.

Each component's facts (namespace, CRD groups, ports, Secrets, scrape jobs, source) are its entry in
infra/components.py; its builder is the module of that entry's `builder`, wired here by one line in
build_platform (tests/test_components.py holds each entry to its module and its line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi import Output

from infra.kit.contract import ClusterContract
from infra.kit.naming import cluster_scope, named
from infra.platform.admission import Admission
from infra.platform.backup import Backup
from infra.platform.burst_data import BurstData
from infra.platform.fabric import fabric
from infra.platform.frontdoor import front_door
from infra.platform.gpu import gpu_operator
from infra.platform.kfp.journal_drill import journal_drill
from infra.platform.kfp.pipelines import pipelines
from infra.platform.kueue import Kueue
from infra.platform.models.registry import model_registry
from infra.platform.models.serving import serving
from infra.platform.multikueue import MultiKueue, MultiKueueWorker
from infra.platform.observability import observability
from infra.platform.rbac import Access
from infra.platform.storage import Storage
from infra.platform.tenancy import Tenancy
from infra.platform.trainer import Trainer
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT
from infra.spec.storage.model import TEAM_DATA_ACCOUNT, VELERO_ACCOUNT, VELERO_NAMESPACE


@dataclass(frozen=True)
class Built:
    """What the multi-cluster wiring needs from one cluster's platform."""

    provider: k8s.Provider
    kueue: Kueue
    namespaces: Mapping[str, pulumi.Resource]


def build_platform(platform: Platform, cluster: ClusterContract, backup_credentials: Output[str] | None,
                   alert_webhook: Output[str] | None = None, grafana_password: Output[str] | None = None,
                   front_door_secret: Output[str] | None = None, pipelines_secret: Output[str] | None = None,
                   registry_secret: Output[str] | None = None) -> Built:
    provider = cluster.provider
    tenancy = Tenancy(named("tenancy"), platform, provider)
    gpu = gpu_operator(platform, provider)
    fabric(platform, provider)
    trainer = Trainer(named("trainer"), platform, provider, cluster.pod_labels(TEAM_DATA_ACCOUNT))
    kueue = Kueue(named("kueue"), platform, provider, tenancy.namespaces)
    Storage(named("storage"), platform, cluster, tenancy.namespaces)
    backup = Backup(named("backup"), platform, provider, tenancy.namespaces, backup_credentials,
                    identity=cluster.identity(VELERO_NAMESPACE, VELERO_ACCOUNT))
    Access(named("access"), platform, provider, tenancy.namespaces)
    Admission(named("admission"), platform, provider)
    # Pipelines' namespace first: the front door routes into it, and Prometheus' monitors of it land there.
    kfp = pipelines(platform, provider, tenancy.namespaces)
    journal_drill(platform, provider, tenancy.namespaces, backup)  # the run journal's restore, drilled
    monitored = [trainer, kueue, backup, *([gpu] if gpu else []), *([kfp.namespace] if kfp else [])]
    monitoring = observability(platform, provider, alert_webhook, grafana_password, after=monitored,
                               remote_write=cluster.remote_write, identity=cluster.identity(*PROMETHEUS_ACCOUNT))
    # The front door serves the UIs that run here; a worker's facts carry none (one entry, on the manager).
    door = front_door(platform, provider, front_door_secret,
                      after=[r for r in (monitoring, kfp.namespace if kfp else None) if r],
                      team_namespaces=tenancy.namespaces, issuer=cluster.service_account_issuer)
    if kfp is not None and door is not None:
        kfp.install(pipelines_secret, after=[door])
    if door is not None:
        # each team's registry, in its models namespace, routed and guarded at the front door
        model_registry(platform, provider, registry_secret, tenancy.namespaces, after=[door],
                       issuer=cluster.service_account_issuer)
        # KServe's webhook certificates come from the front door's cert-manager
        serving(platform, provider, after=[door], namespace=kfp.namespace if kfp else None)
    return Built(provider, kueue, tenancy.namespaces)


def build_burst(platform: Platform, built: Mapping[str, Built],
                kubeconfigs: Mapping[str, Output[str] | None]) -> None:
    """MultiKueue between the clusters of a multi-cluster stack, once each cluster's platform is built."""
    hybrid = platform.hybrid
    assert hybrid is not None
    manager = built[hybrid.manager]
    with cluster_scope(hybrid.manager):
        MultiKueue(named("multikueue"), platform, hybrid, manager.provider, kubeconfigs, manager.kueue,
                   manager.namespaces)
    for worker in hybrid.workers:
        with cluster_scope(worker):
            MultiKueueWorker(named("multikueue"), built[worker].provider, after=[built[worker].kueue])
            member = hybrid.clusters[worker].member
            if member is not None and member.data is not None:
                BurstData(named("burst-data"), platform, hybrid.clusters[worker], built[worker].provider,
                          built[worker].namespaces)
