"""Team A of a stack as an attacker of the people-facing layer (tests/test_attacks_people_*.py): the rendered objects of
the cluster tenants submit to, the web binder's RoleBindings for A's engineers and analysts signed in at the front
door, every identity a member of A or a pod of A's namespaces acts as, and the resources the cluster's roles name."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from infra.apiserver import identity as identities
from infra.apiserver.admit import submitted_to
from infra.apiserver.rbac import Authorizer, Identity
from infra.components import ISTIO
from infra.offline.plan import objects
from infra.platform.web import binder as web_binder
from infra.platform.web import server
from infra.spec import Platform
from infra.spec.teams import acceptance_namespace
from tests.conftest import ALL_STACKS, capture_of, platform_of

Obj = dict[str, Any]
READS = ("get", "list", "watch")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
EVERY_VERB = (*READS, *WRITES)
RBAC = "rbac.authorization.k8s.io"
PIPELINES = "pipelines.kubeflow.org"
KSERVE = "serving.kserve.io"
NOW = 1_800_000_000  # the web binder's clock: a session that has just begun
ENGINEER_WEB, ANALYST_WEB = "alice@example.com", "bob@example.com"
TEAM_PERSONAS = ("ml-engineer", "analyst", "ci", "ci-serviceaccount", "pipeline-step")
# Core kinds that live at the cluster scope (a custom kind's scope is its rendered CRD's).
CORE_CLUSTER_SCOPED = frozenset({
    "namespaces", "nodes", "persistentvolumes", "clusterroles", "clusterrolebindings", "storageclasses",
    "customresourcedefinitions", "priorityclasses", "validatingadmissionpolicies", "validatingadmissionpolicybindings",
    "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "tokenreviews", "subjectaccessreviews",
    "selfsubjectaccessreviews", "selfsubjectrulesreviews", "certificatesigningrequests", "apiservices", "csidrivers",
    "csinodes", "volumeattachments", "runtimeclasses", "ingressclasses", "componentstatuses"})
# Stacks with a second team to attack.
MULTI_TEAM = [s for s in ALL_STACKS if len(platform_of(s).teams) > 1]


@dataclass(frozen=True)
class World:
    platform: Platform
    objects: tuple[Obj, ...]  # rendered, plus the web binder's bindings for A's signed-in people
    authorizer: Authorizer
    team: str  # A
    own: tuple[str, ...]  # A's namespaces (its models and Pipelines namespaces among them)
    others: tuple[str, ...]  # every other team's
    attackers: tuple[tuple[str, Identity], ...]


def _web_bindings(platform: Platform, rendered: list[Obj], team: str) -> list[Obj]:
    """What the web binder writes when A's engineer and A's analyst sign in (infra/platform/web/server.py)."""
    config = next(json.loads(o["data"]["grants.json"]) for o in rendered if o["kind"] == "ConfigMap"
                  and o["metadata"]["name"] == web_binder.NAME and o["metadata"].get("namespace") == ISTIO.namespace)
    groups = platform.spec.teams[team].groups
    found: list[Obj] = []
    for user, names in ((ENGINEER_WEB, groups.engineers), (ANALYST_WEB, groups.analysts)):
        # the token's groups claim holds the directory's names, without the API server's groupPrefix
        found += server.decide(config, user, list(names), None, NOW, [])[0]
    return found


@functools.cache
def world(stack: str) -> World:
    platform, capture = submitted_to(platform_of(stack), capture_of(stack))
    rendered = [obj for _, obj in objects(capture)]
    team = platform.teams[0]
    everything = rendered + _web_bindings(platform, rendered, team.name)
    own = (*team.namespaces, acceptance_namespace(team.name))
    attackers = [(persona, identities.resolve(platform, f"{persona}:{team.name}", [])[1]) for persona in TEAM_PERSONAS]
    attackers += [(f"web {ENGINEER_WEB}", Identity(ENGINEER_WEB, (identities.AUTHENTICATED,))),
                  (f"web {ANALYST_WEB}", Identity(ANALYST_WEB, (identities.AUTHENTICATED,)))]
    # A pod of A's namespaces acts as its ServiceAccount: every one rendered there, and each namespace's default.
    accounts = {(ns, "default") for ns in own} | {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in rendered
        if o["kind"] == "ServiceAccount" and o["metadata"].get("namespace") in own}
    attackers += [(f"pod as {ns}/{name}", identities.service_account(ns, name)) for ns, name in sorted(accounts)]
    others = tuple(ns for other in platform.teams if other.name != team.name
                   for ns in (*other.namespaces, acceptance_namespace(other.name)))
    return World(platform, tuple(everything), Authorizer(everything), team.name, own, others, tuple(attackers))


def cluster_scoped(rendered: tuple[Obj, ...]) -> frozenset[str]:
    return CORE_CLUSTER_SCOPED | {o["spec"]["names"]["plural"] for o in rendered
                                  if o["kind"] == "CustomResourceDefinition" and o["spec"].get("scope") == "Cluster"}


def named_resources(rendered: tuple[Obj, ...]) -> set[tuple[str, str]]:
    """Every (API group, resource) some rendered role names, and the objects of the people-facing layer."""
    found = {(g, r) for o in rendered if o["kind"] in ("Role", "ClusterRole") for rule in o.get("rules") or []
             for g in rule.get("apiGroups", []) for r in rule.get("resources", []) if "*" not in (g, r)}
    return found | {("", "secrets"), ("", "pods"), ("", "pods/exec"), ("", "services"), ("", "serviceaccounts/token"),
                    (PIPELINES, "runs"), (PIPELINES, "experiments"), (PIPELINES, "pipelines"),
                    (KSERVE, "inferenceservices"), (KSERVE, "servingruntimes"), ("argoproj.io", "workflows")}


def namespaced_resources(rendered: tuple[Obj, ...]) -> list[tuple[str, str]]:
    scoped = cluster_scoped(rendered)
    return sorted((g, r) for g, r in named_resources(rendered) if r.split("/")[0] not in scoped)
