"""What each persona must NOT be able to do, asked of the rendered roles and bindings (infra/apiserver/rbac.py, the
same `allowed` the access matrix uses) for every single-cluster stack: no persona writes quotas, limit ranges,
roles, bindings, network policies, namespaces or other cluster-scoped objects, nor reads Secrets outside its own
team; tenants reach nothing in another team's namespace and nothing cluster-wide but reads of the shared runtimes.
Each denial stands next to the nearest right the persona does have, so a test that denies everything fails too."""

from __future__ import annotations

import functools

import pytest

from infra.apiserver.rbac import CLUSTER, NAMESPACED, OTHER_NS, OWN, OWN_NS, PERSONAS, Grant, allowed, grants
from tests.conftest import STACKS, capture_of

TENANTS = ("ml-engineer", "analyst", "ci")
READS = ("get", "list", "watch")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
EVERY_VERB = (*READS, *WRITES)
RBAC = "rbac.authorization.k8s.io"
# (group, resource): no persona may change these anywhere; they are the platform's, written by Pulumi only.
PLATFORM_OWNED = (
    ("", "resourcequotas"), ("", "limitranges"), ("", "namespaces"), ("", "persistentvolumes"),
    (RBAC, "roles"), (RBAC, "rolebindings"), (RBAC, "clusterroles"), (RBAC, "clusterrolebindings"),
    ("networking.k8s.io", "networkpolicies"), ("storage.k8s.io", "storageclasses"),
    ("apiextensions.k8s.io", "customresourcedefinitions"), ("scheduling.k8s.io", "priorityclasses"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "resourceflavors"),
    ("kueue.x-k8s.io", "cohorts"), ("kueue.x-k8s.io", "workloadpriorityclasses"), ("kueue.x-k8s.io", "topologies"),
    ("trainer.kubeflow.org", "clustertrainingruntimes"), ("trainer.kubeflow.org", "trainingruntimes"),
)
# The only cluster-wide rights a tenant holds: reading the shared ClusterTrainingRuntimes.
TENANT_CLUSTER_RIGHTS = {("trainer.kubeflow.org", "clustertrainingruntimes", verb) for verb in READS}


@functools.cache
def _found(stack: str) -> frozenset[Grant]:
    return frozenset(grants(capture_of(stack))[0])


def _can(stack: str, persona: str, verb: str, group: str, resource: str, where: str = OWN_NS) -> bool:
    return allowed(_found(stack), persona, verb, group, resource, where)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", PERSONAS)
def test_no_persona_changes_what_the_platform_owns(stack: str, persona: str) -> None:
    granted = [(verb, group, resource, where) for group, resource in PLATFORM_OWNED for verb in WRITES
               for where in (OWN_NS, OTHER_NS) if _can(stack, persona, verb, group, resource, where)]
    assert granted == [], f"{stack}: {persona} may change platform-owned objects: {granted}"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", PERSONAS)
def test_no_persona_escalates_binds_or_impersonates(stack: str, persona: str) -> None:
    asked = [*((verb, RBAC, resource) for verb in ("escalate", "bind") for resource in ("roles", "clusterroles")),
             *(("impersonate", group, resource) for group, resource in (
                 ("", "users"), ("", "groups"), ("", "serviceaccounts"), ("authentication.k8s.io", "userextras"))),
             ("create", "", "serviceaccounts"), ("create", "", "serviceaccounts/token")]
    granted = [q for q in asked for where in (OWN_NS, OTHER_NS) if _can(stack, persona, *q, where)]
    assert granted == [], f"{stack}: {persona}: {granted}"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", PERSONAS)
def test_secrets_are_out_of_reach_outside_the_own_team(stack: str, persona: str) -> None:
    assert [v for v in EVERY_VERB if _can(stack, persona, v, "", "secrets", OTHER_NS)] == []
    if persona != "ml-engineer":  # the engineers' own namespaces hold their data credentials
        assert [v for v in EVERY_VERB if _can(stack, persona, v, "", "secrets", OWN_NS)] == []


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", PERSONAS)
def test_nodes_are_cordoned_by_platform_admins_only_and_changed_by_nobody(stack: str, persona: str) -> None:
    assert [v for v in ("create", "update", "delete", "deletecollection") if _can(stack, persona, v, "", "nodes")] == []
    for subresource in ("nodes/proxy", "nodes/status"):
        assert [v for v in EVERY_VERB if _can(stack, persona, v, "", subresource)] == []
    if persona in TENANTS:
        assert [v for v in EVERY_VERB if _can(stack, persona, v, "", "nodes")] == []


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", TENANTS)
def test_a_tenant_reaches_nothing_in_another_teams_namespace(stack: str, persona: str) -> None:
    namespaced = {(g.group, g.resource) for g in _found(stack) if g.scope == NAMESPACED}
    namespaced |= {("", "secrets"), ("", "configmaps"), ("", "pods"), ("", "pods/exec"), ("", "pods/log"),
                   ("", "persistentvolumeclaims"), ("trainer.kubeflow.org", "trainjobs"), ("batch", "jobs")}
    granted = [(verb, group, resource) for group, resource in sorted(namespaced) for verb in EVERY_VERB
               if _can(stack, persona, verb, group, resource, OTHER_NS)]
    assert granted == [], f"{stack}: {persona} reaches another team's namespace: {granted}"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("persona", TENANTS)
def test_a_tenant_holds_no_cluster_wide_right_but_reading_the_runtimes(stack: str, persona: str) -> None:
    mine = [g for g in _found(stack) if g.persona == persona]
    assert {(g.group, g.resource, g.verb) for g in mine if g.scope == CLUSTER} <= TENANT_CLUSTER_RIGHTS
    # Rights limited to the team's own cluster-scoped objects by name (its Namespace, its ClusterQueue) are reads.
    assert {g.verb for g in mine if g.scope == OWN} <= set(READS)


def test_each_denial_is_at_the_edge_of_a_right_the_persona_holds() -> None:
    """The nearest allowed question beside each denied one (onprem-lab binds every persona), so that the
    denials above cannot pass by denying everything."""
    stack = "onprem-lab"
    for persona, verb, group, resource, where, expected in [
        ("ml-engineer", "get", "", "resourcequotas", OWN_NS, True),
        ("ml-engineer", "update", "", "resourcequotas", OWN_NS, False),
        ("ml-engineer", "get", "", "resourcequotas", OTHER_NS, False),
        ("ml-engineer", "list", "", "limitranges", OWN_NS, True),
        ("ml-engineer", "patch", "", "limitranges", OWN_NS, False),
        ("ml-engineer", "get", "", "secrets", OWN_NS, True),
        ("ml-engineer", "get", "", "secrets", OTHER_NS, False),
        ("platform-admin", "patch", "", "nodes", OWN_NS, True),
        ("platform-admin", "delete", "", "nodes", OWN_NS, False),
        ("platform-admin", "get", RBAC, "roles", OTHER_NS, True),
        ("platform-admin", "create", RBAC, "roles", OTHER_NS, False),
        ("platform-admin", "get", "", "resourcequotas", OTHER_NS, True),
        ("platform-admin", "update", "", "resourcequotas", OTHER_NS, False),
        ("platform-admin", "get", "", "secrets", OTHER_NS, False),
        ("analyst", "get", "", "pods", OWN_NS, True),
        ("analyst", "get", "", "pods", OTHER_NS, False),
        ("ci", "create", "trainer.kubeflow.org", "trainjobs", OWN_NS, True),
        ("ci", "create", "trainer.kubeflow.org", "trainjobs", OTHER_NS, False),
        ("ml-engineer", "get", "trainer.kubeflow.org", "clustertrainingruntimes", OWN_NS, True),
        ("ml-engineer", "create", "trainer.kubeflow.org", "clustertrainingruntimes", OWN_NS, False),
    ]:
        assert _can(stack, persona, verb, group, resource, where) is expected, (persona, verb, resource, where)
