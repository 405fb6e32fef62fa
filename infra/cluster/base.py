"""Where nodes come from. Every kind returns the same typed contract (infra/kit/contract.py): a Kubernetes provider
that waits for the nodes, the pools, the capabilities the cluster provides, and the cloud services the platform
asks for (buckets, workload identities), so nothing above this layer knows which cloud it runs on."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.contract import ClusterContract, RemoteWrite, WorkloadIdentity
from infra.kit.naming import named
from infra.spec import Platform
from infra.spec.prerequisites import Provision

# Kubernetes taint effects as the cloud node-pool APIs spell them (EKS and GKE).
CLOUD_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def split(cidr: str, parts: int) -> list[str]:
    """The first `parts` equal subnets of `cidr`, as large as `parts` allows."""
    network = ipaddress.IPv4Network(cidr)
    extra_bits = max(1, math.ceil(math.log2(parts)))
    return [str(subnet) for subnet in list(network.subnets(prefixlen_diff=extra_bits))[:parts]]


def cluster_capabilities(platform: Platform) -> dict[str, str]:
    """What this cluster provides, as derived in the spec (the cluster layer implements each mechanism)."""
    provided: Mapping[str, Provision] = platform.prerequisites.provided
    return {capability: p.how for capability, p in sorted(provided.items()) if p.by in ("cluster", "site")}


class CloudCluster(pulumi.ComponentResource):
    """A cluster Trainyard creates: its provider comes from the new cluster, its readiness is its node pools and
    add-ons, and it makes the buckets, workload identities and managed Prometheus the platform asks for."""

    provider: k8s.Provider
    ready: tuple[pulumi.Resource, ...]
    buckets: dict[str, pulumi.Input[str]]
    storage_parameters: dict[str, dict[str, pulumi.Input[str]]]
    identities: dict[str, WorkloadIdentity]
    remote_write: RemoteWrite | None = None
    service_account_issuer: pulumi.Input[str] | None = None
    kind: str

    def contract(self, platform: Platform) -> ClusterContract:
        return ClusterContract(
            kind=self.kind, provider=self.provider, component=self, pools=tuple(f.pool for f in platform.flavors),
            capabilities=cluster_capabilities(platform), ready=self.ready, buckets=dict(self.buckets),
            storage_parameters=dict(self.storage_parameters), identities=dict(self.identities),
            remote_write=self.remote_write, service_account_issuer=self.service_account_issuer)


def kubernetes_provider(parent: pulumi.Resource, platform: Platform, kubeconfig: pulumi.Input[str],
                        ready: Sequence[pulumi.Resource]) -> k8s.Provider:
    """The provider of a cluster Trainyard created, from the cluster's kubeconfig output (kept secret). It waits
    for `ready` (node pools, add-ons): nothing in the cluster is applied before its nodes exist."""
    return k8s.Provider(
        named("kubernetes"),
        kubeconfig=pulumi.Output.secret(kubeconfig),
        cluster_identifier=platform.cluster_name,
        enable_server_side_apply=True,
        delete_unreachable=False,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(ready)),
    )
