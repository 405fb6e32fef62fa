"""On a worker of a multi-cluster stack, what a dispatched job needs to reach its data: per bursting team
namespace, the ConfigMap `trainyard-data` saying where its datasets and checkpoints are from this cluster
(infra/spec/hybrid/burst_data.py `data_env`), and, when the job reads the manager's object store, an egress
NetworkPolicy to that store's published address (team namespaces deny all other egress). The pull Secrets of
private registries go on the team's `datasets` account (infra/platform/storage.py)."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import NETWORKING_API, child_opts, kube_object, metadata
from infra.platform.network import range_egress
from infra.spec import Platform
from infra.spec.hybrid.burst_data import CONFIG_MAP, ManagerStore, data_env

EGRESS_POLICY = "allow-manager-object-store"


def store_egress(store: ManagerStore) -> dict[str, object]:
    """Egress from every pod of the namespace to the manager's object store, on its endpoint's port."""
    return {"podSelector": {}, "policyTypes": ["Egress"], "egress": [range_egress(store.cidr, [store.port])]}


class BurstData(pulumi.ComponentResource):
    def __init__(self, name: str, manager: Platform, worker: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:BurstData", name, None, opts)
        assert worker.member is not None and worker.member.data is not None
        data = worker.member.data
        store = data.read_store
        for team in worker.teams:
            env = data_env(data, team.name, manager, worker)
            for namespace in team.namespaces:
                after = child_opts(self, provider, depends_on=[team_namespaces[namespace]])
                kube_object(f"cm-{namespace}-{CONFIG_MAP}", "v1", "ConfigMap", metadata(CONFIG_MAP, namespace),
                            after, data=env)
                if store is not None:
                    kube_object(f"np-{namespace}-{EGRESS_POLICY}", NETWORKING_API, "NetworkPolicy",
                                metadata(EGRESS_POLICY, namespace), after, spec=store_egress(store))
        self.register_outputs({"teams": [team.name for team in worker.teams]})
