"""Where nodes come from. Every kind returns the same small interface: a Kubernetes provider plus the
resources that must exist before the platform is installed on the nodes (node labels/taints on an existing
cluster, node pools on a cloud), so nothing above this layer knows which cloud it runs on."""

from __future__ import annotations

import importlib
import ipaddress
import math
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Platform

# Kubernetes taint effects as the cloud node-pool APIs spell them (EKS and GKE).
CLOUD_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


@dataclass(frozen=True)
class ClusterHandle:
    provider: k8s.Provider
    component: pulumi.ComponentResource
    node_setup: tuple[pulumi.Resource, ...]  # node labels/taints or node pools the platform waits for


def split(cidr: str, parts: int) -> list[str]:
    """The first `parts` equal subnets of `cidr`, as large as `parts` allows."""
    network = ipaddress.IPv4Network(cidr)
    extra_bits = max(1, math.ceil(math.log2(parts)))
    return [str(subnet) for subnet in list(network.subnets(prefixlen_diff=extra_bits))[:parts]]


class CloudCluster(pulumi.ComponentResource):
    """A cluster Trainyard creates: its provider comes from the new cluster, its node setup is its node pools."""

    provider: k8s.Provider
    node_pools: tuple[pulumi.Resource, ...]

    def handle(self) -> ClusterHandle:
        return ClusterHandle(provider=self.provider, component=self, node_setup=self.node_pools)


def kubernetes_provider(parent: pulumi.Resource, platform: Platform, kubeconfig: pulumi.Input[str]) -> k8s.Provider:
    """The provider of a cluster Trainyard created, from the cluster's kubeconfig output (kept secret)."""
    return k8s.Provider(
        "kubernetes",
        kubeconfig=pulumi.Output.secret(kubeconfig),
        cluster_identifier=platform.cluster_name,
        enable_server_side_apply=True,
        delete_unreachable=False,
        opts=pulumi.ResourceOptions(parent=parent),
    )


# Cloud kinds -> (module, component class). The cloud SDKs are large: a stack imports only its own.
CLOUD_COMPONENTS = {"eks": ("eks", "EksCluster"), "gke": ("gke", "GkeCluster"), "aks": ("aks", "AksCluster")}


def build_cluster(platform: Platform, kubeconfig: pulumi.Input[str] | None) -> ClusterHandle:
    """The cluster of a stack; a cloud cluster's kubeconfig comes from the new cluster, not from config."""
    kind = platform.spec.cluster.kind
    if kind == "existing":
        from .existing import ExistingCluster

        return ExistingCluster("cluster", platform, kubeconfig).handle()
    module, component = CLOUD_COMPONENTS[kind]
    cloud = getattr(importlib.import_module(f"{__name__}.{module}"), component)
    handle: ClusterHandle = cloud("cluster", platform).handle()
    return handle
