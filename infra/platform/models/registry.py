"""Kubeflow Model Registry 0.3.7 (docs/models.md): one registry per team, in the team's models namespace, from the
vendored Kubeflow Platform 26.03 (applications/model-registry/upstream/overlays/db, patched: registry_patches.py).

The registry has no authentication or authorization of its own (kubeflow-platform reference §5), so each team gets its
own server and MySQL, and isolation is by who can reach them:
- the network: the server's 8080 admits the team's own namespaces (tenancy's same-team policy) and the front door's
  gateway pods (below); the database's 3306 admits only the server (tenancy's same-team policy leaves the database
  out in a models namespace);
- the front door: `/model-registry/<team>/` routes to that team's registry only, and a DENY policy on the gateway
  refuses the path to anyone who is not the team's (its analysts and engineers by the verified token's groups, its
  CI by the token's principal, the platform admins) and refuses writes (anything but GET and HEAD) to its analysts.
  The gateway's vendored ALLOW policy admits everything else, so an ALLOW policy of ours would admit nothing more
  and restrict nothing: Istio runs every DENY policy before the ALLOW ones, and a request that matches a DENY rule
  is refused whatever else allows it (Istio 1.28 pilot/pkg/security/authz/builder).

The database's password is each team's own, derived from the stack's secret key trainyard:modelRegistryDbPassword
(one key to keep; a team's password opens no other team's database).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import GATEWAY_PEER, GATEWAY_POD_LABELS, ISTIO, MODEL_REGISTRY, Kustomize
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, child_opts, kube_object, kustomize_directory, metadata, retained
from infra.platform.frontdoor import ISTIO_NETWORKING_API, ISTIO_SECURITY_API
from infra.platform.frontdoor_identity import checked, derived, with_cluster_issuer
from infra.platform.frontdoor_patches import GATEWAY_REF
from infra.platform.models.registry_patches import (
    DATABASE_PODS,
    DB_PORT,
    DB_SECRET,
    DB_USER,
    SERVER_PODS,
    registry_patches,
)
from infra.spec import Platform
from infra.spec.frontdoor.web_access import PLATFORM_ADMIN, FrontDoorFacts
from infra.spec.models.model import REGISTRY_PORT, REGISTRY_SERVICE, ModelsFacts, TeamModels
from infra.spec.versions import KUBEFLOW_MANIFESTS

OVERLAY = next(source.path for source in MODEL_REGISTRY.sources if isinstance(source, Kustomize))
READ_METHODS = ["GET", "HEAD"]  # what a team's analysts may send; anything else is a write


def db_password(facts: ModelsFacts, team: str, value: str) -> str:
    """The team's database password: 32 hex characters (safe inside the server's MySQL DSN as it is written)."""
    return derived(checked(facts.secret_key, value), f"model-registry-db-{team}")


def _login(facts: ModelsFacts, team: str) -> Callable[[str], dict[str, str]]:
    """The team's database Secret's data (the overlay's keys) from the stack's secret key."""
    return lambda value: {"MYSQL_USER_NAME": DB_USER, "MYSQL_ROOT_PASSWORD": db_password(facts, team, value)}


def registry_ingress() -> dict[str, dict[str, Any]]:
    """NetworkPolicy name -> spec in a models namespace, beside tenancy's (default-deny, same-team): the gateway's
    pods reach the server's REST port; the server reaches the database's port."""
    return {
        "allow-gateway-to-model-registry": {
            "podSelector": {"matchLabels": dict(SERVER_PODS)}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [GATEWAY_PEER], "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}]}]},
        "allow-model-registry-to-database": {
            "podSelector": {"matchLabels": dict(DATABASE_PODS)}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": dict(SERVER_PODS)}}],
                         "ports": [{"protocol": "TCP", "port": DB_PORT}]}]},
    }


def registry_route(door: FrontDoorFacts, team: TeamModels) -> dict[str, Any]:
    """The VirtualService's spec: `/model-registry/<team>/...` on the stack's host, to the team's registry with the
    prefix removed (`.../api/model_registry/v1alpha3/...` reaches the server as `/api/model_registry/...`)."""
    host = f"{REGISTRY_SERVICE}.{team.namespace}.svc.cluster.local"
    return {"gateways": [GATEWAY_REF], "hosts": [door.spec.host],
            "http": [{"name": f"model-registry-{team.team}", "match": [{"uri": {"prefix": team.route}}],
                      "rewrite": {"uri": "/"},
                      "route": [{"destination": {"host": host, "port": {"number": REGISTRY_PORT}}}]}]}


def registry_access(door: FrontDoorFacts, team: TeamModels, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """The gateway's DENY policy for the team's path. Rule 1: anyone not among the team's readers; rule 2: a write
    from anyone not among its writers. Readers: the team's engineers' and analysts' groups and the platform admins'
    (`when` notValues over the groups claim: a list claim matches when one of its items is listed, so notValues
    holds when none is, or when the token has no such claim), and the team's CI accounts (`from`
    notRequestPrincipals: their tokens carry no groups). Writers: the same without the analysts."""
    prefix = team.route.rstrip("/")
    grants = [g for g in door.grants if g.team == team.team or g.persona == PLATFORM_ADMIN]
    readers = sorted({g.group for g in grants})
    writers = sorted({g.group for g in grants if g.right != "read"})
    issuer = door.machine_issuer
    ci = sorted(f"{issuer.url}/system:serviceaccount:{ns}:{account}"
                for ns, account in door.machine_accounts if ns in namespaces) if issuer is not None else []

    def rule(groups: list[str], methods: dict[str, list[str]]) -> dict[str, Any]:
        refused: dict[str, Any] = {"to": [{"operation": {"paths": [prefix, f"{prefix}/*"], **methods}}]}
        if ci:
            refused["from"] = [{"source": {"notRequestPrincipals": ci}}]
        if groups:
            refused["when"] = [{"key": f"request.auth.claims[{door.groups_claim}]", "notValues": groups}]
        return refused

    return {"selector": {"matchLabels": dict(GATEWAY_POD_LABELS)}, "action": "DENY",
            "rules": [rule(readers, {}), rule(writers, {"notMethods": READ_METHODS})]}


class ModelRegistry(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, secret: pulumi.Output[str] | None,
                 team_namespaces: Mapping[str, pulumi.Resource], after: list[pulumi.Resource],
                 issuer: pulumi.Input[str] | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        """`secret`: the value of trainyard:modelRegistryDbPassword, None while unset (the servers and databases
        then wait for their Secret); `after`: the front door (Istio's CRDs for the route and the policy); `issuer`:
        the cluster's ServiceAccount token issuer where the cluster reports it (CI's principals in the policy)."""
        super().__init__("trainyard:platform:ModelRegistry", name, None, opts)
        facts, door = platform.models, platform.front_door
        assert facts is not None and door is not None
        namespaces = {team.name: team.namespaces for team in platform.teams}
        patches = registry_patches(facts)
        for team in facts.teams:
            ns, created = team.namespace, team_namespaces[team.namespace]
            # The database's volume survives `pulumi destroy` and the registry's removal.
            kustomize_directory(f"model-registry-{team.team}", KUBEFLOW_MANIFESTS, OVERLAY,
                                child_opts(self, provider, [created, *after],
                                           transforms=[retained("core/v1:PersistentVolumeClaim")]),
                                namespace=ns, patches=patches)
            opts_ns = child_opts(self, provider, [created])
            for policy, spec in registry_ingress().items():
                kube_object(f"{ns}-{policy}", NETWORKING_API, "NetworkPolicy", metadata(policy, ns), opts_ns,
                            spec=spec)
            if secret is not None:
                data = secret.apply(_login(facts, team.team))
                kube_object(f"{ns}-{DB_SECRET}", "v1", "Secret", metadata(DB_SECRET, ns), opts_ns, type="Opaque",
                            stringData=pulumi.Output.secret(data))
            opts_door = child_opts(self, provider, [*after])
            kube_object(f"model-registry-{team.team}-route", ISTIO_NETWORKING_API, "VirtualService",
                        metadata(f"model-registry-{team.team}", ISTIO.namespace), opts_door,
                        spec=registry_route(door, team))
            kube_object(f"model-registry-{team.team}-access", ISTIO_SECURITY_API, "AuthorizationPolicy",
                        metadata(f"model-registry-{team.team}", ISTIO.namespace), opts_door,
                        spec=with_cluster_issuer(door, issuer, partial(registry_access, team=team,
                                                                       namespaces=namespaces[team.team])))
        self.register_outputs({"version": facts.registry_version, "database": "/".join(facts.database),
                               "registries": {t.team: t.registry_url for t in facts.teams}})


def model_registry(platform: Platform, provider: k8s.Provider, secret: pulumi.Output[str] | None,
                   team_namespaces: Mapping[str, pulumi.Resource],
                   after: list[pulumi.Resource], issuer: pulumi.Input[str] | None = None) -> ModelRegistry | None:
    """The teams' registries, when the stack declares `models` (on the manager only: a worker's facts carry none)."""
    if platform.models is None:
        return None
    return ModelRegistry(named("model-registry"), platform, provider, secret, team_namespaces, after, issuer)
