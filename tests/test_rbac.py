"""Access: personas get exactly the rights the handover promises, bound to the declared groups only."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest

from infra.apiserver.rbac import access_matrix, aggregated
from infra.offline.engine import Capture
from tests.conftest import ROOT, STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw

READ = {"get", "list", "watch"}
BUILTIN_BROAD = {"cluster-admin", "admin", "edit"}
# Chart bindings to a broad built-in role, each reviewed: Velero's server backs up and restores every kind in
# the cluster (its chart's rbac.clusterAdministrator default); no tenant can act as its ServiceAccount.
REVIEWED_CHART_ADMINS = {("velero-server", "cluster-admin")}
PERSONA = "trainyard.io/persona"


def _bindings(capture: Capture) -> list[dict[str, Any]]:
    return kube_objects(capture, "RoleBinding") + kube_objects(capture, "ClusterRoleBinding")


def _roles(capture: Capture) -> dict[str, list[dict[str, Any]]]:
    """ClusterRole name -> rules as the API server holds them (aggregated roles filled in)."""
    return aggregated(kube_objects(capture, "ClusterRole"))


def _tenant_subjects_of(stack: str, team_name: str) -> set[tuple[str, str]]:
    """A team's identity-provider groups (with the stack's prefix) and its CI ServiceAccounts."""
    spec = platform_of(stack).spec
    team = spec.teams[team_name]
    subjects = {("Group", f"{spec.identity.group_prefix}{group}")
                for group in (*team.groups.engineers, *team.groups.analysts, *team.groups.ci)}
    return subjects | {("ServiceAccount", f"{ns}/trainyard-ci") for ns in spec.namespaces(team_name)}


def _tenant_subjects(stack: str) -> set[tuple[str, str]]:
    return {s for team in platform_of(stack).spec.teams for s in _tenant_subjects_of(stack, team)}


def _subject_key(subject: dict[str, Any]) -> tuple[str, str]:
    if subject["kind"] == "ServiceAccount":
        return ("ServiceAccount", f"{subject.get('namespace', '')}/{subject['name']}")
    return (subject["kind"], subject["name"])


@pytest.mark.parametrize("stack", STACKS)
def test_no_tenant_binding_grants_cluster_admin_or_wildcards(stack: str) -> None:
    capture = capture_of(stack)
    roles, tenants = _roles(capture), _tenant_subjects(stack)
    checked = 0
    for binding in _bindings(capture):
        ref, name = binding["roleRef"]["name"], binding["metadata"]["name"]
        if ref in BUILTIN_BROAD and binding.get("subjects"):
            assert (name, ref) in REVIEWED_CHART_ADMINS and binding["metadata"].get("labels", {}).get(
                "app.kubernetes.io/managed-by") == "Helm", name
        if not tenants & {_subject_key(s) for s in binding.get("subjects", [])}:
            continue
        checked += 1
        assert ref in roles, ref  # every role a tenant holds is in the render (the charts' included)
        for rule in roles[ref]:
            for field in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule.get(field, []), (ref, rule)
    assert checked or not tenants


@pytest.mark.parametrize("stack", STACKS)
def test_team_bindings_name_only_that_teams_groups(stack: str) -> None:
    """Analysts and engineers see their own team's namespaces, not another team's."""
    spec, capture = platform_of(stack).spec, capture_of(stack)
    tenants = _tenant_subjects(stack)
    for team_name in spec.teams:
        own = _tenant_subjects_of(stack, team_name)
        for binding in kube_objects(capture, "RoleBinding"):
            if binding["metadata"]["namespace"] not in spec.namespaces(team_name):
                continue
            for subject in map(_subject_key, binding["subjects"]):
                assert subject in own or subject not in tenants, (team_name, subject)


def _persona_rules(capture: Capture, persona: str, namespace: str | None) -> list[dict[str, Any]]:
    roles = _roles(capture)
    rules = []
    for binding in _bindings(capture):
        if binding["metadata"].get("labels", {}).get(PERSONA) != persona:
            continue
        if namespace and binding["metadata"].get("namespace", namespace) != namespace:
            continue
        rules += roles.get(binding["roleRef"]["name"], [])
    return rules


def _rights(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    rights: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                rights[(group, resource)] |= set(rule["verbs"])
    return rights


def test_analysts_only_read_their_jobs_logs_and_queues() -> None:
    rights = _rights(_persona_rules(capture_of("onprem-lab"), "analyst", "nlp"))
    assert all(verbs <= READ for verbs in rights.values()), rights
    for needed in [("trainer.kubeflow.org", "trainjobs"), ("", "pods/log"), ("kueue.x-k8s.io", "localqueues"),
                   ("kueue.x-k8s.io", "workloads"), ("jobset.x-k8s.io", "jobsets"), ("batch", "jobs")]:
        assert "get" in rights[needed], needed
    assert ("", "secrets") not in rights and ("", "configmaps") not in rights


def test_ci_only_submits_and_follows_trainjobs() -> None:
    rights = _rights(_persona_rules(capture_of("onprem-lab"), "ci", "vision"))
    serving = {("serving.kserve.io", "inferenceservices"), ("serving.kserve.io", "inferenceservices/status")}
    assert platform_of("onprem-lab").models is not None  # CI also serves: InferenceServices (tests/test_serving.py)
    assert set(rights) <= {("trainer.kubeflow.org", "trainjobs"), ("trainer.kubeflow.org", "trainjobs/status"),
                           *serving}
    assert "create" in rights[("trainer.kubeflow.org", "trainjobs")]
    assert not rights[("trainer.kubeflow.org", "trainjobs")] & {"delete", "update", "patch", "deletecollection"}


def test_ci_binds_the_namespace_service_account_and_the_declared_ci_groups() -> None:
    spec, capture = platform_of("onprem-lab").spec, capture_of("onprem-lab")
    assert spec.teams["vision"].groups.ci, "the lab declares a CI group for vision"
    for team_name, team in spec.teams.items():
        for ns in spec.namespaces(team_name):
            ci = [b for b in kube_objects(capture, "RoleBinding")
                  if b["metadata"]["namespace"] == ns and b["metadata"].get("labels", {}).get(PERSONA) == "ci"]
            subjects = {_subject_key(s) for b in ci for s in b["subjects"]}
            expected = {("ServiceAccount", f"{ns}/trainyard-ci")}
            expected |= {("Group", f"{spec.identity.group_prefix}{g}") for g in team.groups.ci}
            assert subjects == expected, ns


def test_engineers_submit_through_kueues_batch_user_role_and_debug_their_pods() -> None:
    spec, capture = platform_of("onprem-lab").spec, capture_of("onprem-lab")
    release = next(r.name for r in capture.resources if r.type.startswith("kubernetes:helm.sh/")
                   and "kueue" in str(r.inputs.get("chart")))
    # Kueue's chart names the role `<fullname>-batch-user-role`; fullname is the release when it contains "kueue".
    assert "kueue" in release
    for ns in spec.namespaces("speech"):
        refs = {b["roleRef"]["name"] for b in kube_objects(capture, "RoleBinding")
                if b["metadata"]["namespace"] == ns and b["metadata"].get("labels", {}).get(PERSONA) == "ml-engineer"}
        assert f"{release}-batch-user-role" in refs
    rights = _rights(_persona_rules(capture, "ml-engineer", "speech"))
    assert {"create"} <= rights[("", "pods/exec")] and "delete" in rights[("", "pods")]
    assert not any(group in ("kueue.x-k8s.io",) and verbs - READ for (group, _), verbs in rights.items())


def test_platform_admins_are_bound_cluster_wide_with_the_prefix_but_not_as_cluster_admin() -> None:
    spec, capture = platform_of("onprem-lab").spec, capture_of("onprem-lab")
    admin = [b for b in kube_objects(capture, "ClusterRoleBinding")
             if b["metadata"].get("labels", {}).get(PERSONA) == "platform-admin"]
    expected = {f"{spec.identity.group_prefix}{g}" for g in spec.identity.platform_admins}
    assert expected and all({s["name"] for s in b["subjects"]} == expected for b in admin)
    # Kueue's batch-admin role edits every queue and quota by hand: admins change those through pull requests.
    assert {b["roleRef"]["name"] for b in admin} == {"trainyard-platform-admin"}
    rights = _rights(_persona_rules(capture, "platform-admin", None))
    assert ("", "secrets") not in rights, "admins read workloads, not tenants' secrets"
    assert "create" in rights[("", "pods/eviction")] and "patch" in rights[("", "nodes")]


def test_without_platform_admins_no_cluster_wide_admin_binding() -> None:
    capture = capture_of("local")
    assert not platform_of("local").spec.identity.platform_admins
    assert not [b for b in kube_objects(capture, "ClusterRoleBinding")
                if b["metadata"].get("labels", {}).get(PERSONA) == "platform-admin"]


def test_the_group_prefix_is_configurable() -> None:
    raw = raw_platform("onprem-lab")
    raw["identity"]["groupPrefix"] = "corp-sso/"
    capture = run_raw("onprem-lab", raw)
    names = {s["name"] for b in _bindings(capture) for s in b["subjects"] if s["kind"] == "Group"}
    assert "corp-sso/vision-eng" in names and "corp-sso/platform-admins" in names
    assert not any(name.startswith("oidc:") for name in names)


def test_team_cluster_reads_are_limited_to_the_teams_own_queue_and_namespaces() -> None:
    spec, capture = platform_of("onprem-lab").spec, capture_of("onprem-lab")
    roles = _roles(capture)
    for team_name in spec.teams:
        refs = {b["roleRef"]["name"] for b in kube_objects(capture, "ClusterRoleBinding")
                if b["metadata"].get("labels", {}).get("trainyard.io/team") == team_name}
        for ref in refs:
            for rule in roles[ref]:
                if rule["resources"] == ["clusterqueues"]:
                    assert rule["resourceNames"] == [team_name]
                if rule["resources"] == ["namespaces"]:
                    assert rule["resourceNames"] == spec.namespaces(team_name)


_CELL = re.compile(r"([a-z, ]+) \[(ns|cluster|own)\]")


def _parse_matrix(text: str) -> dict[tuple[str, str, str], set[str]]:
    """persona, API group, resource -> verbs, read back from the first markdown table."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    personas = header[2:]
    found: dict[tuple[str, str, str], set[str]] = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(header) or not cells[0].startswith("`"):
            break
        group, resource = cells[0].strip("`"), cells[1].strip("`")
        for persona, cell in zip(personas, cells[2:], strict=True):
            verbs = {v.strip() for match in _CELL.finditer(cell) for v in match.group(1).split(",")}
            if verbs:
                found[(persona, "" if group == "core" else group, resource)] = verbs
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_access_matrix_matches_the_rendered_roles(stack: str) -> None:
    capture = capture_of(stack)
    expected: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    roles = _roles(capture)
    for binding in _bindings(capture):
        persona = binding["metadata"].get("labels", {}).get(PERSONA)
        for rule in roles.get(binding["roleRef"]["name"], []) if persona else []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    expected[(persona, group, resource)] |= set(rule["verbs"])
    text = access_matrix(capture)
    assert _parse_matrix(text) == dict(expected)
    upstream = {b["roleRef"]["name"] for b in _bindings(capture)
                if b["roleRef"]["name"] not in roles and PERSONA in b["metadata"]["labels"]}
    for role in upstream:
        assert f"`{role}`" in text


def test_docs_access_matrix_is_current() -> None:
    committed = (ROOT / "docs" / "access-matrix.md").read_text(encoding="utf-8")
    assert committed == access_matrix(capture_of("onprem-lab"), platform_of("onprem-lab").front_door), (
        "the rendered rights differ from docs/access-matrix.md: review the change first (who gains or loses which "
        "verb; tests/test_guards_access.py and INTENDED below say what must hold), and update the document only for "
        "a change you meant; do not regenerate it to make this test pass")


# The intended matrix: (persona, verb, group/resource) -> (own namespace, another team's namespace). Every
# persona x question the generator asks must be here, so a right that appears or vanishes fails the test.
_D, _OWN, _ALL = (False, False), (True, False), (True, True)
INTENDED: dict[tuple[str, str, str], tuple[bool, bool]] = {
    **{(p, v, "/secrets"): _D for p in ("platform-admin", "analyst", "ci") for v in ("get", "list", "create")},
    **{("ml-engineer", v, "/secrets"): _OWN for v in ("get", "list", "create")},
    **{(p, "create", r): _D for p in ("platform-admin", "ml-engineer", "analyst", "ci")
       for r in ("/serviceaccounts", "/serviceaccounts/token", "/pods", "trainer.kubeflow.org/trainingruntimes",
                 "rbac.authorization.k8s.io/rolebindings", "networking.k8s.io/networkpolicies")},
    **{(p, v, "rbac.authorization.k8s.io/roles"): _D for p in ("platform-admin", "ml-engineer", "analyst", "ci")
       for v in ("escalate", "bind")},
    **{(p, "impersonate", "/users"): _D for p in ("platform-admin", "ml-engineer", "analyst", "ci")},
    **{(p, "update", "kueue.x-k8s.io/localqueues"): _D for p in ("platform-admin", "ml-engineer", "analyst", "ci")},
    ("platform-admin", "get", "/configmaps"): _ALL, ("ml-engineer", "get", "/configmaps"): _OWN,
    ("analyst", "get", "/configmaps"): _D, ("ci", "get", "/configmaps"): _D,
    ("platform-admin", "update", "/configmaps"): _D, ("ml-engineer", "update", "/configmaps"): _OWN,
    ("analyst", "update", "/configmaps"): _D, ("ci", "update", "/configmaps"): _D,
    ("platform-admin", "get", "/pods"): _ALL, ("ml-engineer", "get", "/pods"): _OWN, ("analyst", "get", "/pods"): _OWN,
    ("ci", "get", "/pods"): _D,
    ("platform-admin", "delete", "/pods"): _ALL, ("ml-engineer", "delete", "/pods"): _OWN,
    ("analyst", "delete", "/pods"): _D, ("ci", "delete", "/pods"): _D,
    ("platform-admin", "create", "/pods/exec"): _D, ("ml-engineer", "create", "/pods/exec"): _OWN,
    ("analyst", "create", "/pods/exec"): _D, ("ci", "create", "/pods/exec"): _D,
    ("platform-admin", "create", "/persistentvolumeclaims"): _D,
    ("ml-engineer", "create", "/persistentvolumeclaims"): _OWN,
    ("analyst", "create", "/persistentvolumeclaims"): _D, ("ci", "create", "/persistentvolumeclaims"): _D,
    ("platform-admin", "get", "batch/jobs"): _ALL, ("ml-engineer", "get", "batch/jobs"): _OWN,
    ("analyst", "get", "batch/jobs"): _OWN, ("ci", "get", "batch/jobs"): _D,
    ("ml-engineer", "create", "batch/cronjobs"): _OWN,
    **{(p, "create", "batch/cronjobs"): _D for p in ("platform-admin", "analyst", "ci")},
    ("platform-admin", "get", "trainer.kubeflow.org/trainjobs"): _ALL,
    **{(p, "get", "trainer.kubeflow.org/trainjobs"): _OWN for p in ("ml-engineer", "analyst", "ci")},
    ("platform-admin", "create", "trainer.kubeflow.org/trainjobs"): _D,
    ("ml-engineer", "create", "trainer.kubeflow.org/trainjobs"): _OWN,
    ("analyst", "create", "trainer.kubeflow.org/trainjobs"): _D,
    ("ci", "create", "trainer.kubeflow.org/trainjobs"): _OWN,
    ("platform-admin", "delete", "trainer.kubeflow.org/trainjobs"): _ALL,
    ("ml-engineer", "delete", "trainer.kubeflow.org/trainjobs"): _OWN,
    ("analyst", "delete", "trainer.kubeflow.org/trainjobs"): _D, ("ci", "delete", "trainer.kubeflow.org/trainjobs"): _D,
    ("platform-admin", "get", "trainer.kubeflow.org/trainingruntimes"): _ALL,
    ("ml-engineer", "get", "trainer.kubeflow.org/trainingruntimes"): _OWN,
    ("analyst", "get", "trainer.kubeflow.org/trainingruntimes"): _D,
    ("ci", "get", "trainer.kubeflow.org/trainingruntimes"): _D,
    ("platform-admin", "get", "kueue.x-k8s.io/localqueues"): _ALL,
    ("ml-engineer", "get", "kueue.x-k8s.io/localqueues"): _OWN, ("analyst", "get", "kueue.x-k8s.io/localqueues"): _OWN,
    ("ci", "get", "kueue.x-k8s.io/localqueues"): _D,
    ("platform-admin", "get", "rbac.authorization.k8s.io/rolebindings"): _ALL,
    **{(p, "get", "rbac.authorization.k8s.io/rolebindings"): _D for p in ("ml-engineer", "analyst", "ci")},
}


@pytest.mark.parametrize("stack", STACKS)
def test_the_access_matrix_is_the_intended_one(stack: str) -> None:
    from infra.apiserver.rbac import OTHER_NS, OWN_NS, decisions

    computed: dict[tuple[str, str, str], tuple[bool, bool]] = {}
    table = decisions(capture_of(stack))
    for (persona, verb, group, resource, _), _allowed in table.items():
        key = (persona, verb, f"{group}/{resource}")
        computed[key] = (table[(persona, verb, group, resource, OWN_NS)],
                         table[(persona, verb, group, resource, OTHER_NS)])
    # A stack without a persona's subjects binds nothing to it: those rows are all deny.
    for key, want in INTENDED.items():
        assert computed[key] in (want, _D), (stack, key, computed[key])
    assert set(computed) == set(INTENDED)
    if stack == "onprem-lab":  # every persona is bound there: the matrix must be exactly the intended one
        assert computed == INTENDED


def test_the_api_servers_authorizer_gives_the_access_matrix_answers() -> None:
    """`admit`'s RBAC (subjects matched by user and group, as the API server does) and the matrix (bindings by their
    persona label) are one model: for every question, each persona's identity gets the matrix's answer."""
    from infra.apiserver.identity import resolve
    from infra.apiserver.rbac import OTHER_NS, OWN_NS, QUESTIONS, Authorizer, decisions
    from infra.offline.plan import objects

    capture = capture_of("onprem-lab")
    authorizer = Authorizer([obj for _, obj in objects(capture)])
    table = decisions(capture)
    platform = platform_of("onprem-lab")
    for persona in ("platform-admin", "ml-engineer", "analyst", "ci"):
        who = resolve(platform, persona if persona == "platform-admin" else f"{persona}:vision", [])[1]
        for group, resource, verbs in QUESTIONS:
            for verb in verbs:
                for where, namespace in ((OWN_NS, "vision"), (OTHER_NS, "nlp")):
                    assert authorizer.allows(who, verb, group, resource, namespace) == \
                        table[(persona, verb, group, resource, where)], (persona, verb, resource, where)
