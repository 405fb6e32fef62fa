"""In-cluster platform: one ComponentResource per concern, built from the spec and the cluster's contract.

The contract's provider waits for the node pools (or node patches): nothing here is applied, and no pod
scheduled, before the nodes carry their labels and taints. Nothing here imports the cluster layer or a cloud SDK.
"""

from __future__ import annotations

from pulumi import Output

from infra.contract import ClusterContract
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT
from infra.spec.storage import TEAM_DATA_ACCOUNT, VELERO_ACCOUNT, VELERO_NAMESPACE

from .admission import Admission
from .backup import Backup
from .fabric import fabric
from .gpu import gpu_operator
from .kueue import Kueue
from .observability import observability
from .rbac import Access
from .storage import Storage
from .tenancy import Tenancy
from .trainer import Trainer


def build_platform(platform: Platform, cluster: ClusterContract, backup_credentials: Output[str] | None,
                   alert_webhook: Output[str] | None = None, grafana_password: Output[str] | None = None) -> None:
    provider = cluster.provider
    tenancy = Tenancy("tenancy", platform, provider)
    gpu = gpu_operator(platform, provider)
    fabric(platform, provider)
    trainer = Trainer("trainer", platform, provider, cluster.pod_labels(TEAM_DATA_ACCOUNT))
    kueue = Kueue("kueue", platform, provider, tenancy.namespaces)
    Storage("storage", platform, cluster, tenancy.namespaces)
    backup = Backup("backup", platform, provider, tenancy.namespaces, backup_credentials,
                    identity=cluster.identity(VELERO_NAMESPACE, VELERO_ACCOUNT))
    Access("access", platform, provider, tenancy.namespaces)
    Admission("admission", platform, provider)
    monitored = [trainer, kueue, backup, *([gpu] if gpu else [])]
    observability(platform, provider, alert_webhook, grafana_password, after=monitored,
                  remote_write=cluster.remote_write, identity=cluster.identity(*PROMETHEUS_ACCOUNT))
