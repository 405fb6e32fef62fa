"""Where nodes come from. Every kind returns the same typed contract (infra/kit/contract.py): a Kubernetes provider
that waits for the nodes, the pools, the capabilities the cluster provides, and the cloud services the platform
asks for (buckets, workload identities), so nothing above this layer knows which cloud it runs on.

One folder per kind (infra/cluster/<kind>/); this module only picks the kind's component."""

from __future__ import annotations

import importlib

import pulumi

from infra.kit.contract import ClusterContract
from infra.kit.naming import named
from infra.spec import Platform

# Cloud kinds -> (module, component class). The cloud SDKs are large: a stack imports only its own.
CLOUD_COMPONENTS = {"eks": ("eks.cluster", "EksCluster"), "gke": ("gke.cluster", "GkeCluster"),
                    "aks": ("aks.cluster", "AksCluster")}


def build_cluster(platform: Platform, kubeconfig: pulumi.Input[str] | None) -> ClusterContract:
    """The cluster of a stack; a cloud cluster's kubeconfig comes from the new cluster, not from config."""
    kind = platform.spec.cluster.kind
    if kind == "existing":
        from infra.cluster.existing.cluster import ExistingCluster

        return ExistingCluster(named("cluster"), platform, kubeconfig).contract(platform)
    module, component = CLOUD_COMPONENTS[kind]
    cloud = getattr(importlib.import_module(f"{__name__}.{module}"), component)
    contract: ClusterContract = cloud(named("cluster"), platform).contract(platform)
    return contract
