"""Where nodes come from. Every kind returns the same small interface: a Kubernetes provider plus the
resources that must exist before the platform is installed on the nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Platform


@dataclass(frozen=True)
class ClusterHandle:
    provider: k8s.Provider
    component: pulumi.ComponentResource
    node_setup: tuple[pulumi.Resource, ...]  # node labels/taints or node pools the platform waits for


def build_cluster(platform: Platform, kubeconfig: pulumi.Input[str] | None) -> ClusterHandle:
    kind = platform.spec.cluster.kind
    if kind == "existing":
        from .existing import ExistingCluster

        return ExistingCluster("cluster", platform, kubeconfig).handle()
    raise ValueError(f"cluster kind {kind} is not supported")  # unreachable: the spec admits only known kinds
