"""Each team's Model Registry as rendered on the stacks (infra/platform/models/registry.py): one per team in its
models namespace; its database's password the team's own, never upstream's `test` nor empty; its volume retained on a
Retain class; the server reached only from the team's namespaces and the gateway, the database only from its server;
at the front door, the team's path refused to other teams and writes refused to analysts (the rendered DENY policy,
evaluated with Istio 1.28's semantics); the models namespace's quota exactly the serving budget plus the registry."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from infra.apiserver.quota import Quotas
from infra.apiserver.review import Reviewer
from infra.apiserver.state import ClusterState
from infra.components import GATEWAY_POD_LABELS, ISTIO
from infra.offline import engine
from infra.offline.images import object_images
from infra.platform.models.registry import db_password, registry_access
from infra.platform.models.registry_patches import DB_PORT, DB_SECRET
from infra.spec.base import parse_quantity
from infra.spec.input.keys import MODEL_REGISTRY_DB_PASSWORD_KEY, PLATFORM_KEY
from infra.spec.models.model import REGISTRY_PORT
from infra.spec.pins import unpinned_image
from infra.vocabulary import pod_templates
from tests.conftest import ALL_STACKS, capture_of, kube_objects, platform_of, raw_platform
from tests.test_frontdoor import _namespace, _path_matches, ingress_allowed, injected
from tests.test_frontdoor_machine import _principal_matches
from tests.test_machine_issuer import ci_issuer

Obj = dict[str, Any]
SERVER, DATABASE = {"component": "model-registry-server"}, {"component": "db"}
TEAMS_OF_SEVERAL = [s for s in ALL_STACKS if len(platform_of(s).teams) > 1]


def _meta(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _in(stack: str, namespace: str, kind: str | None = None) -> list[Obj]:
    return [o for o in kube_objects(capture_of(stack), kind) if _meta(o)[0] == namespace]


def _models(stack: str) -> Any:
    facts = platform_of(stack).models
    assert facts is not None, f"{stack} declares models"
    return facts


# --- one registry per team -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ALL_STACKS)
def test_one_registry_per_team_in_its_models_namespace(stack: str) -> None:
    facts = _models(stack)
    servers = [_meta(d) for d in kube_objects(capture_of(stack), "Deployment")
               if d["spec"]["selector"]["matchLabels"] == SERVER]
    assert sorted(servers) == sorted((t.namespace, "model-registry-deployment") for t in facts.teams)
    for team in facts.teams:
        kinds = {(o["kind"], _meta(o)[1]) for o in _in(stack, team.namespace)}
        assert {("Deployment", "model-registry-db"), ("Service", "model-registry-service"),
                ("PersistentVolumeClaim", "metadata-mysql")} <= kinds
        assert team.registry_url == f"http://model-registry-service.{team.namespace}.svc.cluster.local:8080"


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_registry_s_pods_pass_restricted_run_no_sidecar_and_pin_their_images(stack: str) -> None:
    capture, team = capture_of(stack), _models(stack).teams[0]
    webhooks = [w for o in kube_objects(capture, "MutatingWebhookConfiguration")
                if _meta(o)[1] == "istio-sidecar-injector" for w in o["webhooks"]]
    namespace = _namespace(capture, team.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/audit"] == "restricted"
    for deployment in _in(stack, team.namespace, "Deployment"):
        template = pod_templates("Deployment", deployment)[0]
        assert not injected(webhooks, namespace, template["metadata"]["labels"]), _meta(deployment)
        pod = template["spec"]
        assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == \
            "RuntimeDefault"
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]
            resources = container["resources"]
            assert set(resources["requests"]) == {"cpu", "memory"} and "memory" in resources["limits"]
        images = object_images(deployment)
        assert [i for i in images if unpinned_image(i) or "." not in i.split("/")[0]] == [], images


REPLICASET_CONTROLLER = ("system:serviceaccount:kube-system:replicaset-controller",
                         ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


def _registry_pods(stack: str, namespace: str) -> list[Obj]:
    """The pods the ReplicaSet controller creates from the registry's Deployments."""
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": _meta(d)[1], "namespace": namespace,
                                                            "labels": pod_templates("Deployment", d)[0]["metadata"]
                                                            .get("labels", {})},
             "spec": pod_templates("Deployment", d)[0]["spec"]} for d in _in(stack, namespace, "Deployment")]


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_platform_s_admission_admits_the_registry_s_pods(stack: str) -> None:
    """Pods in team namespaces meet the platform's policies (allowed registries, pinned images, Pod Security):
    the registry's must pass them as the ReplicaSet controller creates them; another image in them would not."""
    rendered = kube_objects(capture_of(stack))
    reviewer = Reviewer(platform_of(stack).spec.versions, None, ClusterState(rendered))
    user, groups = REPLICASET_CONTROLLER
    pods = _registry_pods(stack, _models(stack).teams[0].namespace)
    assert len(pods) == 2
    for pod in pods:
        assert reviewer.review(pod, user=user, groups=groups).refusals == [], _meta(pod)
    stranger = json.loads(json.dumps(pods[0]))
    stranger["spec"]["containers"][0]["image"] = "docker.io/library/postgres:16"
    assert reviewer.review(stranger, user=user, groups=groups).refusals


# --- the database: its own password, its volume kept -----------------------------------------------------------------

def test_the_database_password_is_each_team_s_own_and_never_upstream_s() -> None:
    facts = _models("onprem-lab")
    root = "a-root-password-of-our-own"
    passwords = {t.team: db_password(facts, t.team, root) for t in facts.teams}
    assert len(set(passwords.values())) == len(facts.teams)
    assert all(p not in ("", "test", root) and len(p) == 32 for p in passwords.values())
    with pytest.raises(Exception, match=f"{MODEL_REGISTRY_DB_PASSWORD_KEY}: is empty"):
        db_password(facts, "vision", " ")
    for team in facts.teams:
        parameters = next(o for o in _in("onprem-lab", team.namespace, "ConfigMap")
                          if _meta(o)[1] == "model-registry-db-parameters")
        assert "MYSQL_ALLOW_EMPTY_PASSWORD" not in parameters["data"]
        # upstream's Secret (root / `test`) is not rendered; ours needs the key, so without it there is none
        assert not [s for s in _in("onprem-lab", team.namespace, "Secret") if _meta(s)[1] == DB_SECRET]
    assert "dGVzdA==" not in repr(kube_objects(capture_of("onprem-lab"), "Secret"))


def test_with_the_key_each_models_namespace_gets_its_secret() -> None:
    capture = engine.run("local", {PLATFORM_KEY: raw_platform("local"),
                                   MODEL_REGISTRY_DB_PASSWORD_KEY: "a-root-password-of-our-own"})
    secrets = [s for s in kube_objects(capture, "Secret") if _meta(s) == ("demo-models", DB_SECRET)]
    assert len(secrets) == 1 and secrets[0]["stringData"] == "[secret]"  # its values: db_password, above
    assert "dGVzdA==" not in repr(kube_objects(capture, "Secret"))


def test_an_empty_key_is_refused_by_the_program() -> None:
    with pytest.raises(Exception, match=f"{MODEL_REGISTRY_DB_PASSWORD_KEY}: is empty"):
        engine.run("local", {PLATFORM_KEY: raw_platform("local"), MODEL_REGISTRY_DB_PASSWORD_KEY: " "})


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_database_volume_is_retained_on_a_retain_class_and_backed_up(stack: str) -> None:
    capture, facts = capture_of(stack), _models(stack)
    classes = {_meta(c)[1]: c for c in kube_objects(capture, "StorageClass")}
    namespaces = {t.namespace for t in facts.teams}
    claims = [r for r in capture.resources if r.inputs.get("kind") == "PersistentVolumeClaim"
              and r.inputs["metadata"].get("namespace") in namespaces]
    assert len(claims) == len(namespaces)
    for record in claims:
        spec = record.inputs["spec"]
        assert (spec["storageClassName"], spec["resources"]["requests"]["storage"]) == facts.database
        assert classes[spec["storageClassName"]]["reclaimPolicy"] == "Retain" and record.retain_on_delete
    # The volume tiers of the cluster that runs the registries (a multi-cluster stack's manager) cover them.
    providers = {record.provider for record in claims}
    volume_tiers = [r.inputs["spec"]["template"] for r in capture.resources if r.inputs.get("kind") == "Schedule"
                    and r.provider in providers and r.inputs["spec"]["template"]["snapshotVolumes"]]
    assert volume_tiers and all(namespaces <= set(t["includedNamespaces"]) for t in volume_tiers)


# --- the network ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", TEAMS_OF_SEVERAL)
def test_the_server_admits_its_team_and_the_gateway_and_the_database_only_its_server(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    own, other = platform.teams[0], platform.teams[1]
    ns = _models(stack).team(own.name).namespace
    pod = {"app": "trainer"}
    for namespace in own.namespaces:  # its training namespace and its models namespace
        assert ingress_allowed(policies, ns, SERVER, REGISTRY_PORT, _namespace(capture, namespace), pod)
    for namespace in other.namespaces:
        assert not ingress_allowed(policies, ns, SERVER, REGISTRY_PORT, _namespace(capture, namespace), pod)
    assert ingress_allowed(policies, ns, SERVER, REGISTRY_PORT, _namespace(capture, ISTIO.namespace),
                           GATEWAY_POD_LABELS)
    assert not ingress_allowed(policies, ns, SERVER, REGISTRY_PORT, _namespace(capture, ISTIO.namespace),
                               {"app": "istiod"})
    assert not ingress_allowed(policies, ns, SERVER, REGISTRY_PORT, _namespace(capture, "monitoring"), pod)
    # The database: its server only; not the team's other pods, not its other namespaces, not the gateway.
    models = _namespace(capture, ns)
    assert ingress_allowed(policies, ns, DATABASE, DB_PORT, models, SERVER)
    assert not ingress_allowed(policies, ns, DATABASE, DB_PORT, models, {"app": "predictor"})
    assert not ingress_allowed(policies, ns, DATABASE, DB_PORT, _namespace(capture, own.namespaces[0]), SERVER)
    assert not ingress_allowed(policies, ns, DATABASE, DB_PORT, _namespace(capture, ISTIO.namespace),
                               GATEWAY_POD_LABELS)
    # The team's training namespace keeps the same-team allowance for every pod.
    assert ingress_allowed(policies, own.namespaces[0], DATABASE, DB_PORT, models, pod)


def test_without_the_database_exception_the_team_s_pods_would_reach_it() -> None:
    """The refusal above is the same-team policy's narrowing: with upstream's all-pods selector, any team pod
    reaches the database."""
    capture = capture_of("onprem-lab")
    policies = [o for o in kube_objects(capture, "NetworkPolicy")]
    opened = [{**p, "spec": {**p["spec"], "podSelector": {}}} if _meta(p) == ("vision-models", "allow-same-team")
              else p for p in policies]
    models = _namespace(capture, "vision-models")
    assert not ingress_allowed(policies, "vision-models", DATABASE, DB_PORT, models, {"app": "predictor"})
    assert ingress_allowed(opened, "vision-models", DATABASE, DB_PORT, models, {"app": "predictor"})


# --- the front door: who reads, who writes -------------------------------------------------------------------------

def _claim_holds(condition: Obj, claims: dict[str, Any]) -> bool:
    """`request.auth.claims[name]` with values / notValues: a list claim matches when one of its items is listed
    (Istio 1.28 MetadataListValueMatcherForJWTClaims: a list match OR a string match); notValues is its negation,
    which also holds when the claim is absent."""
    name = condition["key"].removeprefix("request.auth.claims[")[:-1]
    value = claims.get(name)
    items = value if isinstance(value, list) else [] if value is None else [value]
    listed = condition.get("values") or condition.get("notValues") or []
    hit = any(_path_matches(listed, str(item)) or item in listed for item in items)
    return hit if "values" in condition else not hit


def _operation_holds(operation: Obj, path: str, method: str) -> bool:
    return ((not operation.get("paths") or _path_matches(operation["paths"], path))
            and not _path_matches(operation.get("notPaths", []), path)
            and (not operation.get("methods") or method in operation["methods"])
            and method not in operation.get("notMethods", []))


def _source_holds(source: Obj, principal: str | None) -> bool:
    """A request without a verified token has no principal: requestPrincipals fails, notRequestPrincipals holds."""
    if "requestPrincipals" in source and not _principal_matches(source["requestPrincipals"], principal):
        return False
    return not ("notRequestPrincipals" in source and _principal_matches(source["notRequestPrincipals"], principal))


def denied(policies: list[Obj], path: str, method: str, principal: str | None, claims: dict[str, Any]) -> bool:
    """Whether a DENY policy refuses the request: a rule matches when one of its sources, one of its operations and
    every condition hold."""
    for policy in policies:
        assert policy["spec"]["action"] == "DENY"
        for rule in policy["spec"]["rules"]:
            if ((not rule.get("from") or any(_source_holds(s["source"], principal) for s in rule["from"]))
                    and (not rule.get("to") or any(_operation_holds(t["operation"], path, method) for t in rule["to"]))
                    and all(_claim_holds(c, claims) for c in rule.get("when", []))):
                return True
    return False


def _registry_policies(stack: str) -> list[Obj]:
    return [o for o in _in(stack, ISTIO.namespace, "AuthorizationPolicy") if _meta(o)[1].startswith("model-registry-")]


def _person(stack: str, *groups: str) -> tuple[str, dict[str, Any]]:
    door = platform_of(stack).front_door
    assert door is not None
    return f"{door.issuer}/ada", {"iss": door.issuer, "sub": "ada", door.groups_claim: list(groups)}


def _ci(stack: str, namespace: str) -> tuple[str, dict[str, Any]]:
    return f"{ci_issuer(stack)}/system:serviceaccount:{namespace}:trainyard-ci", {}


def _groups(stack: str, team: str, key: str) -> list[str]:
    return list(getattr(platform_of(stack).spec.teams[team].groups, key))


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_analysts_read_engineers_and_ci_write_other_teams_nothing(stack: str) -> None:
    policies, platform = _registry_policies(stack), platform_of(stack)
    assert len(policies) == len(platform.teams)
    team = platform.teams[0]
    base = f"/model-registry/{team.name}/api/model_registry/v1alpha3/registered_models"
    engineers, analysts = _groups(stack, team.name, "engineers"), _groups(stack, team.name, "analysts")
    assert engineers, f"{stack}: {team.name} declares engineers"
    engineer = _person(stack, "some-other-group", engineers[0])  # one of its groups is enough
    for method in ("GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"):
        assert not denied(policies, base, method, *engineer), method
        assert not denied(policies, base, method, *_ci(stack, team.namespaces[0])), method
    if analysts:
        analyst = _person(stack, analysts[0])
        assert not denied(policies, base, "GET", *analyst) and not denied(policies, base, "HEAD", *analyst)
        for method in ("POST", "PATCH", "PUT", "DELETE", "OPTIONS"):
            assert denied(policies, base, method, *analyst), method
    for admin in platform.spec.identity.platform_admins:
        assert not denied(policies, base, "POST", *_person(stack, admin))
    # Nobody else: no groups, another team's people and CI, any other account of the team's namespace.
    assert denied(policies, base, "GET", *_person(stack))
    assert denied(policies, f"/model-registry/{team.name}", "GET", *_person(stack, "someone-else"))
    assert denied(policies, base, "GET", _ci(stack, team.namespaces[0])[0].replace(":trainyard-ci", ":default"), {})
    for other in platform.teams[1:]:
        assert denied(policies, base, "GET", *_person(stack, *_groups(stack, other.name, "engineers")))
        assert denied(policies, base, "POST", *_ci(stack, other.namespaces[0]))
        # ...while their own registry is theirs.
        own = f"/model-registry/{other.name}/api/model_registry/v1alpha3/model_versions"
        assert not denied(policies, own, "POST", *_ci(stack, other.namespaces[0]))


@pytest.mark.parametrize("stack", ["local", "aws-prod"])
def test_the_policies_leave_the_other_routes_alone(stack: str) -> None:
    policies = _registry_policies(stack)
    someone = _person(stack, "someone-else")
    for path in ("/pipeline/", "/grafana/", "/model-registry/", "/model-registry/x", "/web-access/"):
        assert not denied(policies, path, "POST", *someone), path
    team = platform_of(stack).teams[0].name
    assert not denied(policies, f"/model-registry/{team}x/", "POST", *someone)  # another name's prefix


def test_the_evaluator_lets_an_analyst_write_without_the_write_rule() -> None:
    facts, door = _models("local"), platform_of("local").front_door
    assert door is not None
    spec = registry_access(door, facts.teams[0], ("demo", "demo-models"))
    read_only = [{"spec": {**spec, "rules": spec["rules"][:1]}}]
    analyst = _person("local", "demo-read")
    path = "/model-registry/demo/api/model_registry/v1alpha3/registered_models"
    assert denied([{"spec": spec}], path, "POST", *analyst)
    assert not denied(read_only, path, "POST", *analyst)


@pytest.mark.parametrize("stack", ["local", "onprem-lab"])
def test_the_route_leads_to_the_team_s_own_registry(stack: str) -> None:
    routes = {_meta(o)[1]: o for o in _in(stack, ISTIO.namespace, "VirtualService")}
    for team in _models(stack).teams:
        http = routes[f"model-registry-{team.team}"]["spec"]["http"]
        assert [h["match"] for h in http] == [[{"uri": {"prefix": f"/model-registry/{team.team}/"}}]]
        assert http[0]["route"][0]["destination"]["host"] == \
            f"model-registry-service.{team.namespace}.svc.cluster.local"


# --- the models namespace's quota ----------------------------------------------------------------------------------

def _requests(objects: list[Obj]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for obj in objects:
        for template in pod_templates(obj["kind"], obj):
            replicas = Decimal(obj["spec"].get("replicas", 1))
            for container in template["spec"]["containers"]:
                for resource, amount in container["resources"]["requests"].items():
                    total[resource] = total.get(resource, Decimal(0)) + replicas * parse_quantity(amount)
    return total


def _hard(stack: str, namespace: str) -> dict[str, str]:
    quota = next(q for q in _in(stack, namespace, "ResourceQuota") if _meta(q)[1] == "team-quota")
    hard: dict[str, str] = quota["spec"]["hard"]
    return hard


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_models_quota_is_the_serving_budget_plus_the_registry(stack: str) -> None:
    platform = platform_of(stack)
    for team in _models(stack).teams:
        registry = _requests(_in(stack, team.namespace, "Deployment"))
        budget = team.serving
        want = {"cpu": registry["cpu"] + (parse_quantity(budget.cpu) if budget else 0),
                "memory": registry["memory"] + (parse_quantity(budget.memory) if budget else 0)}
        hard = _hard(stack, team.namespace)
        assert {r: parse_quantity(hard[f"requests.{r}"]) for r in want} == want
        gpus = [r for r in platform.covered_resources if r not in ("cpu", "memory")]
        pool = set(platform.flavor(budget.pool).gpu_resources) if budget else set()
        assert {r: hard[f"requests.{r}"] for r in gpus} == \
            {r: str(budget.gpus if budget and r in pool else 0) for r in gpus}
        # the team's other namespaces keep the training ceiling; object counts are the namespaceQuota's
        training = _hard(stack, next(t for t in platform.teams if t.name == team.team).namespaces[0])
        assert {k: v for k, v in hard.items() if not k.startswith("requests.") or k == "requests.storage"} == \
            {k: v for k, v in training.items() if not k.startswith("requests.") or k == "requests.storage"}


def _pod(namespace: str, cpu: str, memory: str, **extra: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "predictor", "namespace": namespace},
            "spec": {"containers": [{"name": "kserve-container", "image": "x",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}]}}


def test_a_predictor_at_the_budget_fits_beside_the_registry_and_one_past_it_is_refused() -> None:
    rendered = kube_objects(capture_of("local"))
    registry_pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": _meta(d)[1], "namespace": "demo-models"},
                      "spec": pod_templates("Deployment", d)[0]["spec"]}
                     for d in rendered if d["kind"] == "Deployment" and _meta(d)[0] == "demo-models"]
    assert len(registry_pods) == 2
    quotas = Quotas(ClusterState(rendered), [*rendered, *registry_pods])
    assert quotas.review(_pod("demo-models", "1", "2Gi")) == []  # local's demo: serving {cpu: 1, memory: 2Gi}
    assert quotas.review(_pod("demo-models", "1001m", "2Gi"))
    assert quotas.review(_pod("demo-models", "1", "2049Mi"))
    assert quotas.review(_pod("demo-models", "100m", "128Mi", **{"nvidia.com/gpu": "1"}))  # no GPU in its budget
