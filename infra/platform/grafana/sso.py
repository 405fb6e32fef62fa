"""Grafana's sign-in behind the front door (docs/front-door.md, "Grafana"): Grafana 13.2.0 (the grafana subchart
12.11.1 of kube-prometheus-stack 88.5.3) takes the person from the ID token the gateway verified, and no password
works any more.

- `auth.jwt` reads the `Authorization: Bearer <ID token>` the gateway forwards (its RequestAuthentication keeps the
  original token, and for a browser oauth2-proxy puts the session's ID token there) and verifies it again itself:
  the signature against the issuer's keys, the issuer and the audience (oauth2-proxy's client). Grafana reads keys
  only over https (outside its development mode): Dex's at `https://<host>/dex/keys` (the gateway serves /dex/
  without sign-in), an OIDC provider's at its `jwksUri`. Where the host's certificate comes from the corporate CA
  (frontDoor.tls.ca), cert-manager issues Grafana a certificate of the same issuer (GRAFANA_CA_SECRET, made by the
  front door) only for its `ca.crt`, which Grafana trusts for the keys. A header made up by a client carries no
  signature Grafana accepts, and Grafana reads no identity header (no `auth.proxy`), so the `kubeflow-userid` a pod
  could forge means nothing to it. (A Grafana pod must resolve the host to the gateway: on a laptop's kind cluster
  through `hostAliases` to the gateway's fixed address, grafana/orgs.py.)
- Who gets in: the token's groups decide (`role_attribute_path`, strict). `identity.platformAdmins` are Grafana
  server admins; a team's groups are Viewers in the team's own organization (grafana/orgs.py); anyone else gets no
  role and is refused (HTTP 403).
- The login form, basic authentication, anonymous access, sign-up and organization creation are off. The chart's
  admin Secret stays (the chart creates its bootstrap user from it) but no HTTP request can present it: the
  gateway refuses a request whose Authorization is not a verified Bearer token, and Grafana accepts no Basic
  credentials at all.
- Without basic authentication the chart's sidecars cannot call Grafana's reload API: the datasources are listed
  once by an init container before Grafana starts (they are the chart's own, fixed at install), and the dashboard
  sidecar keeps writing its folder, which Grafana's dashboard provider re-reads on its own.

Values go in as environment (`GF_<SECTION>_<KEY>`, the grafana chart's free-form `env`), as GF_SERVER_ROOT_URL
does: the chart's grafana.ini defaults declare none of these sections.
"""

from __future__ import annotations

import json
from typing import Any

from infra.platform.frontdoor_identity import CLIENT_ID
from infra.spec import SpecError
from infra.spec.frontdoor.web_access import FrontDoorFacts

ADMIN_ROLE = "GrafanaAdmin"  # Grafana's role_attribute_path value for a server admin (with Admin in the org)
TOKEN_HEADER = "Authorization"  # Grafana strips the `Bearer ` prefix (pkg/services/authn/clients/jwt.go)
JWKS_FIELD = "frontDoor.identityProvider.oidc.jwksUri"
GRAFANA_CA_SECRET = "grafana-front-door-ca"  # in Grafana's namespace: the corporate CA's ca.crt (frontdoor.py)
CA_DIR = "/etc/grafana/front-door-ca"


def jwks_url(facts: FrontDoorFacts) -> str:
    """Where Grafana reads the issuer's keys: Dex's through the host, or the OIDC provider's declared keys."""
    if facts.dex:
        return f"{facts.issuer}/keys"
    oidc = facts.spec.identity_provider.oidc
    assert oidc is not None
    if oidc.jwks_uri is None:
        raise SpecError(JWKS_FIELD, "Grafana verifies the ID token itself and reads no discovery document: give the "
                        f"`jwks_uri` of {oidc.issuer_url.rstrip('/')}/.well-known/openid-configuration")
    return oidc.jwks_uri


def audience(facts: FrontDoorFacts) -> str:
    """The ID token's audience: oauth2-proxy's client, at Dex or at the OIDC provider."""
    oidc = facts.spec.identity_provider.oidc
    return oidc.client_id if oidc is not None else CLIENT_ID


def _literal(text: str) -> str:
    """A JMESPath raw string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def role_path(facts: FrontDoorFacts) -> str:
    """The JMESPath Grafana evaluates on the token's claims: GrafanaAdmin for a member of a platform-admin group,
    otherwise no direct role (then only org_mapping places the person; with none, role_attribute_strict refuses).
    Empty: nobody gets a direct role."""
    admins = sorted(set(facts.platform_admins))
    if not admins:
        return ""
    # A quoted identifier (claim names may hold dashes or dots); no claim is no group, not an evaluation error.
    claim = f"({json.dumps(facts.groups_claim)} || `[]`)"
    tests = " || ".join(f"contains({claim}, {_literal(group)})" for group in admins)
    return f"({tests}) && {_literal(ADMIN_ROLE)}"


def trusts_corporate_ca(facts: FrontDoorFacts) -> bool:
    """Grafana reads Dex's keys through the host, whose certificate the corporate CA signed."""
    return facts.dex and facts.spec.tls is not None and facts.spec.tls.ca is not None


def sign_in_env(facts: FrontDoorFacts) -> dict[str, str]:
    """Grafana's settings for signing in from the gateway's token, as environment variables."""
    ca = {"GF_AUTH_JWT_TLS_CLIENT_CA": f"{CA_DIR}/ca.crt"} if trusts_corporate_ca(facts) else {}
    return {**ca,
        "GF_AUTH_JWT_ENABLED": "true",
        "GF_AUTH_JWT_HEADER_NAME": TOKEN_HEADER,
        "GF_AUTH_JWT_USERNAME_CLAIM": facts.username_claim,
        "GF_AUTH_JWT_JWK_SET_URL": jwks_url(facts),
        "GF_AUTH_JWT_EXPECT_CLAIMS": json.dumps({"iss": facts.issuer, "aud": audience(facts)}, sort_keys=True),
        "GF_AUTH_JWT_AUTO_SIGN_UP": "true",
        "GF_AUTH_JWT_ROLE_ATTRIBUTE_PATH": role_path(facts),
        "GF_AUTH_JWT_ROLE_ATTRIBUTE_STRICT": "true",
        "GF_AUTH_JWT_ALLOW_ASSIGN_GRAFANA_ADMIN": "true",
        "GF_AUTH_DISABLE_LOGIN_FORM": "true",
        "GF_AUTH_DISABLE_SIGNOUT_MENU": "true",  # the session is the gateway's: signing out of Grafana ends nothing
        "GF_AUTH_BASIC_ENABLED": "false",
        "GF_AUTH_ANONYMOUS_ENABLED": "false",
        "GF_USERS_ALLOW_SIGN_UP": "false",
        "GF_USERS_ALLOW_ORG_CREATE": "false",
    }


def grafana_values(facts: FrontDoorFacts) -> dict[str, Any]:
    """The grafana subchart's values: the sign-in environment, the sidecars without Grafana's reload API (it needs
    basic authentication), the corporate CA where Grafana needs it."""
    values: dict[str, Any] = {
        "env": sign_in_env(facts),
        "sidecar": {"dashboards": {"skipReload": True},
                    "datasources": {"skipReload": True, "initDatasources": True, "watchMethod": "LIST"}}}
    if trusts_corporate_ca(facts):
        values["extraSecretMounts"] = [{"name": "front-door-ca", "secretName": GRAFANA_CA_SECRET,
                                        "mountPath": CA_DIR, "readOnly": True}]
    return values
