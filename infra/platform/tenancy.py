"""Tenancy: every team namespace with its labels, quota, limit range and network policies."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Platform, TeamFacts
from infra.spec.base import format_amount
from infra.spec.pools import GPU_RESOURCE

from .objects import child_opts, metadata, namespace

TEAM_LABEL = "trainyard.io/team"
PSA_LEVEL = "restricted"

# Containers that declare nothing get these; the namespace quota requires requests to be set.
DEFAULT_REQUEST = {"cpu": "250m", "memory": "512Mi"}
DEFAULT_LIMIT = {"cpu": "2", "memory": "8Gi"}


class Tenancy(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Tenancy", name, None, opts)
        self.namespaces: dict[str, k8s.core.v1.Namespace] = {}
        for team in platform.teams:
            for ns in team.namespaces:
                self._namespace(team, ns, provider)
        self.register_outputs({"namespaces": sorted(self.namespaces)})

    def _namespace(self, team: TeamFacts, ns: str, provider: k8s.Provider) -> None:
        labels = {
            TEAM_LABEL: team.name,
            "pod-security.kubernetes.io/enforce": PSA_LEVEL,
            "pod-security.kubernetes.io/audit": PSA_LEVEL,
            "pod-security.kubernetes.io/warn": PSA_LEVEL,
        }
        created = namespace(ns, f"ns-{ns}", child_opts(self, provider, protect=False), labels=labels)
        self.namespaces[ns] = created
        opts = child_opts(self, provider, depends_on=[created])
        k8s.core.v1.ResourceQuota(f"{ns}-quota", metadata=metadata("team-quota", ns),
                                  spec={"hard": _quota_hard(team)}, opts=opts)
        k8s.core.v1.LimitRange(f"{ns}-limits", metadata=metadata("team-defaults", ns), spec={"limits": [{
            "type": "Container", "defaultRequest": DEFAULT_REQUEST, "default": DEFAULT_LIMIT,
        }]}, opts=opts)
        for policy_name, spec in _network_policies(team).items():
            k8s.networking.v1.NetworkPolicy(f"{ns}-{policy_name}", metadata=metadata(policy_name, ns),
                                            spec=spec, opts=opts)


def _quota_hard(team: TeamFacts) -> dict[str, str]:
    """A namespace may request at most what its team is guaranteed in total; Kueue admits within that."""
    hard = {
        "requests.cpu": format_amount("cpu", team.totals.get("cpu", 0)),
        "requests.memory": format_amount("memory", team.totals.get("memory", 0)),
        f"requests.{GPU_RESOURCE}": format_amount(GPU_RESOURCE, team.totals.get(GPU_RESOURCE, 0)),
    }
    return hard


def _network_policies(team: TeamFacts) -> dict[str, dict[str, object]]:
    same_team = [{"namespaceSelector": {"matchLabels": {TEAM_LABEL: team.name}}}]
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "allow-dns": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{
                "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }],
        },
        # Distributed training: rendezvous, NCCL and MPI traffic between the pods of a team's jobs.
        "allow-same-team": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": same_team}],
            "egress": [{"to": same_team}],
        },
    }
