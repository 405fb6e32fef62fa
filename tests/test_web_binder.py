"""Web access from directory groups (infra/platform/web/binder.py), on the rendered objects: the web roles are
upstream's Pipelines rules and nothing else; the binder's rights are a Role per team namespace and an admission
policy; only the gateway reaches it; what it writes for a person's groups lets that person into their team's
namespaces and not another's, at the edge of each right; expiry and group changes take the rights away."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from celpy import celtypes

from infra.apiserver.cel import compiled, is_true, to_cel
from infra.apiserver.podsecurity import restricted
from infra.apiserver.rbac import Authorizer, Identity
from infra.apiserver.state import ClusterState
from infra.apiserver.vap import Request, evaluate
from infra.components import GATEWAY_POD_LABELS, ISTIO, KUBEFLOW_ARCHIVE
from infra.platform.rbac import ROLE_OF
from infra.platform.tenancy import PROFILE_LABELS, PROFILE_OWNER
from infra.platform.web import binder as web_binder
from infra.platform.web import server
from infra.spec.frontdoor.web_access import WEB_CI_ROLE, WEB_ROLES
from infra.spec.pins import unpinned_image
from infra.vocabulary import TEAM_LABEL
from tests.conftest import STACKS, capture_of, kube_objects, platform_of
from tests.test_frontdoor import _namespace, ingress_allowed

Obj = dict[str, Any]
PIPELINES = "pipelines.kubeflow.org"
BINDER = Identity(web_binder.ACCOUNT, ("system:serviceaccounts", f"system:serviceaccounts:{ISTIO.namespace}"))
NOW = 1_800_000_000
HOUR = 3600


def _named(objects: list[Obj], kind: str, name: str, namespace: str = "") -> Obj:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name
                and o["metadata"].get("namespace", "") == namespace)


def _config(stack: str) -> dict[str, Any]:
    objects = kube_objects(capture_of(stack))
    return dict(json.loads(_named(objects, "ConfigMap", web_binder.NAME, ISTIO.namespace)["data"]["grants.json"]))


# --- the web roles: upstream's Pipelines rules, nothing a person could use with kubectl -----------------------

def _upstream_rules() -> dict[str, set[tuple[str, str, str]]]:
    archive = Path(__file__).resolve().parents[1].parent / "shared" / "kustomize" / KUBEFLOW_ARCHIVE[0]
    member = ("kubeflow-manifests-26.03/applications/pipeline/upstream/base/installs/multi-user/"
              "view-edit-cluster-roles.yaml")
    with tarfile.open(archive) as tar:
        handle = tar.extractfile(member)
        assert handle is not None
        documents = [d for d in yaml.safe_load_all(handle.read()) if d]
    return {d["metadata"]["name"]: _triples(d.get("rules") or []) for d in documents}


def _triples(rules: list[Obj]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_the_web_roles_are_upstream_pipelines_rules_without_workload_objects() -> None:
    upstream = _upstream_rules()
    view = upstream["aggregate-to-kubeflow-pipelines-view"]
    edit = view | upstream["aggregate-to-kubeflow-pipelines-edit"]  # view aggregates into edit upstream
    ours = {role: _triples(rules) for role, rules in web_binder.ROLE_RULES.items()}
    assert ours[WEB_ROLES["read"]] <= view
    assert ours[WEB_ROLES["edit"]] <= edit and ours[WEB_CI_ROLE] <= edit
    for triples in ours.values():
        assert {group for group, _, _ in triples} == {PIPELINES}  # no Argo Workflow, no ScheduledWorkflow
    # What upstream gives and we leave out is exactly the workload objects (and TensorBoard viewers).
    assert {g for g, _, _ in edit - ours[WEB_ROLES["edit"]]} == {"kubeflow.org", "argoproj.io"}
    # Analysts read and never run; CI starts runs and never deletes or stops them.
    assert (PIPELINES, "runs", "create") not in ours[WEB_ROLES["read"]]
    assert (PIPELINES, "runs", "create") in ours[WEB_CI_ROLE]
    assert not {v for _, _, v in ours[WEB_CI_ROLE]} & {"delete", "terminate", "archive"}


# --- the binder's rights, on the rendered RBAC and admission policy ----------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_the_binder_manages_rolebindings_only_in_team_namespaces(stack: str) -> None:
    objects = kube_objects(capture_of(stack))
    rbac = Authorizer(objects)
    teams = platform_of(stack).front_door.team_namespaces  # type: ignore[union-attr]
    assert teams
    for ns in teams:
        for verb in ("create", "delete", "patch", "list"):
            assert rbac.allows(BINDER, verb, "rbac.authorization.k8s.io", "rolebindings", ns), (ns, verb)
        assert not rbac.allows(BINDER, "escalate", "rbac.authorization.k8s.io", "clusterroles", ns)
        role = _named(objects, "Role", web_binder.NAME, ns)
        bind = [r for r in role["rules"] if "bind" in r["verbs"]]
        assert bind == [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                         "verbs": ["bind"], "resourceNames": sorted({WEB_ROLES["read"], WEB_ROLES["edit"]})}]
    for ns in ("kube-system", ISTIO.namespace, "monitoring", "kueue-system", ""):
        assert not rbac.allows(BINDER, "create", "rbac.authorization.k8s.io", "rolebindings", ns), ns
    assert not rbac.allows(BINDER, "create", "rbac.authorization.k8s.io", "clusterrolebindings", "")
    assert not [b for b in objects if b["kind"] == "ClusterRoleBinding"
                and any(s.get("name") == web_binder.NAME for s in b.get("subjects") or [])]
    # A team pod's account has no such right.
    pod = Identity(f"system:serviceaccount:{teams[0]}:default", ("system:serviceaccounts",))
    assert not rbac.allows(pod, "create", "rbac.authorization.k8s.io", "rolebindings", teams[0])


def _web_binding(ns: str, user: str = "ada@example.com", right: str = "edit") -> Obj:
    config = _config("onprem-lab")
    return server.binding(config, ns, user, right, NOW + HOUR)


def _admits(stack: str, obj: Obj, operation: str = "CREATE", user: str = web_binder.ACCOUNT) -> bool:
    outcome = evaluate(Request(obj, operation, user), ClusterState(kube_objects(capture_of(stack))))
    return not outcome.refusals and not outcome.unchecked


def test_the_admission_policy_admits_the_binder_s_own_bindings_only() -> None:
    assert _admits("onprem-lab", _web_binding("vision"))
    assert _admits("onprem-lab", _web_binding("vision"), "UPDATE")
    persona = _web_binding("vision")
    persona["roleRef"]["name"] = ROLE_OF["ml-engineer"]
    assert not _admits("onprem-lab", persona)
    assert not _admits("onprem-lab", persona, "UPDATE")  # a persona binding cannot be rewritten by the binder
    admin = _web_binding("vision")
    admin["roleRef"]["name"] = "cluster-admin"
    assert not _admits("onprem-lab", admin)
    unlabelled = _web_binding("vision")
    del unlabelled["metadata"]["labels"][server.MANAGED_LABEL]
    assert not _admits("onprem-lab", unlabelled)
    group = _web_binding("vision")
    group["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "vision-eng"}]
    assert not _admits("onprem-lab", group)
    two = _web_binding("vision")
    two["subjects"].append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "eve@example.com"})
    assert not _admits("onprem-lab", two)
    # The policy judges the binder only: a platform admin's own RoleBinding is not its concern.
    assert _admits("onprem-lab", persona, user="admin@example.com")


def _policy_allows_delete(old: Obj) -> bool:
    """The policy's validations for a DELETE (the offline evaluator gives no oldObject): binding = oldObject."""
    policy = _named(kube_objects(capture_of("onprem-lab")), "ValidatingAdmissionPolicy", web_binder.NAME)
    activation = {"object": None, "oldObject": to_cel(old), "request": to_cel({"operation": "DELETE"})}
    binding = compiled(policy["spec"]["variables"][0]["expression"]).run(activation)
    activation["variables"] = celtypes.MapType({celtypes.StringType("binding"): binding})
    return all(is_true(compiled(v["expression"]).run(activation)) for v in policy["spec"]["validations"])


def test_the_binder_may_delete_its_own_bindings_and_no_persona_binding() -> None:
    assert _policy_allows_delete(_web_binding("vision"))
    persona = next(b for b in kube_objects(capture_of("onprem-lab"), "RoleBinding")
                   if b["metadata"].get("namespace") == "vision" and b["roleRef"]["name"] == ROLE_OF["ml-engineer"])
    assert not _policy_allows_delete(persona)


# --- only the gateway reaches the binder --------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_a_forged_call_from_a_team_pod_is_refused(stack: str) -> None:
    capture = capture_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    binder = (ISTIO.namespace, web_binder.POD_LABELS, web_binder.POD_PORT)
    for ns in platform_of(stack).front_door.team_namespaces:  # type: ignore[union-attr]
        team = _namespace(capture, ns)
        assert not ingress_allowed(policies, *binder, team, {"app": "trainer"}), ns
        assert not ingress_allowed(policies, *binder, team, dict(GATEWAY_POD_LABELS)), ns
    assert ingress_allowed(policies, *binder, _namespace(capture, ISTIO.namespace), dict(GATEWAY_POD_LABELS))
    # Every policy of the gateway's namespace removed, a team pod would reach it: the refusal is theirs.
    others = [p for p in policies if p["metadata"].get("namespace") != ISTIO.namespace]
    first = platform_of(stack).front_door.team_namespaces[0]  # type: ignore[union-attr]
    assert ingress_allowed(others, *binder, _namespace(capture, first), {"app": "trainer"})


@pytest.mark.parametrize("stack", STACKS)
def test_every_ui_request_is_mirrored_to_the_binder(stack: str) -> None:
    objects = kube_objects(capture_of(stack))
    service = _named(objects, "Service", web_binder.NAME, ISTIO.namespace)
    assert service["spec"]["selector"] == web_binder.POD_LABELS
    routes = [r for vs in objects if vs["kind"] == "VirtualService" and vs["metadata"]["name"] == "uis"
              for r in vs["spec"]["http"]]
    assert routes and all(r["mirror"]["host"] == web_binder.SERVICE_HOST for r in routes)
    access = _named(objects, "VirtualService", "web-access", ISTIO.namespace)["spec"]["http"][0]
    assert access["route"][0]["destination"]["host"] == web_binder.SERVICE_HOST


# --- what the binder writes lets a person into their team's namespaces only -------------------------------------

def _bound(stack: str, user: str, groups: list[str], token_exp: int | None = NOW + HOUR,
           existing: list[Obj] | None = None) -> tuple[list[Obj], list[Obj]]:
    return server.decide(_config(stack), user, groups, token_exp, NOW, existing or [])


def _can(stack: str, bindings: list[Obj], user: str, verb: str, resource: str, ns: str) -> bool:
    """Pipelines' SubjectAccessReview: the user alone, no groups (KFP resource_manager.go IsAuthorized)."""
    rbac = Authorizer([*kube_objects(capture_of(stack)), *bindings])
    return rbac.allows(Identity(user, ()), verb, PIPELINES, resource, ns)


def test_a_team_b_person_is_refused_team_a_s_namespace() -> None:
    stack, user = "onprem-lab", "nina@example.com"
    written, deleted = _bound(stack, user, ["nlp-eng"])
    assert [b["metadata"]["namespace"] for b in written] == ["nlp", "nlp-models"] and deleted == []  # its two
    assert written[0]["metadata"]["name"] == "user-nina-example-com-clusterrole-edit"  # KFAM's name
    assert written[0]["metadata"]["annotations"][server.USER] == user
    assert _can(stack, written, user, "create", "runs", "nlp")
    assert not _can(stack, written, user, "create", "runs", "vision")
    assert not _can(stack, written, user, "get", "runs", "vision")
    # Without the binding the same person is refused in their own namespace: the grant is the binding's.
    assert not _can(stack, [], user, "create", "runs", "nlp")


def test_an_analyst_reads_and_does_not_run() -> None:
    stack, user = "onprem-lab", "ali@example.com"
    written, _ = _bound(stack, user, ["vision-read"])
    assert _can(stack, written, user, "get", "runs", "vision")
    assert not _can(stack, written, user, "create", "runs", "vision")
    assert not _can(stack, written, user, "delete", "experiments", "vision")


def test_a_platform_admin_reaches_every_team_and_a_stranger_nothing() -> None:
    stack = "onprem-lab"
    written, _ = _bound(stack, "root@example.com", ["platform-admins"])
    everywhere = platform_of(stack).front_door.team_namespaces  # type: ignore[union-attr]
    assert tuple(sorted(b["metadata"]["namespace"] for b in written)) == everywhere
    assert all(_can(stack, written, "root@example.com", "terminate", "runs", ns) for ns in everywhere)
    assert _bound(stack, "eve@example.com", ["not-a-stack-group", "vision-ci"]) == ([], [])


def test_leaving_a_group_or_an_expired_token_removes_the_binding() -> None:
    stack, user = "onprem-lab", "nina@example.com"
    written, _ = _bound(stack, user, ["nlp-eng"])
    # Removed from nlp-eng: the next token lacks it, the binding goes at once.
    _, deleted = _bound(stack, user, [], existing=written)
    assert deleted == written
    # Moved from engineers to analysts: edit goes, view comes.
    moved, deleted = _bound(stack, user, ["nlp-read"], existing=written)
    assert [b["metadata"]["name"] for b in moved] == ["user-nina-example-com-clusterrole-view"] * 2 \
        and deleted == written  # in each of nlp's two namespaces
    # Nobody asks again: the sweep deletes it when the token that asked expires, not a second before.
    config = _config(stack)
    assert server.sweep(config, written, NOW + HOUR - 1) == []
    assert server.sweep(config, written, NOW + HOUR) == written
    # A binding never outlives the session, whatever the token says.
    long, _ = _bound(stack, user, ["nlp-eng"], token_exp=NOW + 30 * 24 * HOUR)
    assert server.expires_at(long[0]) == NOW + config["sessionSeconds"]
    # A binding made under another grant table (a group removed from the stack) is swept at once.
    stale = json.loads(json.dumps(written))
    stale[0]["metadata"]["annotations"][server.TABLE] = "another"
    assert server.sweep(config, stale, NOW) == stale[:1]  # that one, not its fresh sibling in nlp-models


def test_a_fresh_binding_is_not_rewritten_and_an_extended_one_is() -> None:
    stack, user = "onprem-lab", "nina@example.com"
    written, _ = _bound(stack, user, ["nlp-eng"])
    assert _bound(stack, user, ["nlp-eng"], existing=written) == ([], [])
    later, _ = _bound(stack, user, ["nlp-eng"], token_exp=NOW + 2 * HOUR, existing=written)
    assert len(later) == len(written) == 2  # nlp and nlp-models


def test_kfam_names_and_token_expiry() -> None:
    assert server.kfam_name("alice@example.com", "edit") == "user-alice-example-com-clusterrole-edit"
    assert server.kfam_name("Bob.Smith@Example.com", "view") == "user-ob-mith-xample-com-clusterrole-view"
    payload = "eyJleHAiOjE4MDAwMDM2MDB9"  # {"exp":1800003600}
    assert server.token_expiry(f"Bearer h.{payload}.s") == NOW + HOUR
    assert server.token_expiry("Bearer not-a-jwt") is None
    assert server.groups_of("a, b,,c") == ["a", "b", "c"]


# --- CI's machine token, and team namespaces as profiles -----------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_ci_runs_pipelines_in_its_own_namespace_only(stack: str) -> None:
    rbac = Authorizer(kube_objects(capture_of(stack)))
    namespaces = platform_of(stack).front_door.team_namespaces  # type: ignore[union-attr]
    for ns in namespaces:
        ci = Identity(f"system:serviceaccount:{ns}:trainyard-ci", ())
        assert rbac.allows(ci, "create", PIPELINES, "runs", ns)
        assert not rbac.allows(ci, "delete", PIPELINES, "runs", ns)
        for other in namespaces:
            if other != ns:
                assert not rbac.allows(ci, "get", PIPELINES, "runs", other), (ns, other)
        assert not rbac.allows(Identity(f"system:serviceaccount:{ns}:default", ()), "create", PIPELINES, "runs", ns)


@pytest.mark.parametrize("stack", STACKS)
def test_team_namespaces_are_profiles_owned_by_the_platform(stack: str) -> None:
    objects = kube_objects(capture_of(stack))
    teams = [ns for ns in objects if ns["kind"] == "Namespace" and TEAM_LABEL in ns["metadata"].get("labels", {})]
    assert teams
    for ns in teams:
        assert PROFILE_LABELS.items() <= ns["metadata"]["labels"].items()
        assert ns["metadata"]["annotations"]["owner"] == PROFILE_OWNER
    # No Profile controller (upstream binds it to cluster-admin: profiles-cluster-rolebinding), no Profile.
    assert not [o for o in objects if o["kind"] == "Profile" or o["metadata"]["name"] == "profiles-cluster-rolebinding"]


@pytest.mark.parametrize("stack", ["local", "onprem-lab"])
def test_the_binder_and_the_jwks_proxy_pass_restricted_with_pinned_images(stack: str) -> None:
    for deployment in kube_objects(capture_of(stack), "Deployment"):
        if deployment["metadata"]["name"] not in (web_binder.NAME, "cluster-jwks-proxy"):
            continue
        template = deployment["spec"]["template"]
        assert restricted(template) == [], deployment["metadata"]["name"]
        assert all(not unpinned_image(c["image"]) for c in template["spec"]["containers"])
    broken = json.loads(json.dumps(web_binder.binder_pod("x")))
    broken["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    assert restricted(broken)  # the check sees a pod that would be refused
