"""AKS: a cluster with a system agent pool on its VNet (Azure CNI overlay), and one agent pool per pool.

GPU pools use their VM size with the pool's labels and taints; the driver is AKS's (`gpuDriver: cloud`) or
left to the NVIDIA GPU Operator (`operator`: the pool skips AKS's driver install). A MIG pool sets AKS'
gpuInstanceProfile, Spot pools are evicted by deletion at any price up to on-demand, and reserved pools draw
from a capacity reservation group. Agent pools are managed apart from the cluster resource.
"""

from __future__ import annotations

import base64
from typing import Any

import pulumi
import pulumi_azure_native as azure_native

from infra.cluster.aks.audit import aks_audit
from infra.cluster.aks.identity import bucket_identities
from infra.cluster.aks.managed_prometheus import azure_monitor
from infra.cluster.aks.network import azure_subnet
from infra.cluster.base import CloudCluster, kubernetes_provider
from infra.cluster.buckets import cloud_buckets
from infra.kit.contract import account_key
from infra.spec import Flavor, Platform
from infra.spec.clouds.azure import AKS_SERVICE_CIDR, aks_gpu_instance_profile, aks_pool_name
from infra.spec.cluster import GpuStack
from infra.spec.observability import PROMETHEUS_ACCOUNT
from infra.spec.pools import PoolSpec
from infra.spec.queues.flavors import AKS_SPOT_TAINT

containerservice = azure_native.containerservice
DNS_SERVICE_IP = "172.16.0.10"  # inside AKS_SERVICE_CIDR


def node_taints(flavor: Flavor) -> list[str]:
    """The pool's taints as AKS writes them; AKS adds the Spot taint to Spot pools itself."""
    return [f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in flavor.taints
            if t["key"] != AKS_SPOT_TAINT.key]


def agent_pool_args(flavor: Flavor, pool: PoolSpec, stack: GpuStack, subnet: pulumi.Input[str]) -> dict[str, Any]:
    assert pool.machine is not None
    args: dict[str, Any] = {
        "agent_pool_name": aks_pool_name(flavor.name), "mode": "User", "os_type": "Linux", "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets", "vm_size": pool.machine.name, "vnet_subnet_id": subnet,
        "node_labels": dict(flavor.node_labels), "node_taints": node_taints(flavor),
    }
    if pool.autoscale is not None:
        args |= {"enable_auto_scaling": True, "min_count": pool.autoscale.min, "max_count": pool.autoscale.max,
                 "count": pool.autoscale.min}
    else:
        args["count"] = pool.node_count
    if pool.zone is not None:
        args["availability_zones"] = [pool.zone]
    if flavor.gpu is not None:
        args["gpu_profile"] = {"driver": "None" if stack.driver else "Install"}
        profile = aks_gpu_instance_profile(pool)
        if profile is not None:
            args["gpu_instance_profile"] = profile
    if pool.capacity_type == "spot":
        args |= {"scale_set_priority": "Spot", "scale_set_eviction_policy": "Delete", "spot_max_price": -1}
    if pool.reservation is not None:
        args["capacity_reservation_group_id"] = pool.reservation
    return args


class AksCluster(CloudCluster):
    def __init__(self, name: str, platform: Platform, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:cluster:Aks", name, None, opts)
        spec = platform.spec.cluster.aks
        assert spec is not None
        self.azure = azure_native.Provider("azure", location=spec.location, opts=pulumi.ResourceOptions(parent=self))
        self.kind = "aks"
        endpoint = spec.endpoint
        group: pulumi.Input[str] = spec.resource_group
        if spec.create_resource_group:
            group = azure_native.resources.ResourceGroup(
                "group", resource_group_name=spec.resource_group, location=spec.location,
                opts=self._opts(protect=True)).name
        subnet = azure_subnet(spec.network, group, spec.location, self._opts())
        system = spec.system_pool
        self.cluster = containerservice.ManagedCluster(
            "aks",
            resource_group_name=group,
            resource_name_=platform.cluster_name,
            location=spec.location,
            dns_prefix=platform.cluster_name,
            kubernetes_version=platform.spec.versions.kubernetes,
            identity={"type": "SystemAssigned"},
            oidc_issuer_profile={"enabled": True},
            agent_pool_profiles=[{
                "name": "system", "mode": "System", "os_type": "Linux", "type": "VirtualMachineScaleSets",
                "vm_size": system.instance_type, "count": system.count, "vnet_subnet_id": subnet,
            }],
            # Azure CNI powered by Cilium enforces NetworkPolicy (set at creation).
            network_profile={"network_plugin": "azure", "network_plugin_mode": "overlay",
                             "network_dataplane": "cilium", "network_policy": "cilium",
                             "service_cidr": AKS_SERVICE_CIDR, "dns_service_ip": DNS_SERVICE_IP},
            # The CSI drivers of the azure storage profile (Blob is off by default) and the snapshot controller.
            storage_profile={"disk_csi_driver": {"enabled": True}, "file_csi_driver": {"enabled": True},
                             "blob_csi_driver": {"enabled": True}, "snapshot_controller": {"enabled": True}},
            # Entra ID login: groups arrive as object ids; no local (certificate) accounts.
            aad_profile={"managed": True, "enable_azure_rbac": False,
                         "admin_group_object_ids": list(platform.spec.identity.platform_admins)},
            disable_local_accounts=True,
            security_profile={"workload_identity": {"enabled": True}},
            api_server_access_profile={"enable_private_cluster": True} if endpoint.private
            else {"authorized_ip_ranges": list(endpoint.cidrs)},
            # The pools below are their own resources: the cluster must not fight over them.
            opts=self._opts(protect=True, ignore_changes=["agentPoolProfiles"]),
        )
        # The issuer of the cluster's ServiceAccount tokens: the workload identities' federation trusts it, and the
        # front door's gateway for CI's machine tokens.
        self.service_account_issuer = issuer = self.cluster.oidc_issuer_profile.issuer_url
        credentials = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=group, resource_name=self.cluster.name, format="exec",
            opts=pulumi.InvokeOutputOptions(parent=self, provider=self.azure))
        self.ready = tuple(
            containerservice.AgentPool(
                f"pool-{flavor.name}", resource_group_name=group, resource_name_=self.cluster.name,
                opts=self._opts(protect=True),
                **agent_pool_args(flavor, platform.pool(flavor.pool), platform.gpu_stack, subnet))
            for flavor in platform.flavors)
        # An exec kubeconfig (kubelogin): Entra ID tokens, no certificate.
        self.provider = kubernetes_provider(self, platform, credentials.kubeconfigs[0].value.apply(
            lambda encoded: base64.b64decode(encoded).decode()), self.ready)
        stored = cloud_buckets(platform, self)
        self.buckets, self.storage_parameters = stored.names, stored.parameters
        self.identities = bucket_identities(
            platform, group, issuer, stored.ids, self._opts(),
            self.azure) if platform.storage.profile == "azure" else {}
        aks_audit(platform, group, spec.location, self.cluster.id, self._opts())
        if platform.observability.managed_prometheus:
            self.remote_write, identity = azure_monitor(
                platform, group, spec.location, issuer, self._opts(), self.azure)
            self.identities[account_key(*PROMETHEUS_ACCOUNT)] = identity
        self.register_outputs({"cluster": platform.cluster_name, "location": spec.location,
                               "agentPools": [aks_pool_name(flavor.name) for flavor in platform.flavors]})

    def _opts(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, providers=[self.azure], **options)
