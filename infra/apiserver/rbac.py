"""The access matrix (persona x resource x verb), read from the roles and bindings a stack renders.

Bindings name their persona in the `trainyard.io/persona` label; every rule of every role they reference is
expanded here, so the matrix can never claim a right the rendered objects do not grant. The charts' roles are
in the render too; an aggregated ClusterRole (Kueue's batch-user role) holds the rules of every ClusterRole its
selectors match, as the API server's aggregation controller fills it in. A role bound but not rendered (a
built-in one) is listed by name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.apiserver.selectors import matches_selector
from infra.apiserver.web_rights import web_rights_section
from infra.kit import paths
from infra.kit.tables import markdown_table
from infra.offline.engine import Capture
from infra.offline.plan import objects
from infra.spec.frontdoor.web_access import FrontDoorFacts

PERSONA_LABEL = "trainyard.io/persona"
PERSONAS = ("platform-admin", "ml-engineer", "analyst", "ci")
NAMESPACED, CLUSTER, OWN = "ns", "cluster", "own"
SCOPES = {
    NAMESPACED: "in each namespace of the holder's team (RoleBinding)",
    CLUSTER: "cluster-wide (ClusterRoleBinding)",
    OWN: "cluster-scoped, only the team's own objects by name (resourceNames)",
}
BROAD_ROLES = frozenset({"cluster-admin", "admin", "edit"})
GROUP_ORDER = ("", "batch", "trainer.kubeflow.org", "kueue.x-k8s.io", "visibility.kueue.x-k8s.io",
               "jobset.x-k8s.io")
MASTERS = "system:masters"  # the group the API server lets past every authorizer (the platform's deploy identity)


@dataclass(frozen=True)
class Grant:
    persona: str
    group: str
    resource: str
    verb: str
    scope: str


def aggregated(cluster_roles: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """ClusterRole name -> its rules as the API server holds them: an aggregated role (aggregationRule) holds
    the rules of every other ClusterRole whose labels one of its selectors matches, in name order."""
    by_name = {role["metadata"]["name"]: role for role in cluster_roles}
    rules: dict[str, list[dict[str, Any]]] = {}
    for name, role in sorted(by_name.items()):
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
        if selectors is None:
            rules[name] = list(role.get("rules") or [])
            continue
        rules[name] = [rule for other_name, other in sorted(by_name.items()) if other_name != name
                       and any(matches_selector(s, other["metadata"].get("labels") or {}) for s in selectors)
                       for rule in other.get("rules") or []]
    return rules


def _rules(capture: Capture) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    roles: dict[str, list[dict[str, Any]]] = {}
    cluster_roles, bindings = [], []
    for _, obj in objects(capture):
        kind, meta = obj.get("kind"), obj.get("metadata", {})
        if kind == "ClusterRole":
            cluster_roles.append(obj)
        elif kind == "Role":
            roles[f"{meta.get('namespace', '')}/{meta['name']}"] = obj.get("rules", [])
        elif kind in ("ClusterRoleBinding", "RoleBinding") and PERSONA_LABEL in meta.get("labels", {}):
            bindings.append(obj)
    roles |= {f"/{name}": rules for name, rules in aggregated(cluster_roles).items()}
    return roles, bindings


def _role_key(binding: dict[str, Any]) -> str:
    ref = binding["roleRef"]
    namespace = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
    return f"{namespace}/{ref['name']}"


def grants(capture: Capture) -> tuple[set[Grant], set[tuple[str, str, str]]]:
    """Every (persona, group, resource, verb, scope) the rendered bindings grant, and the bindings to roles
    the render does not contain (persona, role, scope)."""
    roles, bindings = _rules(capture)
    found: set[Grant] = set()
    upstream: set[tuple[str, str, str]] = set()
    for binding in bindings:
        persona = binding["metadata"]["labels"][PERSONA_LABEL]
        scope = NAMESPACED if binding["kind"] == "RoleBinding" else CLUSTER
        key = _role_key(binding)
        if key not in roles:
            upstream.add((persona, binding["roleRef"]["name"], scope))
            continue
        for rule in roles[key]:
            rule_scope = OWN if scope == CLUSTER and rule.get("resourceNames") else scope
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        found.add(Grant(persona, group, resource, verb, rule_scope))
    return found, upstream


@dataclass(frozen=True)
class Identity:
    """Who asks: the user name and groups the API server authenticates a request to."""

    user: str
    groups: tuple[str, ...]


def _subject_matches(subject: dict[str, Any], identity: Identity, namespace: str) -> bool:
    """k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac appliesToUser: a User by name, a Group by membership, a
    ServiceAccount by its `system:serviceaccount:<namespace>:<name>` user name, its namespace defaulting to the
    binding's (`namespace`: a RoleBinding's, empty for a ClusterRoleBinding, where a subject without one is no one)."""
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return bool(name == identity.user)
    if kind == "Group":
        return name in identity.groups
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        return bool(account_namespace) and identity.user == f"system:serviceaccount:{account_namespace}:{name}"
    return False


def _rule_allows(rule: dict[str, Any], verb: str, group: str, resource: str) -> bool:
    """rbac/v1 helpers VerbMatches, APIGroupMatches, ResourceMatches; a rule limited to resourceNames never
    allows a create (the request has no name yet), as ResourceNameMatches answers for an empty name."""
    def has(values: Any, value: str) -> bool:
        return "*" in (values or []) or value in (values or [])
    return (has(rule.get("verbs"), verb) and has(rule.get("apiGroups"), group) and has(rule.get("resources"), resource)
            and not (rule.get("resourceNames") and verb == "create"))


class Authorizer:
    """The RBAC authorizer of one cluster: the Roles, ClusterRoles (aggregated as the controller fills them) and
    bindings it holds, whatever their labels. Roles bound but not in it (built-in ones) grant nothing here."""

    def __init__(self, cluster_objects: Iterable[dict[str, Any]]) -> None:
        cluster_roles: list[dict[str, Any]] = []
        self._roles: dict[str, list[dict[str, Any]]] = {}
        self._bindings: dict[str, list[dict[str, Any]]] = {}  # namespace -> its RoleBindings
        self._cluster_bindings: list[dict[str, Any]] = []  # apply in every namespace and to cluster-scoped objects
        for obj in cluster_objects:
            kind, meta = obj.get("kind"), obj.get("metadata", {})
            if not str(obj.get("apiVersion", "")).startswith("rbac.authorization.k8s.io/"):
                continue
            if kind == "ClusterRole":
                cluster_roles.append(obj)
            elif kind == "Role":
                self._roles[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = list(obj.get("rules") or [])
            elif kind == "RoleBinding":
                self._bindings.setdefault(meta.get("namespace", ""), []).append(obj)
            elif kind == "ClusterRoleBinding":
                self._cluster_bindings.append(obj)
        self._roles |= {f"/{name}": rules for name, rules in aggregated(cluster_roles).items()}
        self._granted: dict[tuple[Identity, str], list[dict[str, Any]]] = {}

    def allows(self, identity: Identity, verb: str, group: str, resource: str, namespace: str) -> bool:
        """Whether any binding that names the identity grants `verb` on `group/resource` in `namespace` ("" for a
        cluster-scoped object): ClusterRoleBindings everywhere, RoleBindings in their own namespace."""
        if MASTERS in identity.groups:
            return True
        return any(_rule_allows(rule, verb, group, resource) for rule in self._rules_of(identity, namespace))

    def _rules_of(self, identity: Identity, namespace: str) -> list[dict[str, Any]]:
        """The rules of every binding that names the identity and applies in `namespace`, found once per pair (a
        matrix of questions asks the same pair for every verb and resource)."""
        key = (identity, namespace)
        if key not in self._granted:
            applying = [*self._cluster_bindings, *(self._bindings.get(namespace, []) if namespace else [])]
            # a ClusterRoleBinding has no namespace (the API server drops one): its subjects get no default
            self._granted[key] = [rule for binding in applying
                                  if any(_subject_matches(s, identity, binding.get("metadata", {}).get("namespace", ""))
                                         for s in binding.get("subjects") or [])
                                  for rule in self._roles.get(_role_key(binding), [])]
        return self._granted[key]


def forbidden(identity: Identity, verb: str, group: str, resource: str, namespace: str, name: str) -> str:
    """The API server's Forbidden message (k8s.io/apiserver endpoints/handlers/responsewriters forbiddenMessage)."""
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    qualified = f"{resource}.{group}" if group else resource
    return (f'{qualified} "{name}" is forbidden: User "{identity.user}" cannot {verb} resource "{resource}" in API '
            f'group "{group}"{where}')


OWN_NS, OTHER_NS = "own namespace", "another team's namespace"
WRITES = ("create", "update", "patch", "delete")
# The questions the access matrix answers for every persona (group, resource, verbs), in both places.
QUESTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("", "secrets", ("get", "list", "create")),
    ("", "serviceaccounts", ("create",)),
    ("", "serviceaccounts/token", ("create",)),
    ("", "configmaps", ("get", "update")),
    ("", "pods", ("get", "create", "delete")),
    ("", "pods/exec", ("create",)),
    ("", "persistentvolumeclaims", ("create",)),
    ("batch", "jobs", ("get",)),
    ("batch", "cronjobs", ("create",)),
    ("trainer.kubeflow.org", "trainjobs", ("get", "create", "delete")),
    ("trainer.kubeflow.org", "trainingruntimes", ("get", "create")),
    ("kueue.x-k8s.io", "localqueues", ("get", "update")),
    ("rbac.authorization.k8s.io", "rolebindings", ("get", "create")),
    ("rbac.authorization.k8s.io", "roles", ("escalate", "bind")),
    ("networking.k8s.io", "networkpolicies", ("create",)),
    ("", "users", ("impersonate",)),
)


def allowed(found: Iterable[Grant], persona: str, verb: str, group: str, resource: str, where: str) -> bool:
    """Whether the rendered bindings let `persona` do `verb` on `resource` in its own team namespace or in
    another's (namespaced rights: RoleBindings hold in the team's namespaces only; ClusterRoleBindings
    everywhere, except rules limited to named objects). Roles bound but not rendered are not counted."""
    for grant in found:
        if grant.persona != persona or grant.verb not in (verb, "*") or grant.group not in (group, "*") \
                or grant.resource not in (resource, "*"):
            continue
        if grant.scope == CLUSTER or (grant.scope == NAMESPACED and where == OWN_NS):
            return True
    return False


def decisions(capture: Capture) -> dict[tuple[str, str, str, str, str], bool]:
    """(persona, verb, group, resource, where) -> allowed, for every question and persona."""
    found, _ = grants(capture)
    return {(persona, verb, group, resource, where): allowed(found, persona, verb, group, resource, where)
            for persona in PERSONAS for group, resource, verbs in QUESTIONS for verb in verbs
            for where in (OWN_NS, OTHER_NS)}


def _decision_rows(capture: Capture) -> list[list[str]]:
    table = decisions(capture)
    rows = [["resource", "verb", *(f"{p}: own / other" for p in PERSONAS)]]
    for group, resource, verbs in QUESTIONS:
        for verb in verbs:
            cells = [" / ".join("allow" if table[(p, verb, group, resource, w)] else "deny" for w in (OWN_NS, OTHER_NS))
                     for p in PERSONAS]
            rows.append([f"`{group or 'core'}/{resource}`", verb, *cells])
    return rows


def _group_rank(group: str) -> tuple[int, str]:
    return (GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER), group)


def _cell(items: Iterable[Grant]) -> str:
    by_scope: dict[str, set[str]] = defaultdict(set)
    for grant in items:
        by_scope[grant.scope].add(grant.verb)
    return "; ".join(f"{', '.join(sorted(verbs))} [{scope}]" for scope, verbs in sorted(by_scope.items()))


def _subjects(capture: Capture) -> list[list[str]]:
    held: dict[tuple[str, str], set[str]] = defaultdict(set)
    for binding in _rules(capture)[1]:
        persona = binding["metadata"]["labels"][PERSONA_LABEL]
        for subject in binding.get("subjects", []):
            name = subject["name"]
            if subject["kind"] == "ServiceAccount":
                name = f"serviceaccount {subject['namespace']}/{name}"
            held[(persona, subject["kind"])].add(name)
    return [[persona, kind, ", ".join(f"`{n}`" for n in sorted(names))]
            for (persona, kind), names in sorted(held.items(), key=lambda i: (PERSONAS.index(i[0][0]), i[0][1]))]


def access_matrix(capture: Capture, door: FrontDoorFacts | None = None) -> str:
    """Markdown: one row per API group and resource, one column per persona, verbs with their scope; then the
    web rights of `door` (the stack's `Platform.front_door`)."""
    found, upstream = grants(capture)
    personas = [p for p in PERSONAS if any(g.persona == p for g in found) or any(u[0] == p for u in upstream)]
    by_row: dict[tuple[str, str], list[Grant]] = defaultdict(list)
    for grant in found:
        by_row[(grant.group, grant.resource)].append(grant)
    rows = [["API group", "resource", *personas]]
    for group, resource in sorted(by_row, key=lambda k: (_group_rank(k[0]), k[1])):
        cells = [_cell(g for g in by_row[(group, resource)] if g.persona == p) or "-" for p in personas]
        rows.append([f"`{group or 'core'}`", f"`{resource}`", *cells])
    broad = sorted({f"{g.group}/{g.resource} {g.verb}" for g in found if "*" in (g.group, g.resource, g.verb)}
                   | {role for _, role, _ in upstream if role in BROAD_ROLES})
    lines = [
        f"# Access matrix: stack `{capture.stack}`", "",
        "Generated from the rendered roles and bindings by `infra.apiserver.rbac.access_matrix` "
        "(`python -m infra.apiserver.rbac STACK`); do not edit.",
        "A binding's persona is its `trainyard.io/persona` label; the charts' roles count with what they "
        "aggregate. Rights from roles bound but not rendered (below) come on top.",
        ("No persona is granted `*` or a built-in admin role." if not broad
         else "WARNING: broad grants: " + ", ".join(broad) + "."), "",
        "Scopes: " + "; ".join(f"`[{key}]` {text}" for key, text in SCOPES.items()) + ".", "",
        *markdown_table(rows),
        "## Roles bound to personas but not rendered", "",
        "Built into the cluster, not in the render; a persona bound to one gets its rights in addition.",
        "",
    ]
    upstream_rows = [["persona", "ClusterRole", "scope"]]
    for persona, role, scope in sorted(upstream, key=lambda u: (PERSONAS.index(u[0]), u[1])):
        upstream_rows.append([persona, f"`{role}`", f"[{scope}]"])
    lines += markdown_table(upstream_rows) if len(upstream_rows) > 1 else ["None.", ""]
    lines += ["## Who holds each persona", "", *markdown_table([["persona", "subject kind", "subjects"],
                                                       *_subjects(capture)])]
    lines += ["## Allowed or denied, in the team's own namespace and in another team's", "",
              "Computed from the rendered bindings (`infra.apiserver.rbac.decisions`), aggregated roles counted "
              "with the rules they aggregate; tests/test_rbac.py holds it to the intended matrix.", "",
              *markdown_table(_decision_rows(capture))]
    lines += web_rights_section(door)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys

    from infra.offline.engine import run
    from infra.spec import load_file
    from infra.spec.input.load import read_stack_config, stack_name, stack_path

    root = paths.ROOT
    stack = sys.argv[1] if len(sys.argv) > 1 else "onprem-lab"
    path = stack_path(stack, root)
    text = access_matrix(run(stack_name(path), read_stack_config(path)), load_file(path).front_door)
    (root / "docs" / "access-matrix.md").write_text(text, encoding="utf-8")
