"""An existing cluster (on-prem or kind): a provider from the secret kubeconfig, and the pools' node
labels and taints applied to the named nodes with server-side NodePatches that destroy leaves alone. The
platform's provider waits for the patches; the capabilities are what the site declares it provides."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.base import cluster_capabilities
from infra.cluster.buckets import cloud_buckets
from infra.kit.contract import ClusterContract
from infra.kit.naming import named
from infra.spec import Platform


class ExistingCluster(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, kubeconfig: pulumi.Input[str] | None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:cluster:Existing", name, None, opts)
        spec = platform.spec.cluster.existing
        assert spec is not None

        def provider(name: str, ready: list[pulumi.Resource]) -> k8s.Provider:
            return k8s.Provider(named(name), kubeconfig=kubeconfig, context=spec.context,
                                cluster_identifier=platform.cluster_name, enable_server_side_apply=True,
                                delete_unreachable=False, opts=pulumi.ResourceOptions(parent=self, depends_on=ready))

        nodes = provider("nodes", [])  # the node patches' own provider: the platform's waits for them
        patches: list[pulumi.Resource] = []
        for flavor in platform.flavors:
            for node in platform.pool(flavor.pool).nodes or []:
                meta: k8s.meta.v1.ObjectMetaPatchArgsDict = {
                    "name": node,
                    "labels": dict(flavor.node_labels),
                    "annotations": {"pulumi.com/patchForce": "true"},
                }
                # Taints are an atomic list under server-side apply: an untainted pool sends none rather
                # than an empty list that would take ownership of (and clear) taints others set.
                taints: k8s.core.v1.NodeSpecPatchArgsDict | None = (
                    {"taints": [{"key": t["key"], "value": t.get("value"), "effect": t["effect"]}
                                for t in flavor.taints]} if flavor.taints else None
                )
                patches.append(k8s.core.v1.NodePatch(
                    named(f"node-{node}"), metadata=meta, spec=taints,
                    opts=pulumi.ResourceOptions(parent=self, provider=nodes, retain_on_delete=True),
                ))
        self.node_patches = tuple(patches)
        self.provider = provider("kubernetes", patches)
        # A cloud storage profile on an existing cluster: its buckets are still made here, not in the platform.
        self.buckets = cloud_buckets(platform, self)
        self.register_outputs({"context": spec.context, "nodes": len(patches)})

    def contract(self, platform: Platform) -> ClusterContract:
        return ClusterContract(kind="existing", provider=self.provider, component=self,
                               pools=tuple(f.pool for f in platform.flavors),
                               capabilities=cluster_capabilities(platform),
                               ready=self.node_patches, buckets=dict(self.buckets.names),
                               storage_parameters=dict(self.buckets.parameters))
