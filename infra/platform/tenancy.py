"""Tenancy: every team namespace with its Pod Security labels, quota, limit range, network policies and the
ServiceAccount that CI submits TrainJobs with. Who may do what in these namespaces is in rbac.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, child_opts, kube_object, metadata, psa_labels
from infra.platform.models.registry_patches import DATABASE_PODS, registry_requests
from infra.platform.network import dns_egress, team_egress
from infra.platform.trainer import NAMESPACE as TRAINER_NAMESPACE
from infra.platform.trainer import TRAINER_STATUS_PORT
from infra.spec import Platform, TeamFacts
from infra.spec.base import format_amount, parse_quantity
from infra.spec.teams import CI_SERVICE_ACCOUNT, ServingBudget
from infra.vocabulary import NAME_LABEL, PSA_REASON, TEAM_LABEL

# Containers that declare no requests get these, so that the quota on requests admits them. No default
# limits: a default limit below a container's own request would make the API server reject the pod.
DEFAULT_REQUEST = {"cpu": "250m", "memory": "512Mi"}


class Tenancy(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Tenancy", name, None, opts)
        self._platform = platform
        self.namespaces: dict[str, pulumi.CustomResource] = {}
        for team in platform.teams:
            for ns in team.namespaces:
                self._namespace(team, ns, provider)
        self.register_outputs({"namespaces": sorted(self.namespaces)})

    def _namespace(self, team: TeamFacts, ns: str, provider: k8s.Provider) -> None:
        spec = self._platform.spec.teams[team.name]
        security = spec.pod_security
        exception = {PSA_REASON: security.reason} if security.level == "baseline" and security.reason else None
        labels = {TEAM_LABEL: team.name}
        psa = psa_labels(security.level, self._platform.spec.versions.kubernetes)
        profile, owner = profile_marks(self._platform)
        ns_meta = metadata(ns, labels={**labels, **psa, **profile}, annotations={**(exception or {}), **owner} or None)
        created = kube_object(f"ns-{ns}", "v1", "Namespace", ns_meta, child_opts(self, provider, protect=False))
        self.namespaces[ns] = created
        opts = child_opts(self, provider, depends_on=[created])

        def meta(name: str) -> k8s.meta.v1.ObjectMetaArgsDict:
            return metadata(name, ns, labels)

        kube_object(f"{ns}-quota", "v1", "ResourceQuota", meta("team-quota"), opts,
                    spec={"hard": quota_hard(self._platform, team, ns)})
        kube_object(f"{ns}-limits", "v1", "LimitRange", meta("team-defaults"), opts,
                    spec={"limits": [{"type": "Container", "defaultRequest": DEFAULT_REQUEST}]})
        models = self._platform.models is not None and self._platform.models.by_namespace(ns) is not None
        outside = team_egress(self._platform, team.name)
        for policy_name, policy in network_policies(team.name, outside, models).items():
            kube_object(f"{ns}-{policy_name}", NETWORKING_API, "NetworkPolicy", meta(policy_name), opts, spec=policy)
        kube_object(f"{ns}-ci", "v1", "ServiceAccount", meta(CI_SERVICE_ACCOUNT), opts,
                    automountServiceAccountToken=False)
        # The namespace's `default` ServiceAccount exists already (the API server makes it): a server-side
        # apply patch turns its token mount off, so a pod that names no account carries no credential.
        default = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("default"),
                   "automountServiceAccountToken": False}
        pulumi.CustomResource("kubernetes:core/v1:ServiceAccountPatch", named(f"{ns}-default-sa"), default, opts)


# What the Kubeflow parts read from a profile namespace (kubeflow-platform reference §2.4, §7.5), set by the
# platform instead of a Profile controller (which would run as cluster-admin): the profile label the vendored
# NetworkPolicies of `kubeflow` admit (ml-pipeline, seaweedfs, metadata-grpc), the label the Pipelines profile
# controller selects namespaces by (its per-namespace artifact config), and the `owner` annotation. The owner is
# the platform, not a person: no one is the namespace's KFAM owner (admin); people get their team's rights from
# their groups (infra/platform/web/binder.py), and a Profile could adopt the namespace only if it named this owner.
PROFILE_LABELS = {"app.kubernetes.io/part-of": "kubeflow-profile", "pipelines.kubeflow.org/enabled": "true"}
PROFILE_OWNER = "trainyard-platform"


def profile_marks(platform: Platform) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) that make a team namespace a Kubeflow profile namespace, on stacks with a front
    door (the web UIs that read them are served only behind it)."""
    if platform.front_door is None:
        return {}, {}
    return dict(PROFILE_LABELS), {"owner": PROFILE_OWNER}


def quota_hard(platform: Platform, team: TeamFacts, namespace: str | None = None) -> dict[str, str]:
    """Compute up to the team's reach, so that Kueue stays the one place where fair sharing is decided
    (a quota at the nominal share would reject the pods of a workload Kueue admitted on borrowed GPUs);
    every namespace of a team gets the ceiling, the team's ClusterQueue bounds their sum. The team's models
    `namespace` instead gets its serving budget plus what its registry requests (serving_compute). Object counts
    and storage come from the team's namespaceQuota. Services stay cluster-internal."""
    models = platform.models.by_namespace(namespace) if platform.models and namespace else None
    compute = serving_compute(platform, models.serving) if models else platform.queueing.reach(team.name)
    spec = platform.spec.teams[team.name].namespace_quota
    gpu_resources = [r for r in platform.covered_resources if r not in ("cpu", "memory")]
    hard = {f"requests.{r}": format_amount(r, compute.get(r, Decimal(0)))
            for r in ("cpu", "memory", *gpu_resources)}
    hard.update({
        "pods": str(spec.pods),
        "services": str(spec.services),
        "services.loadbalancers": "0",
        "services.nodeports": "0",
        "configmaps": str(spec.config_maps),
        "secrets": str(spec.secrets),
        "persistentvolumeclaims": str(spec.persistent_volume_claims),
        "requests.storage": str(spec.storage),
        "count/trainjobs.trainer.kubeflow.org": str(spec.train_jobs),
    })
    return hard


def serving_compute(platform: Platform, budget: ServingBudget | None) -> dict[str, Decimal]:
    """A models namespace's compute: the team's serving budget (its GPUs as the budget's pool's GPU resource,
    none of any other) plus its registry's requests. InferenceService pods are not Kueue's: this quota is what
    bounds them (docs/models.md)."""
    compute = registry_requests()
    if budget is not None:
        compute["cpu"] += parse_quantity(budget.cpu)
        compute["memory"] += parse_quantity(budget.memory)
        for resource in platform.flavor(budget.pool).gpu_resources:
            compute[resource] = Decimal(budget.gpus)
    return compute


def _namespace_peer(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAME_LABEL: name}}}


def network_policies(team_name: str, outside: dict[str, Any], models: bool = False) -> dict[str, Any]:
    """Deny everything, then allow what training needs, and `outside` (infra/platform/network.py team_egress).
    Policies are additive: each allow names one reason. In a
    `models` namespace the same-team allowance leaves the registry's database out: only its server reaches it
    (infra/platform/models/registry.py)."""
    same_team = [{"namespaceSelector": {"matchLabels": {TEAM_LABEL: team_name}}}]
    team_pods = {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}
                                      for key, value in DATABASE_PODS.items()]} if models else {}
    return {
        "default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        "allow-dns": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [dns_egress()],
        },
        # Distributed training: rendezvous, NCCL and MPI traffic between the pods of a team's jobs, across
        # the team's namespaces (the team label is set by Trainyard; tenants cannot relabel namespaces).
        "allow-same-team": {
            "podSelector": team_pods,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": same_team}],
            "egress": [{"to": same_team}],
        },
        **outside,
        # TrainJob progress reporting (the TrainJobStatus feature) posts to the Trainer controller.
        "allow-trainer-status": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [_namespace_peer(TRAINER_NAMESPACE)],
                        "ports": [{"protocol": "TCP", "port": TRAINER_STATUS_PORT}]}],
        },
    }
