"""The front door (infra/platform/frontdoor.py) on the rendered objects of every stack: one web-facing entry, forged
identity headers refused from outside (the gateway's token rules) and from inside (NetworkPolicy), training pods
outside sidecar injection, its needs in the prerequisites model, and no upstream placeholder secret anywhere."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from infra.apiserver.selectors import matches_selector
from infra.checks.context import Context
from infra.checks.prerequisites import check_prerequisites
from infra.components import GATEWAY_POD_LABELS, GROUPS_HEADER, ISTIO, MONITORING, PIPELINES, USERID_HEADER
from infra.offline import engine
from infra.offline.engine import Capture
from infra.platform import frontdoor_identity as identity
from infra.platform.frontdoor import GRAFANA_POD_LABELS, GRAFANA_PORT, cluster_issuer
from infra.spec import SpecError, validate
from infra.spec.input.keys import LDAP_BIND_PASSWORD_KEY, PLATFORM_KEY
from infra.vocabulary import NAME_LABEL, TEAM_LABEL, pod_templates
from tests.conftest import ROOT, STACKS, capture_of, kube_objects, platform_of, raw_platform

Obj = dict[str, Any]
WEB_FACING = ("LoadBalancer", "NodePort")


def _meta(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _labels(obj: Obj) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def web_entries(objects: list[Obj]) -> list[tuple[str, str, str]]:
    """Everything reachable from outside the cluster: Services of type LoadBalancer or NodePort, and Ingresses."""
    return sorted([(obj["kind"], *_meta(obj)) for obj in objects
                   if (obj["kind"] == "Service" and obj.get("spec", {}).get("type") in WEB_FACING)
                   or obj["kind"] == "Ingress"])


# --- renders on every stack, one entry ---------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_the_front_door_renders_on_every_stack(stack: str) -> None:
    capture = capture_of(stack)
    doors = [r for r in capture.resources if r.type == "trainyard:platform:FrontDoor"]
    assert len(doors) == 1  # hybrid-burst: on the manager (core) only
    assert doors[0].name == ("core-front-door" if stack == "hybrid-burst" else "front-door")
    facts = platform_of(stack).front_door
    assert facts is not None
    gateways = kube_objects(capture, "Gateway")
    assert [_meta(g) for g in gateways] == [(ISTIO.namespace, "kubeflow-gateway")]
    https = gateways[0]["spec"]["servers"][0]
    assert https["hosts"] == [facts.spec.host] and https["port"]["number"] == 443 and https["tls"]["mode"] == "SIMPLE"
    dex = [obj for obj in kube_objects(capture, "Deployment") if _meta(obj) == ("auth", "dex")]
    assert bool(dex) == facts.dex  # Dex only for ldap, staticUsers and google


@pytest.mark.parametrize("stack", STACKS)
def test_the_gateway_is_the_one_web_facing_entry(stack: str) -> None:
    entries = web_entries(kube_objects(capture_of(stack)))
    assert entries == [("Service", ISTIO.namespace, "istio-ingressgateway")]
    service = next(s for s in kube_objects(capture_of(stack), "Service") if _meta(s)[1] == "istio-ingressgateway")
    assert service["spec"]["type"] == ("NodePort" if stack == "local" else "LoadBalancer")


def _gateway_service(stack: str) -> Obj:
    return next(s for s in kube_objects(capture_of(stack), "Service") if _meta(s)[1] == "istio-ingressgateway")


def test_a_laptops_gateway_keeps_every_port_on_the_node_ports_and_address_kind_maps() -> None:
    """local's gateway Service is the cloud stacks' but for its type, node ports and fixed address: the node ports are
    those docs/kind-trainyard.yaml maps to the laptop's 80 and 443, the address is in the service range it states,
    among the 256 addresses kept for fixed ones, and Grafana's pods resolve the front door's host to it."""
    laptop, cloud = _gateway_service("local")["spec"], _gateway_service("aws-prod")["spec"]
    assert [{k: v for k, v in p.items() if k != "nodePort"} for p in laptop["ports"]] == cloud["ports"]
    kind = yaml.safe_load((ROOT / "docs" / "kind-trainyard.yaml").read_text(encoding="utf-8"))
    mapped = {m["containerPort"]: m["hostPort"] for node in kind["nodes"] for m in node.get("extraPortMappings", [])}
    assert {p["port"]: mapped.get(p.get("nodePort")) for p in laptop["ports"] if p["name"] != "status-port"} == \
        {80: 80, 443: 443}
    address, services = ipaddress.ip_address(laptop["clusterIP"]), ipaddress.ip_network(kind["networking"][
        "serviceSubnet"])
    assert address in services and int(address) - int(services.network_address) < 256
    assert "clusterIP" not in cloud
    grafana = next(d for d in kube_objects(capture_of("local"), "Deployment")
                   if _labels(d).get("app.kubernetes.io/name") == "grafana")
    door = platform_of("local").front_door
    assert door is not None
    aliases = grafana["spec"]["template"]["spec"]["hostAliases"]
    assert aliases == [{"ip": laptop["clusterIP"], "hostnames": [door.spec.host]}]
    cloud_grafana = next(d for d in kube_objects(capture_of("aws-prod"), "Deployment")
                         if _labels(d).get("app.kubernetes.io/name") == "grafana")
    assert "hostAliases" not in cloud_grafana["spec"]["template"]["spec"]


def test_another_web_facing_object_is_seen() -> None:
    objects = kube_objects(capture_of("local"))
    extra = [{"kind": "Service", "metadata": {"name": "grafana-lb", "namespace": MONITORING.namespace},
              "spec": {"type": "LoadBalancer"}},
             {"kind": "Ingress", "metadata": {"name": "ui", "namespace": "demo"}, "spec": {}}]
    assert len(web_entries(objects + extra)) == 3


# --- forged identity headers from outside: the gateway's own rules -----------------------------------------------

def _gateway_policies(capture: Capture) -> tuple[list[Obj], list[Obj]]:
    selects_gateway = [obj for obj in kube_objects(capture) if obj["kind"] in ("RequestAuthentication",
                                                                              "AuthorizationPolicy")
                       and _meta(obj)[0] == ISTIO.namespace
                       and matches_selector({"matchLabels": obj["spec"].get("selector", {}).get("matchLabels", {})},
                                            GATEWAY_POD_LABELS)]
    return ([o for o in selects_gateway if o["kind"] == "RequestAuthentication"],
            [o for o in selects_gateway if o["kind"] == "AuthorizationPolicy"])


def _path_matches(patterns: list[str], path: str) -> bool:
    """Istio's path matching: exact, `prefix*`, `*suffix`."""
    return any(path == p or (p.endswith("*") and path.startswith(p[:-1])) or (p.startswith("*") and
                                                                               path.endswith(p[1:])) for p in patterns)


def gateway_decision(capture: Capture, path: str, headers: dict[str, str],
                     token: dict[str, Any] | None) -> tuple[str, dict[str, str]]:
    """What the gateway does with a request, as its rendered policies say: `token` is the verified token's
    (issuer, claims) or None (none, or one no rule verifies). Returns ('deny' | 'ext-authz' | 'allow', the headers
    the UI receives). Envoy's jwt_authn writes each outputClaimToHeaders header from the claim, replacing any value
    the client sent; Istio's DENY with notRequestPrincipals refuses requests without a verified token."""
    rules, policies = _gateway_policies(capture)
    verified = None
    if token is not None:
        verified = next((r for a in rules for r in a["spec"]["jwtRules"] if r["issuer"] == token["iss"]), None)
    for policy in policies:
        spec = policy["spec"]
        if spec.get("action") != "DENY":
            continue
        for rule in spec.get("rules", []):
            source: Obj = next((f["source"] for f in rule.get("from", []) if "source" in f), {})
            operation: Obj = next((t["operation"] for t in rule.get("to", []) if "operation" in t), {})
            unverified = source.get("notRequestPrincipals") == ["*"] and verified is None
            excluded = _path_matches(operation.get("notPaths", []), path)
            if unverified and not excluded:
                return "deny", {}
    delivered = dict(headers)
    if verified is not None:
        for mapping in verified.get("outputClaimToHeaders", []):
            claim = token["claims"].get(mapping["claim"]) if token else None
            if claim is not None:
                delivered[mapping["header"]] = ",".join(claim) if isinstance(claim, list) else str(claim)
    custom = any(p["spec"].get("action") == "CUSTOM" for p in policies)
    return ("allow" if verified is not None or not custom else "ext-authz"), delivered


FORGED = {USERID_HEADER: "admin@example.com", GROUPS_HEADER: "platform-admins"}


@pytest.mark.parametrize("stack", STACKS)
def test_a_forged_identity_header_from_outside_is_refused(stack: str) -> None:
    capture, facts = capture_of(stack), platform_of(stack).front_door
    assert facts is not None
    # No token: denied before any UI, whatever identity it claims.
    assert gateway_decision(capture, "/grafana/", FORGED, None) == ("deny", {})
    # A token from an issuer the gateway does not trust is no token.
    assert gateway_decision(capture, "/grafana/", FORGED, {"iss": "https://evil.example.com", "claims": {}})[0] == \
        "deny"
    # A verified token: the headers are the token's claims, never what the client sent.
    claims = {facts.username_claim: "ada@example.com", facts.groups_claim: ["demo-read"]}
    decision, delivered = gateway_decision(capture, "/grafana/", FORGED, {"iss": facts.issuer, "claims": claims})
    assert decision == "allow"
    assert delivered[USERID_HEADER] == "ada@example.com" and delivered[GROUPS_HEADER] == "demo-read"
    # Sign-in paths stay open (the browser must reach the sign-in), and reach no UI.
    assert gateway_decision(capture, "/oauth2/callback", FORGED, None)[0] == "ext-authz"


def test_the_evaluator_lets_a_forgery_through_without_the_deny_policy() -> None:
    """The refusal above comes from the rendered DENY policy: without it the forged header would reach the UI."""
    capture = capture_of("onprem-lab")
    kept = tuple(r for r in capture.resources if "istio-ingressgateway-require-jwt" not in r.name)
    decision, delivered = gateway_decision(Capture(capture.stack, capture.project, kept, capture.outputs,
                                                   capture.charts, capture.kustomizations),
                                           "/grafana/", FORGED, None)
    assert decision != "deny" and delivered[USERID_HEADER] == "admin@example.com"


# --- forged identity headers from inside: only the gateway reaches a UI's pods ------------------------------------

def ingress_allowed(policies: list[Obj], namespace: str, pod_labels: dict[str, str], port: int,
                    peer_namespace: Obj, peer_labels: dict[str, str]) -> bool:
    """NetworkPolicy semantics for ingress to a pod: unisolated when no policy of its namespace selects it for
    Ingress; otherwise allowed when some rule of a selecting policy admits the peer on the port."""
    selecting = [p for p in policies if _meta(p)[0] == namespace
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and matches_selector(p["spec"].get("podSelector"), pod_labels)]
    if not selecting:
        return True
    ns_labels = _labels(peer_namespace)

    def admits(peer: Obj) -> bool:
        if "ipBlock" in peer:
            return True
        in_ns = (matches_selector(peer["namespaceSelector"], ns_labels) if "namespaceSelector" in peer
                 else _meta(peer_namespace)[1] == namespace)
        return in_ns and matches_selector(peer.get("podSelector"), peer_labels)

    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = [p.get("port") for p in rule.get("ports", [])]
            if (not ports or port in ports) and (not rule.get("from") or any(admits(p) for p in rule["from"])):
                return True
    return False


def _namespace(capture: Capture, name: str) -> Obj:
    found = [ns for ns in kube_objects(capture, "Namespace") if _meta(ns)[1] == name]
    labels = {**(_labels(found[0]) if found else {}), NAME_LABEL: name}  # set by the API server
    return {"metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize("stack", STACKS)
def test_a_team_pod_cannot_reach_grafana_around_the_gateway(stack: str) -> None:
    capture = capture_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    teams = [ns for ns in kube_objects(capture, "Namespace") if TEAM_LABEL in _labels(ns)]
    assert teams
    grafana = (MONITORING.namespace, GRAFANA_POD_LABELS, GRAFANA_PORT)
    for team in teams:
        team_ns = _namespace(capture, _meta(team)[1])
        assert not ingress_allowed(policies, *grafana, team_ns, {"app": "trainer"}), _meta(team)
        # Wearing the gateway's labels does not help: the policy names the gateway's namespace too.
        assert not ingress_allowed(policies, *grafana, team_ns, dict(GATEWAY_POD_LABELS))
    assert ingress_allowed(policies, *grafana, _namespace(capture, ISTIO.namespace), dict(GATEWAY_POD_LABELS))


def test_without_its_network_policy_grafana_is_open_to_team_pods() -> None:
    capture = capture_of("onprem-lab")
    policies = [p for p in kube_objects(capture, "NetworkPolicy") if _meta(p)[1] != "allow-gateway-to-grafana"]
    assert ingress_allowed(policies, MONITORING.namespace, GRAFANA_POD_LABELS, GRAFANA_PORT,
                           _namespace(capture, "vision"), {"app": "trainer"})


# --- training pods never get a sidecar ----------------------------------------------------------------------------

def injected(webhooks: list[Obj], namespace: Obj, pod_labels: dict[str, str]) -> bool:
    return any(matches_selector(hook.get("namespaceSelector"), _labels(namespace))
               and matches_selector(hook.get("objectSelector"), pod_labels) for hook in webhooks)


@pytest.mark.parametrize("stack", STACKS)
def test_team_namespaces_and_training_pods_are_outside_injection(stack: str) -> None:
    capture = capture_of(stack)
    hooks = [h for c in kube_objects(capture, "MutatingWebhookConfiguration") if _meta(c)[1] == "istio-sidecar-injector"
             for h in c["webhooks"]]
    assert len(hooks) == 4
    for ns in kube_objects(capture, "Namespace"):
        labels = _labels(ns)  # istio-system says `disabled`; only Pipelines' namespace opts in (where installed)
        if _meta(ns)[1] == PIPELINES.namespace and platform_of(stack).pipelines is not None:
            assert TEAM_LABEL not in labels and labels.get("istio-injection") == "enabled"
            continue
        assert labels.get("istio-injection") in (None, "disabled") and "istio.io/rev" not in labels, _meta(ns)
    teams = [_namespace(capture, _meta(ns)[1]) for ns in kube_objects(capture, "Namespace")
             if TEAM_LABEL in _labels(ns)]
    # Even a pod that asks for a sidecar gets none in a team namespace.
    for team in teams:
        for labels in ({}, {"sidecar.istio.io/inject": "true"}, {"istio.io/rev": "default"}):
            assert not injected(hooks, team, labels), (_meta(team), labels)
    # No pod template of any object (the runtimes' JobSet templates, Kueue's and the Trainer's own Deployments)
    # asks for a sidecar either.
    templates = [t for obj in kube_objects(capture) for t in pod_templates(obj["kind"], obj)]
    assert any(obj["kind"] == "ClusterTrainingRuntime" for obj in kube_objects(capture))
    assert templates and all((t.get("metadata") or {}).get("labels", {}).get("sidecar.istio.io/inject") != "true"
                             for t in templates)


def test_a_namespace_labelled_for_injection_would_be_injected() -> None:
    hooks = [h for c in kube_objects(capture_of("local"), "MutatingWebhookConfiguration")
             if _meta(c)[1] == "istio-sidecar-injector" for h in c["webhooks"]]
    labelled = {"metadata": {"name": "x", "labels": {"istio-injection": "enabled"}}}
    assert injected(hooks, labelled, {})
    assert not injected(hooks, {"metadata": {"name": "x", "labels": {"istio-injection": "enabled",
                                                                      TEAM_LABEL: "x"}}}, {})


# --- needs ----------------------------------------------------------------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def _drop_site(capability: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["cluster"]["existing"]["provides"].remove(capability)
    return edit


def _drop_door(capability: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["frontDoor"]["provides"].remove(capability)
    return edit


@pytest.mark.parametrize(("stack", "edit", "capability", "words"), [
    ("onprem-lab", _drop_site("load-balancer"), "load-balancer", ["istio", "LoadBalancer", "cluster.existing"]),
    ("onprem-lab", _drop_door("dns"), "dns", ["ml.lab.example.com", "frontDoor.provides"]),
    ("aws-prod", _drop_door("acme-http01"), "acme-http01", ["cert-manager", "http01", "frontDoor.provides"]),
    ("gcp-prod", _drop_door("dns"), "dns", ["frontDoor.provides"]),
])
def test_each_front_door_need_unmet_is_one_finding(stack: str, edit: Edit, capability: str, words: list[str]) -> None:
    raw = raw_platform(stack)
    edit(raw)
    findings = check_prerequisites(Context(validate(raw, stack), Capture(stack, "trainyard", (), {}), None))
    assert [f.subject for f in findings] == [capability]
    line = findings[0].line()
    assert line.startswith(f"[error] prerequisites: {capability}: needed by ") and all(w in line for w in words), line
    restored = check_prerequisites(Context(platform_of(stack), Capture(stack, "trainyard", (), {}), None))
    assert restored == []


def test_a_laptop_gateway_needs_no_load_balancer_and_localhost_no_record() -> None:
    needs = {n.capability for n in platform_of("local").prerequisites.needs}
    assert "load-balancer" not in needs and "dns" in needs and platform_of("local").prerequisites.unmet() == ()
    raw = raw_platform("local")
    raw["frontDoor"]["host"] = "ml.example.com"
    assert [n.capability for n in validate(raw, "local").prerequisites.unmet()] == ["dns"]


# --- secrets: upstream placeholders are never deployed ---------------------------------------------------------------

@pytest.mark.parametrize("value", sorted(identity.PLACEHOLDERS))
def test_an_upstream_placeholder_is_refused(value: str) -> None:
    facts = platform_of("onprem-lab").front_door
    assert facts is not None
    with pytest.raises(SpecError) as error:
        identity.oauth2_proxy_secret(facts, value)
    assert str(error.value).startswith(f"{LDAP_BIND_PASSWORD_KEY}: holds a placeholder")
    assert identity.placeholder_problem("k", "").startswith("is empty")  # type: ignore[union-attr]
    assert identity.placeholder_problem("k", f"ada: {value}") is not None


def test_a_static_user_without_a_hash_is_refused() -> None:
    facts = platform_of("local").front_door
    assert facts is not None
    good = "engineer: $2y$12$abcdefghijklmnopqrstuv\nanalyst: $2y$12$bcdefghijklmnopqrstuvw\n"
    _, passwords = identity.dex_secrets(facts, good)
    assert sorted(passwords) == ["DEX_HASH_ANALYST", "DEX_HASH_ENGINEER"]
    with pytest.raises(SpecError, match="no hash for analyst"):
        identity.dex_secrets(facts, "engineer: $2y$12$abcdefghijklmnopqrstuv\n")


def _run_with_secret(value: str) -> Capture:
    config = {PLATFORM_KEY: raw_platform("onprem-lab"), LDAP_BIND_PASSWORD_KEY: value}
    return engine.run("onprem-lab", config)


def test_the_program_refuses_a_placeholder_and_deploys_no_placeholder_otherwise() -> None:
    with pytest.raises(Exception, match="holds a placeholder"):
        _run_with_secret("12341234")
    capture = _run_with_secret("a-bind-password-of-our-own")
    secrets = {_meta(s) for s in kube_objects(capture, "Secret")}
    assert {("auth", "dex-oidc-client"), ("auth", "dex-passwords"), ("oauth2-proxy", "oauth2-proxy-credentials")} <= \
        secrets
    text = repr(kube_objects(capture))
    assert not [p for p in identity.PLACEHOLDERS if p in text]
    # upstream's base64 client secret and its static user are gone too
    assert "cFVCbkJPWTgwU25YZ2ppYlRZTTlaV056WTJ4cmVOR1Fvaw==" not in text and "user@example.com" not in text


def test_a_dns01_certificate_names_the_cloud_s_dns() -> None:
    issuer = next(o for o in kube_objects(capture_of("gcp-prod"), "ClusterIssuer"))
    solver = issuer["spec"]["acme"]["solvers"][0]
    assert solver["dns01"] == {"cloudDNS": {"project": "trainyard-prod-ml"}}
    assert solver["selector"] == {"dnsNames": ["ml.example.com"]}
    raw = raw_platform("azure-prod")
    raw["frontDoor"]["tls"] = {"acme": {"email": "ops@example.com", "solver": "dns01", "dnsZone": "ml-example-com"}}

    platform = validate(raw, "azure-prod")
    assert platform.front_door is not None
    with pytest.raises(SpecError, match=r"frontDoor\.tls\.acme\.solver: dns01 .* not on a aks cluster"):
        cluster_issuer(platform, platform.front_door)
