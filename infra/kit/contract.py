"""The contract between the cluster layer and the platform: what a cluster hands the platform.

The cluster layer (infra/cluster) creates or reaches the cluster and does every cloud-specific thing; the
platform (infra/platform) builds in-cluster objects from the spec and this contract only. It imports neither
infra.cluster nor a cloud SDK (tests/test_contract.py checks the imports).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def account_key(namespace: str, service_account: str) -> str:
    """How `identities` names a Kubernetes service account."""
    return f"{namespace}/{service_account}"


@dataclass(frozen=True)
class WorkloadIdentity:
    """What makes a service account's pods act as a cloud identity: annotations on the service account and
    labels on its pods (AKS); EKS Pod Identity needs neither (the association names the account)."""

    annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoteWrite:
    """Where Prometheus sends its samples (the cloud's managed Prometheus) and how it signs them: `auth` is the
    prometheus-operator RemoteWriteSpec field of that cloud (`sigv4`, `azureAd`). The writing identity is the
    Prometheus service account's entry in `identities`."""

    url: pulumi.Input[str]
    auth: Mapping[str, Any]


@dataclass(frozen=True)
class ClusterContract:
    kind: str  # existing | eks | gke | aks
    # The provider every in-cluster object uses. It depends on `ready`, so nothing the platform declares is
    # applied (and no pod scheduled) before the node pools exist and carry their labels and taints.
    provider: k8s.Provider
    component: pulumi.Resource
    pools: tuple[str, ...]  # the pools whose nodes the cluster layer created or labelled
    capabilities: Mapping[str, str]  # capability -> mechanism (infra/spec/prerequisites.py vocabulary)
    ready: tuple[pulumi.Resource, ...]  # node pools, node label/taint patches, cluster add-ons
    # Cloud services the platform asks for, made by the cluster layer:
    buckets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)  # bucket key -> name in the store
    storage_parameters: Mapping[str, Mapping[str, pulumi.Input[str]]] = field(default_factory=dict)  # provisioner
    identities: Mapping[str, WorkloadIdentity] = field(default_factory=dict)  # account_key -> identity
    remote_write: RemoteWrite | None = None  # observability.managedPrometheus
    # The issuer of the cluster's ServiceAccount tokens, as the cluster reports it (EKS, AKS: an output of the cluster
    # resource, new with every rebuilt cluster); None where the spec knows it (kind, GKE, a declared one).
    service_account_issuer: pulumi.Input[str] | None = None

    def identity(self, namespace: str, service_account: str) -> WorkloadIdentity | None:
        return self.identities.get(account_key(namespace, service_account))

    def pod_labels(self, service_account: str) -> dict[str, str]:
        """What pods running as `service_account` (in whichever namespace) carry for its identities."""
        return {key: value for name, identity in sorted(self.identities.items())
                if name.endswith(f"/{service_account}") for key, value in identity.pod_labels.items()}
