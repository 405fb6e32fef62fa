"""The offline access model (infra/apiserver/rbac.py) on hand-built roles and bindings: every RBAC matching dimension
(verbs, API groups, resources with their subresources, `*` in each, resourceNames, subjects by kind, RoleBinding vs
ClusterRoleBinding, Role vs ClusterRole, aggregation) tried both ways, as the API server's RBAC authorizer answers
(k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac), and the persona matrix (grants, allowed) on the same objects."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.rbac import (
    CLUSTER,
    MASTERS,
    NAMESPACED,
    OTHER_NS,
    OWN,
    OWN_NS,
    Authorizer,
    Grant,
    Identity,
    access_matrix,
    aggregated,
    allowed,
    decisions,
    forbidden,
    grants,
)
from infra.kit.objects import type_token
from infra.offline.engine import Capture, Registration

RBAC_V1 = "rbac.authorization.k8s.io/v1"
ALICE = Identity("alice", ("team-a",))
BOB = Identity("bob", ("team-b",))


def _rule(verbs: list[str], groups: list[str], resources: list[str], **extra: Any) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, **extra}


def _cluster_role(name: str, rules: list[dict[str, Any]] | None, labels: dict[str, str] | None = None,
                  selectors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    role: dict[str, Any] = {"apiVersion": RBAC_V1, "kind": "ClusterRole",
                            "metadata": {"name": name, "labels": labels or {}}}
    if rules is not None:
        role["rules"] = rules
    if selectors is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return role


def _binding(kind: str, name: str, role: str, subjects: list[dict[str, Any]], namespace: str | None = None,
             role_kind: str = "ClusterRole", persona: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"trainyard.io/persona": persona} if persona else {}}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": RBAC_V1, "kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}}


def _group(name: str) -> dict[str, str]:
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def _allows(objs: list[dict[str, Any]], verb: str, group: str, resource: str, namespace: str = "a",
            who: Identity = ALICE) -> bool:
    return Authorizer(objs).allows(who, verb, group, resource, namespace)


def _bound(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """One rule in a ClusterRole bound to team-a by a RoleBinding in namespace a."""
    return [_cluster_role("r", [rule]), _binding("RoleBinding", "b", "r", [_group("team-a")], "a")]


# --- the authorizer: one dimension at a time, the matching value admitted and its neighbour refused ---------------

@pytest.mark.parametrize(("rule", "asked", "expected"), [
    (_rule(["get"], [""], ["pods"]), ("get", "", "pods"), True),
    (_rule(["get"], [""], ["pods"]), ("list", "", "pods"), False),  # verb
    (_rule(["*"], [""], ["pods"]), ("delete", "", "pods"), True),
    (_rule(["get"], [""], ["pods"]), ("get", "apps", "pods"), False),  # API group
    (_rule(["get"], ["*"], ["pods"]), ("get", "apps", "pods"), True),
    (_rule(["get"], ["batch"], ["jobs"]), ("get", "", "jobs"), False),  # the core group is a group like any other
    (_rule(["get"], [""], ["pods"]), ("get", "", "secrets"), False),  # resource
    (_rule(["get"], [""], ["*"]), ("get", "", "secrets"), True),
    (_rule(["get"], [""], ["pods"]), ("get", "", "pods/log"), False),  # a subresource is not its resource
    (_rule(["get"], [""], ["pods/log"]), ("get", "", "pods"), False),
    (_rule(["get"], [""], ["pods/log"]), ("get", "", "pods/log"), True),
    (_rule(["create"], [""], ["pods/exec"]), ("create", "", "pods/exec"), True),
    (_rule(["get"], [], ["pods"]), ("get", "", "pods"), False),  # no group named: nothing matches
    (_rule([], [""], ["pods"]), ("get", "", "pods"), False),
    (_rule(["get"], [""], []), ("get", "", "pods"), False),
    ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, ("get", "", "pods"), False),  # no groups, no resources
    # resourceNames: a named get is allowed (the model answers for some object), a create never (no name yet)
    (_rule(["get", "create"], [""], ["configmaps"], resourceNames=["one"]), ("get", "", "configmaps"), True),
    (_rule(["get", "create"], [""], ["configmaps"], resourceNames=["one"]), ("create", "", "configmaps"), False),
    (_rule(["get", "create"], [""], ["configmaps"], resourceNames=[]), ("create", "", "configmaps"), True),
    (_rule(["*"], ["*"], ["*"]), ("escalate", "rbac.authorization.k8s.io", "roles"), True),
])
def test_each_rule_dimension_admits_its_match_and_refuses_the_neighbour(
        rule: dict[str, Any], asked: tuple[str, str, str], expected: bool) -> None:
    assert _allows(_bound(rule), *asked) is expected


def test_a_rolebinding_holds_in_its_own_namespace_only_and_never_at_the_cluster_scope() -> None:
    objs = _bound(_rule(["get"], [""], ["pods"]))
    assert _allows(objs, "get", "", "pods", "a")
    assert not _allows(objs, "get", "", "pods", "b")
    assert not _allows(objs, "get", "", "pods", "")  # a cluster-scoped request: RoleBindings do not count


def test_a_clusterrolebinding_holds_in_every_namespace_and_at_the_cluster_scope() -> None:
    objs = [_cluster_role("r", [_rule(["get"], [""], ["nodes", "pods"])]),
            _binding("ClusterRoleBinding", "b", "r", [_group("team-a")])]
    assert all(_allows(objs, "get", "", "pods", ns) for ns in ("a", "b"))
    assert _allows(objs, "get", "", "nodes", "")
    assert not _allows(objs, "get", "", "nodes", "", BOB)


def test_a_rolebinding_to_a_role_reads_the_role_of_its_own_namespace() -> None:
    """roleRef kind Role: the Role of the binding's namespace, not a ClusterRole nor a Role of that name elsewhere."""
    role = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "r", "namespace": "a"},
            "rules": [_rule(["get"], [""], ["pods"])]}
    elsewhere = {**role, "metadata": {"name": "r", "namespace": "b"}, "rules": [_rule(["get"], [""], ["secrets"])]}
    same_name = _cluster_role("r", [_rule(["get"], [""], ["configmaps"])])
    objs = [role, elsewhere, same_name, _binding("RoleBinding", "b", "r", [_group("team-a")], "a", role_kind="Role")]
    assert _allows(objs, "get", "", "pods")
    assert not _allows(objs, "get", "", "secrets")
    assert not _allows(objs, "get", "", "configmaps")
    # the same binding with roleRef ClusterRole: the ClusterRole's rules
    objs[-1] = _binding("RoleBinding", "b", "r", [_group("team-a")], "a")
    assert _allows(objs, "get", "", "configmaps") and not _allows(objs, "get", "", "pods")


@pytest.mark.parametrize(("subject", "who", "expected"), [
    ({"kind": "User", "name": "alice"}, ALICE, True),
    ({"kind": "User", "name": "alice"}, Identity("alice2", ("alice",)), False),  # a user is not a group
    (_group("team-a"), ALICE, True),
    (_group("team-a"), Identity("team-a", ()), False),  # a group is not a user name
    (_group("team-a"), BOB, False),
    ({"kind": "ServiceAccount", "name": "ci", "namespace": "a"}, Identity("system:serviceaccount:a:ci", ()), True),
    ({"kind": "ServiceAccount", "name": "ci", "namespace": "a"}, Identity("system:serviceaccount:b:ci", ()), False),
    ({"kind": "ServiceAccount", "name": "ci", "namespace": "a"}, Identity("ci", ()), False),
    # in a ClusterRoleBinding a ServiceAccount without a namespace is no one (appliesToUser: empty namespace)
    ({"kind": "ServiceAccount", "name": "ci"}, Identity("system:serviceaccount::ci", ()), False),
    ({"kind": "Robot", "name": "alice"}, ALICE, False),  # an unknown kind names nobody
    ({"name": "alice"}, ALICE, False),
])
def test_subjects_match_by_kind_user_group_or_service_account(subject: dict[str, Any], who: Identity,
                                                              expected: bool) -> None:
    objs = [_cluster_role("r", [_rule(["get"], [""], ["pods"])]), _binding("ClusterRoleBinding", "b", "r", [subject])]
    assert _allows(objs, "get", "", "pods", "a", who) is expected


def test_a_service_account_subject_without_a_namespace_is_the_rolebindings_own_namespaces() -> None:
    """appliesToUser defaults a ServiceAccount subject's namespace to the RoleBinding's: `ci` in a binding of
    namespace a is system:serviceaccount:a:ci, not the account of that name in another namespace."""
    objs = [_cluster_role("r", [_rule(["get"], [""], ["pods"])]),
            _binding("RoleBinding", "b", "r", [{"kind": "ServiceAccount", "name": "ci"}], "a")]
    assert _allows(objs, "get", "", "pods", "a", Identity("system:serviceaccount:a:ci", ()))
    assert not _allows(objs, "get", "", "pods", "a", Identity("system:serviceaccount:b:ci", ()))
    assert not _allows(objs, "get", "", "pods", "a", Identity("system:serviceaccount::ci", ()))


def test_a_binding_with_several_subjects_grants_each_and_no_subjects_grants_nobody() -> None:
    objs = [_cluster_role("r", [_rule(["get"], [""], ["pods"])]),
            _binding("ClusterRoleBinding", "b", "r", [_group("x"), _group("team-b")]),
            {**_binding("ClusterRoleBinding", "none", "r", []), "subjects": None}]
    assert _allows(objs, "get", "", "pods", who=BOB) and not _allows(objs, "get", "", "pods", who=ALICE)


def test_system_masters_passes_everything_and_other_groups_nothing_unbound() -> None:
    assert Authorizer([]).allows(Identity("deploy", ("x", MASTERS)), "delete", "", "nodes", "")
    assert not Authorizer([]).allows(Identity("deploy", ("system:master",)), "get", "", "pods", "a")


def test_only_rbac_objects_count_and_a_binding_to_a_missing_role_grants_nothing() -> None:
    """An object of another API group named like an RBAC kind is no role or binding; a role bound but absent (a
    built-in one) grants nothing here. A binding of a kind the API does not have is not a binding."""
    rule = _rule(["get"], [""], ["pods"])
    fake = {**_cluster_role("r", [rule]), "apiVersion": "example.com/v1"}
    assert not _allows([fake, _binding("ClusterRoleBinding", "b", "r", [_group("team-a")])], "get", "", "pods")
    fake_binding = {**_binding("ClusterRoleBinding", "b", "r", [_group("team-a")]), "apiVersion": "example.com/v1"}
    assert not _allows([_cluster_role("r", [rule]), fake_binding], "get", "", "pods")
    assert not _allows([_binding("ClusterRoleBinding", "b", "missing", [_group("team-a")])], "get", "", "pods")
    other_kind = {**_binding("ClusterRoleBinding", "b", "r", [_group("team-a")]), "kind": "RoleBindingList"}
    assert not _allows([_cluster_role("r", [rule]), other_kind], "get", "", "pods")
    no_rules = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "r", "namespace": "a"}, "rules": None}
    assert not _allows([no_rules, _binding("RoleBinding", "b", "r", [_group("team-a")], "a", "Role")],
                       "get", "", "pods")


def test_a_role_without_a_namespace_is_keyed_like_a_cluster_role() -> None:
    """A Role object missing its namespace (never served, but the model must not crash) is keyed by the empty
    namespace: a RoleBinding to a Role of its own namespace does not read it."""
    role = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "r"}, "rules": [_rule(["get"], [""], ["pods"])]}
    assert not _allows([role, _binding("RoleBinding", "b", "r", [_group("team-a")], "a", "Role")], "get", "", "pods")


# --- aggregation -------------------------------------------------------------------------------------------------

def test_an_aggregated_role_holds_the_rules_of_every_role_its_selectors_match_and_no_other() -> None:
    edit = _rule(["create"], ["kueue.x-k8s.io"], ["workloads"])
    view = _rule(["get"], ["kueue.x-k8s.io"], ["workloads"])
    roles = [
        _cluster_role("agg", [_rule(["*"], ["*"], ["*"])], {"batch-user": "true"},
                      [{"matchLabels": {"batch-user": "true"}}, {"matchLabels": {"extra": "yes"}}]),
        _cluster_role("b-view", [view], {"batch-user": "true"}),
        _cluster_role("a-edit", [edit], {"extra": "yes"}),
        _cluster_role("c-other", [_rule(["get"], [""], ["secrets"])], {"batch-user": "false"}),
        _cluster_role("d-nolabels", [_rule(["get"], [""], ["nodes"])]),
        {**_cluster_role("e-nolabels", [_rule(["get"], [""], ["pods"])]), "metadata": {"name": "e-nolabels"}},
        _cluster_role("f-norules", None, {"batch-user": "true"}),
    ]
    held = aggregated(roles)
    # its own rules are replaced (the controller writes the aggregate), itself not included; other roles' by name
    assert held["agg"] == [edit, view]
    assert held["b-view"] == [view] and held["f-norules"] == [] and held["d-nolabels"] == [roles[4]["rules"][0]]
    binding = _binding("ClusterRoleBinding", "b", "agg", [_group("team-a")])
    assert _allows([*roles, binding], "create", "kueue.x-k8s.io", "workloads")
    assert not _allows([*roles, binding], "get", "", "secrets")
    assert not _allows([*roles, binding], "delete", "kueue.x-k8s.io", "workloads")


def test_an_aggregation_rule_without_selectors_or_with_none_matching_holds_nothing() -> None:
    roles = [_cluster_role("empty", [_rule(["get"], [""], ["pods"])], selectors=[]),
             {**_cluster_role("null", [_rule(["get"], [""], ["pods"])]), "aggregationRule": None},
             _cluster_role("nomatch", [], selectors=[{"matchLabels": {"x": "y"}}]),
             _cluster_role("view", [_rule(["get"], [""], ["pods"])], {"x": "z"})]
    held = aggregated(roles)
    assert held["empty"] == [] and held["nomatch"] == []
    assert held["null"] == [_rule(["get"], [""], ["pods"])]  # no aggregationRule: its own rules


# --- the persona matrix: grants and allowed -------------------------------------------------------------------------

def _capture(objs: list[dict[str, Any]]) -> Capture:
    records = tuple(Registration(type=type_token(o["apiVersion"], o["kind"]), name=f"{o['kind']}-{i}", urn=f"u{i}",
                                 parent="", custom=True, remote=False, inputs=o, depends_on=(), protect=False,
                                 retain_on_delete=False, provider="") for i, o in enumerate(objs))
    return Capture(stack="t", project="trainyard", resources=records, outputs={})


def test_grants_expand_each_bound_rule_with_its_scope_and_list_roles_not_rendered() -> None:
    team_role = _cluster_role("team", [_rule(["get"], [""], ["namespaces"], resourceNames=["a"]),
                                       _rule(["list"], ["kueue.x-k8s.io"], ["clusterqueues"])])
    ns_role = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "local", "namespace": "a"},
               "rules": [_rule(["get", "watch"], ["", "batch"], ["jobs"])]}
    objs = [team_role, ns_role,
            _binding("ClusterRoleBinding", "own", "team", [_group("team-a")], persona="analyst"),
            _binding("RoleBinding", "ns", "team", [_group("team-a")], "a", persona="ml-engineer"),
            _binding("RoleBinding", "local", "local", [_group("team-a")], "a", role_kind="Role", persona="ci"),
            _binding("RoleBinding", "view", "view", [_group("team-a")], "a", persona="analyst"),
            _binding("ClusterRoleBinding", "admin", "cluster-admin", [_group("x")], persona="platform-admin"),
            _binding("ClusterRoleBinding", "unlabelled", "team", [_group("team-a")])]
    found, upstream = grants(_capture(objs))
    assert found == {
        Grant("analyst", "", "namespaces", "get", OWN),  # cluster binding, rule limited by name
        Grant("analyst", "kueue.x-k8s.io", "clusterqueues", "list", CLUSTER),
        Grant("ml-engineer", "", "namespaces", "get", NAMESPACED),  # a RoleBinding: namespaced, names or not
        Grant("ml-engineer", "kueue.x-k8s.io", "clusterqueues", "list", NAMESPACED),
        *(Grant("ci", group, "jobs", verb, NAMESPACED) for group in ("", "batch") for verb in ("get", "watch")),
    }
    assert upstream == {("analyst", "view", NAMESPACED), ("platform-admin", "cluster-admin", CLUSTER)}


def test_grants_read_rules_without_groups_resources_or_verbs_as_granting_nothing() -> None:
    objs = [_cluster_role("r", [{"verbs": ["get"]}, {"apiGroups": [""], "verbs": ["get"]},
                                {"apiGroups": [""], "resources": ["pods"]}]),
            _binding("ClusterRoleBinding", "b", "r", [_group("g")], persona="analyst")]
    assert grants(_capture(objs)) == (set(), set())


def test_a_bound_role_without_rules_grants_nothing() -> None:
    """`rules` is optional in a Role (an empty one is sent without it): bound, it grants nothing, and is no role
    missing from the render either."""
    empty = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "empty", "namespace": "a"}}
    binding = _binding("RoleBinding", "b", "empty", [_group("g")], "a", role_kind="Role", persona="analyst")
    assert grants(_capture([empty, binding])) == (set(), set())


def _grant(persona: str = "analyst", group: str = "", resource: str = "pods", verb: str = "get",
           scope: str = NAMESPACED) -> Grant:
    return Grant(persona, group, resource, verb, scope)


@pytest.mark.parametrize(("grant", "asked", "expected"), [
    (_grant(), ("analyst", "get", "", "pods", OWN_NS), True),
    (_grant(), ("analyst", "get", "", "pods", OTHER_NS), False),  # namespaced: the own team's namespaces only
    (_grant(), ("ci", "get", "", "pods", OWN_NS), False),  # persona
    (_grant(), ("analyst", "list", "", "pods", OWN_NS), False),  # verb
    (_grant(verb="*"), ("analyst", "list", "", "pods", OWN_NS), True),
    (_grant(), ("analyst", "get", "batch", "pods", OWN_NS), False),  # group
    (_grant(group="*"), ("analyst", "get", "batch", "pods", OWN_NS), True),
    (_grant(), ("analyst", "get", "", "pods/log", OWN_NS), False),  # resource
    (_grant(resource="*"), ("analyst", "get", "", "secrets", OWN_NS), True),
    (_grant(scope=CLUSTER), ("analyst", "get", "", "pods", OTHER_NS), True),  # cluster-wide: everywhere
    (_grant(scope=OWN), ("analyst", "get", "", "pods", OWN_NS), False),  # by name only: no general right
    (_grant(scope=OWN), ("analyst", "get", "", "pods", OTHER_NS), False),
])
def test_allowed_matches_persona_verb_group_resource_and_scope(grant: Grant, asked: tuple[str, ...],
                                                               expected: bool) -> None:
    assert allowed({grant}, *asked) is expected


def test_allowed_looks_past_a_non_matching_grant_to_a_matching_one() -> None:
    assert allowed({_grant(persona="ci"), _grant(scope=OWN), _grant()}, "analyst", "get", "", "pods", OWN_NS)


def test_decisions_answer_every_question_for_every_persona_from_the_bindings() -> None:
    objs = [_cluster_role("r", [_rule(["get", "list"], [""], ["secrets"])]),
            _binding("RoleBinding", "b", "r", [_group("g")], "a", persona="ml-engineer")]
    table = decisions(_capture(objs))
    assert table[("ml-engineer", "get", "", "secrets", OWN_NS)] is True
    assert table[("ml-engineer", "get", "", "secrets", OTHER_NS)] is False
    assert table[("ml-engineer", "create", "", "secrets", OWN_NS)] is False
    assert table[("analyst", "get", "", "secrets", OWN_NS)] is False
    assert sum(table.values()) == 2


def test_the_forbidden_message_is_the_api_servers() -> None:
    assert forbidden(ALICE, "create", "", "configmaps", "a", "c") == (
        'configmaps "c" is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the '
        'namespace "a"')
    assert forbidden(ALICE, "get", "kueue.x-k8s.io", "clusterqueues", "", "q") == (
        'clusterqueues.kueue.x-k8s.io "q" is forbidden: User "alice" cannot get resource "clusterqueues" in API '
        'group "kueue.x-k8s.io" at the cluster scope')


# --- the access matrix document on hand-built bindings --------------------------------------------------------------

def _matrix_objects() -> list[dict[str, Any]]:
    local = {"apiVersion": RBAC_V1, "kind": "Role", "metadata": {"name": "local", "namespace": "a"},
             "rules": [_rule(["list", "get"], ["batch"], ["jobs"])]}
    return [
        _cluster_role("wild", [_rule(["get"], ["*"], ["pods"])]),
        _binding("ClusterRoleBinding", "w", "wild", [_group("oidc:readers")], persona="analyst"),
        _binding("RoleBinding", "e", "edit", [{"kind": "ServiceAccount", "name": "trainyard-ci", "namespace": "a"}],
                 "a", persona="ci"),
        _binding("ClusterRoleBinding", "v", "view", [_group("admins")], persona="platform-admin"),
        local,
        _binding("RoleBinding", "l", "local", [_group("eng"), {"kind": "User", "name": "zed"}], "a", role_kind="Role",
                 persona="ml-engineer"),
        # subjects are optional in a binding: it holds no one
        {k: v for k, v in _binding("RoleBinding", "n", "local", [], "a", role_kind="Role",
                                   persona="ml-engineer").items() if k != "subjects"},
        _binding("ClusterRoleBinding", "cv", "view", [_group("ci-readers")], persona="ci"),
        _cluster_role("watch-jobs", [_rule(["watch"], ["batch"], ["jobs"])]),
        _binding("ClusterRoleBinding", "wj", "watch-jobs", [_group("eng")], persona="ml-engineer"),
    ]


def _section(text: str, title: str) -> list[str]:
    """The table rows (header and separator left out) of the section headed `title`."""
    lines = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    return [line for line in lines if line.startswith("| ")][1:]


def test_the_matrix_warns_of_wildcards_and_broad_built_in_roles_and_lists_roles_not_rendered() -> None:
    text = access_matrix(_capture(_matrix_objects()))
    assert text.startswith("# Access matrix: stack `t`\n") and text.endswith("nobody has web access.\n")
    assert "\nWARNING: broad grants: */pods get, edit.\n" in text and "No persona is granted" not in text
    lines = text.splitlines()
    header = lines.index("| API group | resource | platform-admin | ml-engineer | analyst | ci |")
    # one cell per persona: its verbs per scope, the scopes in order
    assert lines[header + 2:header + 4] == ["| `batch` | `jobs` | - | watch [cluster]; get, list [ns] | - | - |",
                                            "| `*` | `pods` | - | - | get [cluster] | - |"]
    # persona order, not the alphabet: platform-admin before ci; a persona's roles by name
    assert "| persona | ClusterRole | scope |" in text
    assert _section(text, "Roles bound to personas but not rendered") == [
        "| platform-admin | `view` | [cluster] |", "| ci | `edit` | [ns] |", "| ci | `view` | [cluster] |"]
    assert _section(text, "Who holds each persona") == [
        "| platform-admin | Group | `admins` |", "| ml-engineer | Group | `eng` |", "| ml-engineer | User | `zed` |",
        "| analyst | Group | `oidc:readers` |", "| ci | Group | `ci-readers` |",
        "| ci | ServiceAccount | `serviceaccount a/trainyard-ci` |"]
    decided = _section(text, "Allowed or denied, in the team's own namespace and in another team's")
    assert "| `core/pods` | get | deny / deny | deny / deny | allow / allow | deny / deny |" in decided
    assert "| `batch/jobs` | get | deny / deny | allow / deny | deny / deny | deny / deny |" in decided


def test_the_matrix_without_broad_grants_says_so_and_shows_only_bound_personas() -> None:
    objs = [o for o in _matrix_objects() if o["metadata"]["name"] not in ("w", "e", "v", "cv", "wj")]
    text = access_matrix(_capture(objs))
    assert "\nNo persona is granted `*` or a built-in admin role.\n" in text and "WARNING" not in text
    assert "| API group | resource | ml-engineer |" in text
    assert "## Roles bound to personas but not rendered\n\nBuilt into the cluster, not in the render; a persona " \
           "bound to one gets its rights in addition.\n\nNone.\n" in text
    scopes = "Scopes: `[ns]` in each namespace of the holder's team (RoleBinding); `[cluster]` cluster-wide " \
             "(ClusterRoleBinding); `[own]` cluster-scoped, only the team's own objects by name (resourceNames)."
    assert scopes in text


def test_a_persona_bound_only_to_a_role_not_rendered_has_a_column_and_a_persona_with_nothing_none() -> None:
    """ci holds one built-in role and nothing rendered: its column and that one row are shown; analyst holds nothing."""
    objs = [o for o in _matrix_objects() if o["metadata"]["name"] not in ("w", "v", "cv", "wj")]
    text = access_matrix(_capture(objs))
    assert "| API group | resource | ml-engineer | ci |" in text
    assert _section(text, "Roles bound to personas but not rendered") == ["| ci | `edit` | [ns] |"]
