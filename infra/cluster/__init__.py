"""Where nodes come from. Every kind returns the same typed contract (infra/kit/contract.py): a Kubernetes provider
that waits for the nodes, the pools, the capabilities the cluster provides, and the cloud services the platform
asks for (buckets, workload identities), so nothing above this layer knows which cloud it runs on.

One folder per kind (infra/cluster/<kind>/, its shared base in infra/cluster/base.py); this module only picks the
kind's component."""

from __future__ import annotations

import importlib

import pulumi

from infra.kit.contract import ClusterContract
from infra.kit.naming import named
from infra.spec import Platform
from infra.spec.clouds import CLOUDS

# Cluster kind -> (module, component class): the one table that picks a kind's cluster code (its facts are in
# infra/spec/clouds, CLOUDS). The cloud SDKs are large: a stack imports only its own.
CLOUD_COMPONENTS = {"existing": ("existing.cluster", "ExistingCluster"), "eks": ("eks.cluster", "EksCluster"),
                    "gke": ("gke.cluster", "GkeCluster"), "aks": ("aks.cluster", "AksCluster")}


def build_cluster(platform: Platform, kubeconfig: pulumi.Input[str] | None) -> ClusterContract:
    """The cluster of a stack. A cluster Trainyard creates (a cloud's) gives its own kubeconfig; one that already
    exists is reached by the stack's."""
    kind = platform.spec.cluster.kind
    module, component = CLOUD_COMPONENTS[kind]
    cluster = getattr(importlib.import_module(f"{__name__}.{module}"), component)
    reached_by = (kubeconfig,) if CLOUDS[kind].cloud is None else ()
    contract: ClusterContract = cluster(named("cluster"), platform, *reached_by).contract(platform)
    return contract
