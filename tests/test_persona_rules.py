"""The persona roles and bindings as infra/platform/rbac.py builds them (the tenancy and access components run alone,
tests/parts.py), judged by the offline API server's RBAC authorizer: for each persona what it must be able to do and,
beside it, what it must not (another team's namespace, secrets, quotas, roles, nodes), and who holds each persona."""

from __future__ import annotations

from typing import Any

from infra.apiserver.rbac import Authorizer, Identity
from infra.platform.rbac import (
    KUEUE_BATCH_USER,
    PERSONA_ROLES,
    SERVING_EDIT,
    SERVING_VIEW,
    ci_subjects,
    groups,
    rule,
    team_role_name,
    team_rules,
)
from infra.spec import validate
from infra.spec.hybrid.model import burst_queue
from infra.vocabulary import PERSONA_LABEL, TEAM_LABEL
from tests.conftest import platform_of, raw_platform
from tests.parts import namespace_refs, parts_objects, parts_of, run_parts

RBAC = "rbac.authorization.k8s.io"
TRAINER, KUEUE, KSERVE = "trainer.kubeflow.org", "kueue.x-k8s.io", "serving.kserve.io"
# onprem-lab's people (groupPrefix "oidc:"): vision declares a CI group, nlp two analyst groups, speech no analysts
ADMIN = Identity("admin", ("oidc:platform-admins",))
VISION_ENG = Identity("eng", ("oidc:vision-eng",))
VISION_READ = Identity("analyst", ("oidc:vision-read",))
NLP_LEAD = Identity("lead", ("oidc:research-leads",))
VISION_CI = Identity("system:serviceaccount:vision:trainyard-ci", ())
VISION_CI_GROUP = Identity("runner", ("oidc:vision-ci",))
STRANGER = Identity("someone", ("vision-eng", "oidc:vision-engineers"))  # unprefixed, or a neighbour's name


def _named(objs: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name
             and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, (kind, name, namespace, len(found))
    return found[0]


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    """An object's labels but the one every Trainyard object carries (app.kubernetes.io/managed-by)."""
    return {k: v for k, v in obj["metadata"].get("labels", {}).items() if k != "app.kubernetes.io/managed-by"}


def _subjects(binding: dict[str, Any]) -> set[tuple[str, str]]:
    return {(s["kind"], s["name"] if s["kind"] != "ServiceAccount" else f"{s['namespace']}/{s['name']}")
            for s in binding["subjects"]}


def test_a_rule_is_one_api_group_its_resources_and_sorted_verbs_with_names_only_when_given() -> None:
    assert rule("", ["pods", "pods/log"], ("watch", "get")) == {
        "apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "watch"]}
    assert rule(KUEUE, ("clusterqueues",), ["get"], ("vision",)) == {
        "apiGroups": [KUEUE], "resources": ["clusterqueues"], "verbs": ["get"], "resourceNames": ["vision"]}


# (who, verb, group, resource, namespace, allowed): each right stands beside the nearest one it must not have.
LAB_ACCESS = [
    # platform admins: cordon and drain, stop runaway jobs anywhere; never write quotas, roles or secrets
    (ADMIN, "patch", "", "nodes", "", True), (ADMIN, "delete", "", "nodes", "", False),
    (ADMIN, "create", "", "pods/eviction", "nlp", True), (ADMIN, "create", "", "pods", "nlp", False),
    (ADMIN, "delete", "", "pods", "speech-eval", True), (ADMIN, "get", "", "secrets", "vision", False),
    (ADMIN, "get", "", "resourcequotas", "nlp", True), (ADMIN, "update", "", "resourcequotas", "nlp", False),
    (ADMIN, "get", RBAC, "rolebindings", "vision", True), (ADMIN, "create", RBAC, "rolebindings", "vision", False),
    (ADMIN, "patch", TRAINER, "trainjobs", "vision", True), (ADMIN, "create", TRAINER, "trainjobs", "vision", False),
    (ADMIN, "list", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "", True),
    # engineers: their pods, logs, exec, config, secrets and volumes, in every namespace of their team only
    (VISION_ENG, "create", "", "pods/exec", "vision", True), (VISION_ENG, "create", "", "pods/exec", "nlp", False),
    (VISION_ENG, "delete", "", "pods", "vision-models", True), (VISION_ENG, "create", "", "pods", "vision", False),
    (VISION_ENG, "get", "", "secrets", "vision", True), (VISION_ENG, "get", "", "secrets", "nlp", False),
    (VISION_ENG, "update", "", "configmaps", "vision", True), (VISION_ENG, "update", "", "configmaps", "speech", False),
    (VISION_ENG, "create", "", "persistentvolumeclaims", "vision", True),
    (VISION_ENG, "get", "", "resourcequotas", "vision", True), (VISION_ENG, "update", "", "resourcequotas", "vision",
                                                               False),
    (VISION_ENG, "list", "", "limitranges", "vision", True), (VISION_ENG, "patch", "", "limitranges", "vision", False),
    (VISION_ENG, "create", "batch", "cronjobs", "vision", True), (VISION_ENG, "create", "batch", "jobs", "vision",
                                                                  False),
    (VISION_ENG, "get", TRAINER, "trainingruntimes", "vision", True),
    (VISION_ENG, "create", TRAINER, "trainingruntimes", "vision", False),
    (VISION_ENG, "list", TRAINER, "clustertrainingruntimes", "", True),
    (VISION_ENG, "create", TRAINER, "clustertrainingruntimes", "", False),
    (VISION_ENG, "create", RBAC, "rolebindings", "vision", False), (VISION_ENG, "get", "", "nodes", "", False),
    (VISION_ENG, "create", KSERVE, "inferenceservices", "vision-models", True),
    (VISION_ENG, "create", KSERVE, "inferenceservices", "nlp-models", False),
    # analysts: read their team's jobs, pods and queues; no secrets, no config, no writes
    (VISION_READ, "get", "", "pods", "vision", True), (VISION_READ, "get", "", "pods", "nlp", False),
    (VISION_READ, "delete", "", "pods", "vision", False), (VISION_READ, "get", "", "pods/log", "vision", True),
    (VISION_READ, "get", "", "secrets", "vision", False), (VISION_READ, "get", "", "configmaps", "vision", False),
    (VISION_READ, "list", KUEUE, "workloads", "vision", True), (VISION_READ, "update", KUEUE, "workloads", "vision",
                                                                False),
    (VISION_READ, "get", KSERVE, "inferenceservices", "vision-models", True),
    (VISION_READ, "create", KSERVE, "inferenceservices", "vision-models", False),
    (NLP_LEAD, "get", TRAINER, "trainjobs", "nlp-models", True), (NLP_LEAD, "get", TRAINER, "trainjobs", "vision",
                                                                  False),
    # CI: submits and follows TrainJobs, and serves, in its own namespace; its account is no one else's
    (VISION_CI, "create", TRAINER, "trainjobs", "vision", True), (VISION_CI, "delete", TRAINER, "trainjobs", "vision",
                                                                  False),
    (VISION_CI, "create", TRAINER, "trainjobs", "nlp", False), (VISION_CI, "get", "", "pods", "vision", False),
    (VISION_CI, "get", TRAINER, "trainjobs/status", "vision", True),
    (VISION_CI, "create", KSERVE, "inferenceservices", "vision", True),
    (VISION_CI_GROUP, "create", TRAINER, "trainjobs", "vision-models", True),
    (VISION_CI_GROUP, "create", TRAINER, "trainjobs", "nlp", False),
    (STRANGER, "get", "", "pods", "vision", False), (STRANGER, "list", TRAINER, "clustertrainingruntimes", "", False),
]


def test_each_persona_can_do_its_work_and_nothing_next_to_it() -> None:
    authorizer = Authorizer(parts_objects(parts_of("onprem-lab")))
    wrong = [(who.user, verb, group, resource, namespace, expected) for who, verb, group, resource, namespace, expected
             in LAB_ACCESS if authorizer.allows(who, verb, group, resource, namespace) is not expected]
    assert wrong == []


def test_the_persona_roles_are_cluster_roles_labelled_with_their_persona() -> None:
    objs = parts_objects(parts_of("onprem-lab"))
    for name, (persona, rules) in PERSONA_ROLES.items():
        role = _named(objs, "ClusterRole", name)
        assert _labels(role) == {PERSONA_LABEL: persona} and role["rules"] == rules


def test_engineers_and_no_one_else_get_kueues_batch_user_role_in_each_team_namespace() -> None:
    platform, objs = platform_of("onprem-lab"), parts_objects(parts_of("onprem-lab"))
    for team in platform.teams:
        engineers = {("Group", f"oidc:{g}") for g in platform.spec.teams[team.name].groups.engineers}
        for ns in team.namespaces:
            kueue = [b for b in objs if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] == ns
                     and b["roleRef"]["name"] == KUEUE_BATCH_USER]
            assert len(kueue) == 1 and _subjects(kueue[0]) == engineers, ns
            assert kueue[0]["roleRef"] == {"kind": "ClusterRole", "apiGroup": RBAC, "name": KUEUE_BATCH_USER}
            assert _labels(kueue[0]) == {TEAM_LABEL: team.name, PERSONA_LABEL: "ml-engineer"}


def test_every_binding_says_its_persona_and_team_and_each_rolebinding_waits_for_its_namespace() -> None:
    """The access matrix reads a binding's persona from its label (infra/apiserver/rbac.py); a RoleBinding sent before
    its namespace exists is refused by the API server, so each depends on its Namespace."""
    capture = parts_of("onprem-lab")
    namespaces = namespace_refs(capture)
    seen = set()
    for record in capture.resources:
        obj = record.inputs
        if obj.get("kind") == "RoleBinding":
            ns = obj["metadata"]["namespace"]
            assert namespaces[ns] in record.depends_on, obj["metadata"]
            assert obj["metadata"]["labels"][TEAM_LABEL] == ns.split("-")[0], obj["metadata"]
            seen.add(obj["metadata"]["labels"][PERSONA_LABEL])
        if obj.get("kind") == "ClusterRoleBinding":
            assert obj["metadata"]["labels"][PERSONA_LABEL] in ("platform-admin", "ml-engineer", "analyst")
            assert "namespace" not in obj["metadata"]
    assert seen == {"ml-engineer", "analyst", "ci"}


def test_a_teams_cluster_reads_name_its_own_namespaces_and_queues_only() -> None:
    platform = platform_of("onprem-lab")
    vision = next(t for t in platform.teams if t.name == "vision")
    assert team_rules(vision) == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"],
         "resourceNames": ["vision", "vision-models"]},
        {"apiGroups": [KUEUE], "resources": ["clusterqueues"], "verbs": ["get", "list", "watch"],
         "resourceNames": ["vision"]},
        {"apiGroups": [TRAINER], "resources": ["clustertrainingruntimes"], "verbs": ["get", "list", "watch"]},
    ]
    manager = platform_of("hybrid-burst").hybrid.clusters["core"]  # type: ignore[union-attr]
    nlp = next(t for t in manager.teams if t.name == "nlp")
    queues = team_rules(nlp)[1]["resourceNames"]
    assert queues == ["nlp", burst_queue("nlp", "burst")] and "vision-burst" not in queues


def test_the_teams_cluster_role_is_bound_cluster_wide_to_its_engineers_and_analysts_only() -> None:
    platform, objs = platform_of("onprem-lab"), parts_objects(parts_of("onprem-lab"))
    for team in platform.teams:
        role = _named(objs, "ClusterRole", team_role_name(team.name))
        assert role["rules"] == team_rules(team) and _labels(role) == {TEAM_LABEL: team.name}
        held = {b["metadata"]["labels"][PERSONA_LABEL]: _subjects(b) for b in objs
                if b["kind"] == "ClusterRoleBinding" and b["roleRef"]["name"] == team_role_name(team.name)}
        declared = platform.spec.teams[team.name].groups
        expected = {"ml-engineer": {("Group", f"oidc:{g}") for g in declared.engineers},
                    "analyst": {("Group", f"oidc:{g}") for g in declared.analysts}}
        assert held == {persona: subjects for persona, subjects in expected.items() if subjects}, team.name
    assert team_role_name("vision") == "trainyard-team-vision"


def test_ci_is_the_namespaces_account_and_the_declared_ci_groups() -> None:
    objs = parts_objects(parts_of("onprem-lab"))
    for ns, groups_ in (("vision", {("Group", "oidc:vision-ci")}), ("speech-eval", set())):
        ci = _named(objs, "RoleBinding", "trainyard-ci", ns)
        assert _subjects(ci) == {("ServiceAccount", f"{ns}/trainyard-ci"), *groups_}
        assert ci["roleRef"]["name"] == "trainyard-ci" and ci["metadata"]["labels"][PERSONA_LABEL] == "ci"
    users, ci_groups = ci_subjects(platform_of("onprem-lab"))
    assert users == sorted(f"system:serviceaccount:{ns}:trainyard-ci" for t in platform_of("onprem-lab").teams
                           for ns in t.namespaces)
    assert ci_groups == ["oidc:vision-ci"]


def test_ci_groups_of_every_team_are_prefixed_and_sorted() -> None:
    raw = raw_platform("onprem-lab")
    raw["identity"]["groupPrefix"] = "sso/"
    raw["teams"]["nlp"]["groups"]["ci"] = ["z-runner", "a-runner"]
    assert ci_subjects(validate(raw, "onprem-lab"))[1] == ["sso/a-runner", "sso/vision-ci", "sso/z-runner"]


def test_group_subjects_carry_the_prefix_and_the_rbac_api_group() -> None:
    assert groups(platform_of("onprem-lab"), ["a", "b"]) == [
        {"kind": "Group", "apiGroup": RBAC, "name": "oidc:a"}, {"kind": "Group", "apiGroup": RBAC, "name": "oidc:b"}]
    assert groups(platform_of("gcp-prod"), ["a"])[0]["name"] == "a"


def test_platform_admins_are_bound_cluster_wide_only_when_declared() -> None:
    objs = parts_objects(parts_of("onprem-lab"))
    admin = _named(objs, "ClusterRoleBinding", "trainyard-platform-admin")
    assert _subjects(admin) == {("Group", "oidc:platform-admins")}
    assert admin["roleRef"] == {"kind": "ClusterRole", "apiGroup": RBAC, "name": "trainyard-platform-admin"}
    assert _labels(admin) == {PERSONA_LABEL: "platform-admin"}
    local = parts_objects(parts_of("local"), "ClusterRoleBinding")
    assert [b["metadata"]["name"] for b in local if "platform-admin" in b["metadata"]["name"]] == []


def test_a_persona_without_people_gets_no_binding_but_ci_keeps_its_account() -> None:
    """speech declares no analysts: no analyst binding anywhere of speech; a team of CI alone still gets the account."""
    objs = parts_objects(parts_of("onprem-lab"))
    speech = [b for b in objs if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
              and b["metadata"]["labels"].get(TEAM_LABEL) == "speech"]
    assert speech and not [b for b in speech if b["metadata"]["labels"][PERSONA_LABEL] == "analyst"]
    raw = raw_platform("onprem-lab")
    raw["teams"]["speech"]["groups"] = {}
    lone = [b for b in parts_objects(run_parts("onprem-lab", raw)) if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
            and b["metadata"]["labels"].get(TEAM_LABEL) == "speech"]
    assert sorted((b["metadata"].get("namespace", ""), b["metadata"]["name"]) for b in lone) == sorted(
        (ns, name) for ns in ("speech", "speech-eval", "speech-models")
        for name in ("trainyard-ci", f"{SERVING_EDIT}-ci"))


def test_serving_roles_exist_with_models_only_and_split_edit_from_view() -> None:
    objs = parts_objects(parts_of("onprem-lab"))
    edit, view = _named(objs, "ClusterRole", SERVING_EDIT), _named(objs, "ClusterRole", SERVING_VIEW)
    assert _labels(edit) == {} == _labels(view)
    assert _subjects(_named(objs, "RoleBinding", SERVING_VIEW, "nlp-models")) == {
        ("Group", "oidc:nlp-read"), ("Group", "oidc:research-leads")}
    raw = raw_platform("onprem-lab")
    del raw["models"]
    for team in raw["teams"].values():
        team.pop("serving", None)
    bare = parts_objects(run_parts("onprem-lab", raw))
    assert not [o for o in bare if SERVING_EDIT in o["metadata"]["name"] or SERVING_VIEW in o["metadata"]["name"]]
    assert _named(bare, "ClusterRole", "trainyard-ci")


def test_access_objects_are_the_components_children_on_the_clusters_provider_under_stable_names() -> None:
    """The component's type and each object's resource name are in its URN: a change of either makes `pulumi up`
    replace the object (a binding deleted, then created again); the provider is the cluster's, never an ambient
    kubeconfig's."""
    capture = parts_of("onprem-lab")
    access = [r for r in capture.resources
              if r.inputs.get("kind") in ("ClusterRole", "ClusterRoleBinding", "RoleBinding")]
    assert [r.type for r in capture.resources if r.name == "access"] == ["trainyard:platform:Access"]
    assert access and {r.parent for r in access} == {"trainyard:platform:Access::access"}
    assert {r.provider for r in access} == {"pulumi:providers:kubernetes::k8s"}
    for record in access:
        meta, kind = record.inputs["metadata"], record.inputs["kind"]
        persona = meta.get("labels", {}).get(PERSONA_LABEL, "")
        expected = {
            "ClusterRole": {f"role-{persona}", f"role-{meta['name']}",
                            f"role-team-{meta.get('labels', {}).get(TEAM_LABEL)}"},
            "ClusterRoleBinding": {f"crb-{meta['name']}"},
            "RoleBinding": {f"rb-{meta.get('namespace')}-{meta['name']}"},
        }[kind]
        assert record.name in expected, (record.name, kind, meta["name"])
