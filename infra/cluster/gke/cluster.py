"""GKE: a regional cluster with private nodes on its VPC, a system pool, and one node pool per pool.

GPU pools attach their machine's accelerators. With `gpuDriver: cloud`, GKE installs the driver and its
device plugin shares GPUs (time-sharing or MPS) and partitions them (MIG), and GKE's managed DCGM metrics are
on. With `gpuDriver: operator`, GKE's driver install and device plugin are off and Ubuntu nodes leave the GPU
stack to the NVIDIA GPU Operator. Pools are placed compactly, on Spot, or on a reservation as declared.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.cluster.base import CLOUD_TAINT_EFFECTS, CloudCluster, kubernetes_provider
from infra.cluster.buckets import cloud_buckets
from infra.cluster.gke.audit import gke_audit
from infra.cluster.gke.identity import bucket_identities, node_account
from infra.cluster.gke.managed_prometheus import google_managed_prometheus
from infra.cluster.gke.network import gcp_subnet
from infra.components import COMPONENTS
from infra.kit.contract import account_key
from infra.spec import Flavor, Platform
from infra.spec.clouds import CLOUDS
from infra.spec.clouds.gcp import GkeCluster as GkeSpec
from infra.spec.clouds.gcp import vpc_name
from infra.spec.cluster import GpuStack
from infra.spec.observability import PROMETHEUS_ACCOUNT
from infra.spec.pools import PoolSpec

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# GKE stops its own device plugin on nodes with this label, so the operator's can serve the GPUs.
NO_GKE_DEVICE_PLUGIN = {"gke-no-default-nvidia-gpu-device-plugin": "true"}
SHARING_STRATEGIES = {"time-slicing": "TIME_SHARING", "mps": "MPS"}
# Pods see their Kubernetes service account's identity, never the node's (Workload Identity).
GKE_METADATA = {"mode": "GKE_METADATA"}
# The CSI drivers of the gcp storage profile's classes (block, checkpoints and scratch, datasets).
CSI_ADDONS = ("gce_persistent_disk_csi_driver_config", "gcp_filestore_csi_driver_config", "gcs_fuse_csi_driver_config")
# The control plane of a cluster with private nodes reaches them on 443 and 10250 only (GKE's own firewall rule).
# The platform's webhook servers and aggregated APIs listen on other ports (infra/components.py): the API server
# must reach them. (The plan's firewall check compares them with the target ports of the rendered charts.)
GKE_OPEN_PORTS = CLOUDS["gke"].control_plane_ports or frozenset()
WEBHOOK_PORTS = tuple(sorted({port for component in COMPONENTS
                              for port in (*component.webhook_ports, *component.api_ports)} - GKE_OPEN_PORTS))


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin (no static credentials)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": f"https://{endpoint}",
                                                 "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True, "installHint": "Install gke-gcloud-auth-plugin (gcloud components install)",
        }}}],
    })


def accelerator(flavor: Flavor, pool: PoolSpec, stack: GpuStack) -> dict[str, Any]:
    """The guest accelerator of a GPU pool: driver install mode, GKE sharing or MIG partitions."""
    machine, offer = pool.machine, flavor.gpu
    assert machine is not None and offer is not None
    driver = "INSTALLATION_DISABLED" if stack.operator else "LATEST"
    entry: dict[str, Any] = {"type": machine.accelerator, "count": offer.per_node,
                             "gpu_driver_installation_config": {"gpu_driver_version": driver}}
    if stack.cloud_sharing and offer.sharing in SHARING_STRATEGIES:
        entry["gpu_sharing_config"] = {"gpu_sharing_strategy": SHARING_STRATEGIES[offer.sharing],
                                       "max_shared_clients_per_gpu": offer.units_per_gpu}
    if stack.cloud_sharing and offer.mig_profile is not None:
        entry["gpu_partition_size"] = offer.mig_profile
    return entry


def node_pool_args(flavor: Flavor, pool: PoolSpec, spec: GkeSpec, stack: GpuStack,
                   account: pulumi.Input[str]) -> dict[str, Any]:
    assert pool.machine is not None
    zones = [pool.zone] if pool.zone else list(spec.zones)
    labels = dict(flavor.node_labels)
    config: dict[str, Any] = {
        "machine_type": pool.machine.name, "oauth_scopes": SCOPES, "labels": labels, "service_account": account,
        "workload_metadata_config": GKE_METADATA,
        "taints": [{"key": t["key"], "value": t.get("value", ""), "effect": CLOUD_TAINT_EFFECTS[t["effect"]]}
                   for t in flavor.taints],
        "spot": pool.capacity_type == "spot",
    }
    if flavor.gpu is not None:
        config["guest_accelerators"] = [accelerator(flavor, pool, stack)]
        if stack.operator:
            labels |= NO_GKE_DEVICE_PLUGIN
            config["image_type"] = "UBUNTU_CONTAINERD"  # the operator's driver containers need Ubuntu
    if pool.reservation is not None:
        config["reservation_affinity"] = {"consume_reservation_type": "SPECIFIC_RESERVATION",
                                          "key": "compute.googleapis.com/reservation-name",
                                          "values": [pool.reservation]}
    args: dict[str, Any] = {"node_locations": zones, "node_config": config,
                            "management": {"auto_repair": True, "auto_upgrade": True}}
    if pool.autoscale is not None:
        # total_* bound the pool across its zones; the initial count is per zone.
        # ANY: Spot and reservation pools take capacity in whichever zone has it.
        policy = "ANY" if pool.capacity_type != "on-demand" else "BALANCED"
        args |= {"autoscaling": {"total_min_node_count": pool.autoscale.min,
                                 "total_max_node_count": pool.autoscale.max, "location_policy": policy},
                 "initial_node_count": math.ceil(pool.autoscale.min / len(zones))}
    else:
        args["node_count"] = pool.node_count // len(zones)  # per zone; the spec checks it divides evenly
    if pool.compact:
        args["placement_policy"] = {"type": "COMPACT"}
    return args


class GkeCluster(CloudCluster):
    def __init__(self, name: str, platform: Platform, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:cluster:Gke", name, None, opts)
        spec = platform.spec.cluster.gke
        assert spec is not None
        stack = platform.gpu_stack
        self.kind = "gke"
        self.gcp = gcp.Provider("gcp", project=spec.project, region=spec.region,
                                opts=pulumi.ResourceOptions(parent=self))
        subnet = gcp_subnet(spec.network, spec.region, vpc_name(spec, platform.cluster_name), self._opts())
        nodes = node_account(platform, spec.project, self._opts())
        endpoint = spec.endpoint
        monitoring = ["SYSTEM_COMPONENTS", *(["DCGM"] if stack.cloud_sharing else [])]
        self.cluster = gcp.container.Cluster(
            "gke",
            name=platform.cluster_name,
            location=spec.region,
            node_locations=spec.zones,
            network=subnet.network,
            subnetwork=subnet.subnetwork,
            min_master_version=platform.spec.versions.kubernetes,
            release_channel={"channel": spec.release_channel},
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=True,
            ip_allocation_policy={"cluster_secondary_range_name": subnet.pods_range,
                                  "services_secondary_range_name": subnet.services_range},
            private_cluster_config={"enable_private_nodes": True, "enable_private_endpoint": endpoint.private},
            # Only the stack's networks reach the API server (none but the VPC when private).
            master_authorized_networks_config={
                "cidr_blocks": [{"cidr_block": cidr, "display_name": f"allowed-{i}"}
                                for i, cidr in enumerate(endpoint.cidrs)],
                "gcp_public_cidrs_access_enabled": False},
            workload_identity_config={"workload_pool": f"{spec.project}.svc.id.goog"},
            # Dataplane V2 enforces NetworkPolicy (set at creation: changing it replaces the cluster).
            datapath_provider="ADVANCED_DATAPATH",
            addons_config={addon: {"enabled": True} for addon in CSI_ADDONS},
            authenticator_groups_config={"security_group": spec.login.security_group} if spec.login else None,
            # GKE's own GPU stack exports DCGM metrics to Managed Prometheus (no DCGM exporter to install). Managed
            # collection stays on beside observability.managedPrometheus: it scrapes only PodMonitoring objects
            # (GKE's own), never the platform's targets, so no series is exported twice.
            monitoring_config={"enable_components": monitoring, "managed_prometheus": {"enabled": True}},
            opts=self._opts(protect=True),
        )
        system = spec.system_pool
        pools = [gcp.container.NodePool(
            "system", name="system", cluster=self.cluster.name, location=spec.region,
            node_count=math.ceil(system.count / len(spec.zones)),
            node_config={"machine_type": system.instance_type, "oauth_scopes": SCOPES,
                         "labels": {"trainyard.io/role": "system"}, "service_account": nodes.email,
                         "workload_metadata_config": GKE_METADATA},
            opts=self._opts(protect=True))]
        for flavor in platform.flavors:
            pools.append(gcp.container.NodePool(
                f"pool-{flavor.name}", name=flavor.name, cluster=self.cluster.name, location=spec.region,
                opts=self._opts(protect=True),
                **node_pool_args(flavor, platform.pool(flavor.pool), spec, stack, nodes.email)))
        self.ready = (*pools, self._webhook_firewall(subnet.network, nodes.email))
        self.provider = kubernetes_provider(self, platform, pulumi.Output.all(
            self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate,
        ).apply(lambda parts: kubeconfig(platform.cluster_name, str(parts[0]), str(parts[1]))), self.ready)
        stored = cloud_buckets(platform, self)
        self.buckets, self.storage_parameters = stored.names, stored.parameters
        self.identities = bucket_identities(platform, spec.project, stored.ids, self._opts(), self.gcp) \
            if platform.storage.profile == "gcp" else {}
        gke_audit(platform, spec.project, self._opts(depends_on=[self.cluster]))
        if platform.observability.managed_prometheus:
            self.identities[account_key(*PROMETHEUS_ACCOUNT)] = google_managed_prometheus(
                platform, spec.project, self._opts())
        self.register_outputs({"cluster": platform.cluster_name, "region": spec.region,
                               "nodePools": [flavor.name for flavor in platform.flavors]})

    def _webhook_firewall(self, network: pulumi.Input[str], nodes: pulumi.Input[str]) -> gcp.compute.Firewall:
        """The control plane may call the webhooks on the nodes (the node service account marks every pool). Its
        range is the one GKE reports for the cluster; a cluster on Private Service Connect reports none, and its
        control plane is taken to call from its private endpoint (unverified)."""
        def control_plane(config: Any) -> list[str]:
            return [config.master_ipv4_cidr_block or f"{config.private_endpoint}/32"]

        return gcp.compute.Firewall(
            "webhooks", network=network, direction="INGRESS",
            description="GKE control plane to the platform's admission webhooks and aggregated APIs",
            source_ranges=self.cluster.private_cluster_config.apply(control_plane),
            allows=[{"protocol": "tcp", "ports": [str(port) for port in WEBHOOK_PORTS]}],
            target_service_accounts=[nodes], opts=self._opts())

    def _opts(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, providers=[self.gcp], **options)
