"""The gateway's token rules on the rendered objects (infra/platform/frontdoor_identity.py): CI's ServiceAccount
tokens accepted for the teams' `trainyard-ci` accounts only, with the issuer of each cluster kind; a client-sent
identity header refused when the verified token lacks the claim it would come from; the IngressClass the ACME
http01 solver needs."""

from __future__ import annotations

from typing import Any

import pytest

from infra.checks.context import Context
from infra.checks.prerequisites import check_ingress_class
from infra.components import GROUPS_HEADER, ISTIO, USERID_HEADER
from infra.offline.engine import Capture
from infra.platform import frontdoor_identity as identity
from infra.platform.frontdoor import INGRESS_CLASS, INGRESS_CONTROLLER
from infra.spec import validate
from infra.spec.frontdoor.web_access import IN_CLUSTER_ISSUER, JWKS_PROXY_URI
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform
from tests.test_frontdoor import _gateway_policies, _path_matches
from tests.test_machine_issuer import ci_issuer

Obj = dict[str, Any]


def _principal_matches(patterns: list[str], principal: str | None) -> bool:
    """Istio's request principal match: exact, `prefix*`, `*suffix`, `*` any present principal."""
    if principal is None:
        return False
    return any(p == "*" or principal == p or (p.endswith("*") and principal.startswith(p[:-1]))
               or (p.startswith("*") and principal.endswith(p[1:])) for p in patterns)


def _present(value: Any) -> bool:
    return value not in (None, "", [])


def _condition(condition: Obj, headers: dict[str, str], claims: dict[str, Any]) -> bool:
    """`when` over request.headers[...] and request.auth.claims[...], with values/notValues ["*"] (present) or, on
    a claim, a list of values (a list claim matches when one of its items is listed, as Istio's list match: the
    team registries' policies, tests/test_model_registry.py)."""
    key = condition["key"]
    name = key[key.index("[") + 1:-1]
    value = headers.get(name) if key.startswith("request.headers") else claims.get(name)
    listed = condition["values"] if "values" in condition else condition["notValues"]
    if listed == ["*"]:
        hit = _present(value)
    else:
        assert key.startswith("request.auth.claims")
        hit = any(item in listed for item in (value if isinstance(value, list) else [value]))
    return hit if "values" in condition else not hit


def _rule_matches(rule: Obj, path: str, principal: str | None, headers: dict[str, str], claims: dict[str, Any],
                  method: str = "GET") -> bool:
    for entry in rule.get("from", []):
        source = entry["source"]
        if "requestPrincipals" in source and not _principal_matches(source["requestPrincipals"], principal):
            return False
        if "notRequestPrincipals" in source and ((principal is None and source["notRequestPrincipals"] != ["*"])
                                                 or _principal_matches(source["notRequestPrincipals"], principal)):
            return False
    for entry in rule.get("to", []):
        operation = entry["operation"]
        if _path_matches(operation.get("notPaths", []), path) or method in operation.get("notMethods", []):
            return False
        if "paths" in operation and not _path_matches(operation["paths"], path):
            return False
    return all(_condition(c, headers, claims) for c in rule.get("when", []))


def gateway(capture: Capture, headers: dict[str, str], token: Obj | None, path: str = "/grafana/",
            skip: str = "") -> tuple[str, dict[str, str]]:
    """What the gateway does: Envoy's jwt_authn (issuer, audiences, claims written to headers), then every DENY
    policy (`skip`: a policy left out, to show a refusal is its). ('reject' | 'deny' | 'allow', headers)."""
    authentications, policies = _gateway_policies(capture)
    rules = [r for a in authentications for r in a["spec"]["jwtRules"]]
    claims: dict[str, Any] = {}
    principal = None
    delivered = dict(headers)
    if token is not None:
        rule = next((r for r in rules if r["issuer"] == token["iss"]), None)
        if rule is None or ("audiences" in rule and token.get("aud") not in rule["audiences"]):
            return "reject", {}  # a token no rule verifies: Envoy answers 401
        claims = token
        principal = f"{token['iss']}/{token['sub']}"
        for mapping in rule["outputClaimToHeaders"]:
            if _present(token.get(mapping["claim"])):
                value = token[mapping["claim"]]
                delivered[mapping["header"]] = ",".join(value) if isinstance(value, list) else str(value)
    for policy in policies:
        spec = policy["spec"]
        if spec.get("action") != "DENY" or policy["metadata"]["name"] == skip:
            continue
        if any(_rule_matches(rule, path, principal, delivered, claims) for rule in spec.get("rules", [])):
            return "deny", {}
    return "allow", delivered


def _ci_token(stack: str, namespace: str, account: str = "trainyard-ci", **extra: Any) -> Obj:
    return {"iss": ci_issuer(stack), "sub": f"system:serviceaccount:{namespace}:{account}",
            "aud": identity.MACHINE_AUDIENCE, **extra}


FORGED_GROUPS = {GROUPS_HEADER: "platform-admins"}


@pytest.mark.parametrize("stack", STACKS)
def test_ci_s_token_is_accepted_and_names_its_account(stack: str) -> None:
    capture = capture_of(stack)
    ns = platform_of(stack).front_door.team_namespaces[0]  # type: ignore[union-attr]
    decision, delivered = gateway(capture, {USERID_HEADER: "admin@example.com"}, _ci_token(stack, ns))
    assert decision == "allow" and delivered[USERID_HEADER] == f"system:serviceaccount:{ns}:trainyard-ci"
    # Another account of the same namespace (a pod's `default`), or a token for another audience: refused.
    assert gateway(capture, {}, _ci_token(stack, ns, "default"))[0] == "deny"
    assert gateway(capture, {}, {**_ci_token(stack, ns), "aud": "sts.amazonaws.com"})[0] == "reject"
    # A CI account of a namespace that is no team's: refused.
    assert gateway(capture, {}, _ci_token(stack, "kube-system"))[0] == "deny"


@pytest.mark.parametrize("stack", STACKS)
def test_a_forged_groups_header_with_a_token_without_groups_is_refused(stack: str) -> None:
    capture, facts = capture_of(stack), platform_of(stack).front_door
    assert facts is not None
    ns = facts.team_namespaces[0]
    assert gateway(capture, FORGED_GROUPS, _ci_token(stack, ns))[0] == "deny"
    person = {"iss": facts.issuer, "sub": "ada", facts.username_claim: "ada@example.com"}
    assert gateway(capture, FORGED_GROUPS, person)[0] == "deny"
    assert gateway(capture, {USERID_HEADER: "root@example.com"}, {"iss": facts.issuer, "sub": "ada"})[0] == "deny"
    # With the claim, the token's groups replace the forged ones; without any header, nothing is refused.
    decision, delivered = gateway(capture, FORGED_GROUPS, {**person, facts.groups_claim: ["demo-read"]})
    assert decision == "allow" and delivered[GROUPS_HEADER] == "demo-read"
    assert gateway(capture, {}, person)[0] == "allow"
    # The refusal is the header guard's: without it the forged groups would reach the UI.
    decision, delivered = gateway(capture, FORGED_GROUPS, person, skip=identity.HEADER_GUARD)
    assert decision == "allow" and delivered[GROUPS_HEADER] == "platform-admins"


def test_the_issuer_of_each_cluster_kind() -> None:
    local = platform_of("local").front_door.machine_issuer  # type: ignore[union-attr]
    assert local is not None and (local.issuer, local.jwks_uri) == (IN_CLUSTER_ISSUER, JWKS_PROXY_URI)
    gke = platform_of("gcp-prod").front_door.machine_issuer  # type: ignore[union-attr]
    assert gke is not None and gke.issuer == ("https://container.googleapis.com/v1/projects/trainyard-prod-ml/"
                                              "locations/us-central1/clusters/trainyard-prod") and gke.jwks_uri is None
    for stack in ("aws-prod", "azure-prod"):  # the created cluster's output (tests/test_machine_issuer.py)
        issuer = platform_of(stack).front_door.machine_issuer  # type: ignore[union-attr]
        assert issuer is not None and (issuer.issuer, issuer.jwks_uri, issuer.proxied) == (None, None, False)
    lab = platform_of("onprem-lab").front_door.machine_issuer  # type: ignore[union-attr]
    assert lab is not None and lab.source == "declared in frontDoor.serviceAccountIssuer"
    assert lab.proxied  # kubeadm's in-cluster issuer: its keys through the proxy
    proxies = [d for d in kube_objects(capture_of("onprem-lab"), "Deployment")
               if d["metadata"]["name"] == "cluster-jwks-proxy"]
    assert len(proxies) == 1 and ":" in proxies[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert not [d for d in kube_objects(capture_of("gcp-prod"), "Deployment")
                if d["metadata"]["name"] == "cluster-jwks-proxy"]


def test_an_issuer_that_is_not_https_is_refused() -> None:
    raw = raw_platform("aws-prod")
    raw["frontDoor"]["serviceAccountIssuer"] = {"issuer": "http://oidc.eks.us-east-1.amazonaws.com/id/X"}
    with pytest.raises(Exception, match="serviceAccountIssuer"):
        validate(raw, "aws-prod")


# --- the IngressClass cert-manager's http01 solver Ingress names ------------------------------------------------

def test_the_http01_solver_s_ingress_class_exists() -> None:
    objects = kube_objects(capture_of("aws-prod"))
    issuer = next(o for o in objects if o["kind"] == "ClusterIssuer")
    assert issuer["spec"]["acme"]["solvers"][0]["http01"]["ingress"]["ingressClassName"] == INGRESS_CLASS
    classes = [o for o in objects if o["kind"] == "IngressClass"]
    assert [(c["metadata"]["name"], c["spec"]["controller"]) for c in classes] == [(INGRESS_CLASS, INGRESS_CONTROLLER)]
    assert check_ingress_class(Context(platform_of("aws-prod"), capture_of("aws-prod"), None)) == []
    assert not [o for o in kube_objects(capture_of("onprem-lab")) if o["kind"] == "IngressClass"]  # ca, no solver


def test_a_missing_ingress_class_is_a_finding() -> None:
    capture = capture_of("aws-prod")
    kept = tuple(r for r in capture.resources if "front-door-ingress-class" not in r.name)
    without = Capture(capture.stack, capture.project, kept, capture.outputs, capture.charts, capture.kustomizations)
    findings = check_ingress_class(Context(platform_of("aws-prod"), without, None))
    assert len(findings) == 1 and INGRESS_CLASS in findings[0].message and ISTIO.name in findings[0].message
