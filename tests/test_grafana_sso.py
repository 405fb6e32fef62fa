"""Grafana's sign-in behind the front door (infra/platform/grafana/sso.py), on the rendered objects: the identity
comes from the verified token only, platform admins get in as Grafana admins (team members' organizations:
tests/test_grafana_orgs.py), no password works, and forged headers are refused at the gateway and ignored by Grafana."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jmespath
import pytest

from infra.components import GATEWAY_POD_LABELS, GROUPS_HEADER, ISTIO, MONITORING, USERID_HEADER
from infra.platform.frontdoor import GRAFANA_POD_LABELS, GRAFANA_PORT
from infra.platform.grafana.sso import ADMIN_ROLE, GRAFANA_CA_SECRET, JWKS_FIELD, jwks_url, role_path
from infra.spec import SpecError
from tests.conftest import STACKS, capture_of, kube_objects, platform_of
from tests.test_frontdoor import FORGED, _namespace, gateway_decision, ingress_allowed

Obj = dict[str, Any]
DEX_STACKS = ["local", "onprem-lab", "gcp-prod", "hybrid-burst"]


def _grafana(stack: str) -> Obj:
    """The Grafana behind the front door (hybrid-burst: the core's; a worker's has no front door)."""
    found = [d for d in kube_objects(capture_of(stack), "Deployment")
             if d["metadata"]["name"] == "kube-prometheus-stack-grafana"
             and any(e["name"] == "GF_AUTH_JWT_ENABLED" for c in d["spec"]["template"]["spec"]["containers"]
                     for e in c.get("env", []))]
    assert len(found) == 1
    return found[0]


def _env(stack: str) -> dict[str, str]:
    container = next(c for c in _grafana(stack)["spec"]["template"]["spec"]["containers"] if c["name"] == "grafana")
    return {e["name"]: e.get("value", "") for e in container["env"] if "value" in e}


def _role(stack: str, claims: dict[str, Any]) -> Any:
    """What Grafana's role_attribute_path gives for these claims (Grafana evaluates it with JMESPath)."""
    return jmespath.search(_env(stack)["GF_AUTH_JWT_ROLE_ATTRIBUTE_PATH"], claims)


@pytest.mark.parametrize("stack", STACKS)
def test_grafana_signs_in_from_the_verified_token_and_no_password_works(stack: str) -> None:
    facts = platform_of(stack).front_door
    assert facts is not None
    env = _env(stack)
    assert env["GF_AUTH_JWT_ENABLED"] == "true" and env["GF_AUTH_JWT_HEADER_NAME"] == "Authorization"
    assert env["GF_AUTH_JWT_USERNAME_CLAIM"] == facts.username_claim
    # The token is checked against the front door's issuer, by keys read over https (Grafana refuses http).
    assert json.loads(env["GF_AUTH_JWT_EXPECT_CLAIMS"])["iss"] == facts.issuer
    assert env["GF_AUTH_JWT_JWK_SET_URL"].startswith("https://")
    # No password, no form, no anonymous or header-trusting way in.
    assert env["GF_AUTH_BASIC_ENABLED"] == "false" and env["GF_AUTH_DISABLE_LOGIN_FORM"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and env["GF_AUTH_JWT_ROLE_ATTRIBUTE_STRICT"] == "true"
    # The one header-trusting path is the bootstrap's, from inside the pod only (tests/test_grafana_orgs.py).
    assert env["GF_AUTH_PROXY_WHITELIST"] == "127.0.0.1"
    assert env["GF_AUTH_PROXY_HEADER_NAME"] not in (USERID_HEADER, GROUPS_HEADER)
    # The chart's sidecars no longer hold a reload URL they could only use with the admin password.
    pod = _grafana(stack)["spec"]["template"]["spec"]
    for container in pod["containers"] + pod.get("initContainers", []):
        names = {e["name"] for e in container.get("env", [])}
        assert "REQ_URL" not in names, container["name"]
    init = [c for c in pod.get("initContainers", []) if c["name"].endswith("init-sc-datasources")]
    assert init and {"name": "METHOD", "value": "LIST"} in init[0]["env"]  # lists once and ends: Grafana starts


@pytest.mark.parametrize("stack", STACKS)
def test_platform_admins_are_grafana_admins_and_nobody_else(stack: str) -> None:
    facts = platform_of(stack).front_door
    assert facts is not None
    if not facts.platform_admins:  # local: no platform-admin group declared, so nobody gets a Grafana role
        assert _env(stack)["GF_AUTH_JWT_ROLE_ATTRIBUTE_PATH"] == "" and stack == "local"
        return
    claim = facts.groups_claim
    for admin in facts.platform_admins:
        assert _role(stack, {claim: ["someone-else", admin]}) == ADMIN_ROLE
    team_groups = {g.group for g in facts.grants if g.team}
    assert team_groups
    for group in team_groups - set(facts.platform_admins):
        # No direct role: a team member's only role is in the team's organization (tests/test_grafana_orgs.py).
        assert not isinstance(_role(stack, {claim: [group]}), str), group
    assert not isinstance(_role(stack, {claim: []}), str)
    assert not isinstance(_role(stack, {"other-claim": list(facts.platform_admins)}), str)
    assert not isinstance(_role(stack, {claim: [f"{facts.platform_admins[0]}-x"]}), str)  # exact names only


def test_no_platform_admin_group_means_nobody_gets_a_role() -> None:
    facts = platform_of("onprem-lab").front_door
    assert facts is not None
    assert role_path(replace(facts, grants=tuple(g for g in facts.grants if g.team))) == ""


def test_a_group_name_cannot_break_out_of_the_expression() -> None:
    facts = platform_of("onprem-lab").front_door
    assert facts is not None
    admin = facts.grants[0]
    tricky = "ops') || `true` || ('"
    path = role_path(replace(facts, grants=(replace(admin, group=tricky, team="", persona="platform-admin"),)))
    assert jmespath.search(path, {"groups": ["anyone"]}) is not ADMIN_ROLE
    assert jmespath.search(path, {"groups": [tricky]}) == ADMIN_ROLE


@pytest.mark.parametrize("stack", DEX_STACKS)
def test_dex_keys_are_read_through_the_host_and_the_corporate_ca_is_trusted(stack: str) -> None:
    facts = platform_of(stack).front_door
    assert facts is not None and facts.spec.tls is not None
    env = _env(stack)
    assert env["GF_AUTH_JWT_JWK_SET_URL"] == f"https://{facts.spec.host}/dex/keys"
    certificates = [c for c in kube_objects(capture_of(stack), "Certificate")
                    if c["metadata"]["namespace"] == MONITORING.namespace]
    if facts.spec.tls.ca is None:
        assert "GF_AUTH_JWT_TLS_CLIENT_CA" not in env and not certificates
        return
    assert [c["spec"]["secretName"] for c in certificates] == [GRAFANA_CA_SECRET]
    volumes = {v["name"]: v for v in _grafana(stack)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["front-door-ca"]["secret"]["secretName"] == GRAFANA_CA_SECRET
    assert env["GF_AUTH_JWT_TLS_CLIENT_CA"].endswith("/ca.crt")


def test_an_oidc_provider_without_its_keys_is_refused_naming_the_field() -> None:
    facts = platform_of("azure-prod").front_door
    assert facts is not None and facts.spec.identity_provider.oidc is not None
    assert jwks_url(facts) == facts.spec.identity_provider.oidc.jwks_uri
    oidc = facts.spec.identity_provider.oidc.model_copy(update={"jwks_uri": None})
    bare = replace(facts, spec=facts.spec.model_copy(update={
        "identity_provider": facts.spec.identity_provider.model_copy(update={"oidc": oidc})}))
    with pytest.raises(SpecError, match=JWKS_FIELD.replace(".", r"\.")):
        jwks_url(bare)


@pytest.mark.parametrize("stack", ["onprem-lab", "aws-prod"])
def test_a_password_or_forged_header_never_reaches_grafana(stack: str) -> None:
    capture = capture_of(stack)
    basic = {"authorization": "Basic YWRtaW46YWRtaW4="}
    # From outside: Basic credentials are no verified token, so the gateway refuses them before Grafana.
    assert gateway_decision(capture, "/grafana/", basic, None) == ("deny", {})
    assert gateway_decision(capture, "/grafana/api/org", {**basic, **FORGED}, None) == ("deny", {})
    # From inside: only the gateway's pods (and Prometheus' scrape) reach Grafana's port.
    policies = kube_objects(capture, "NetworkPolicy")
    grafana = (MONITORING.namespace, GRAFANA_POD_LABELS, GRAFANA_PORT)
    assert ingress_allowed(policies, *grafana, _namespace(capture, ISTIO.namespace), dict(GATEWAY_POD_LABELS))
    team = next(t.namespaces[0] for t in platform_of(stack).teams)
    assert not ingress_allowed(policies, *grafana, _namespace(capture, team), {"app": "curl"})
