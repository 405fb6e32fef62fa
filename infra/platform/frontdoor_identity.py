"""Sign-in for the front door: oauth2-proxy's and Dex's configuration from the spec's facts, their Secrets from
Pulumi secret config, and how the gateway turns a verified token into the identity headers.

Upstream ships placeholder credentials (kubeflow-platform reference, finding 11): the oauth2-proxy Secret's
client and cookie secrets, Dex's `dex-oidc-client` (the same client secret) and `dex-passwords` (the static user
`user@example.com` / `12341234`). All three Secrets are dropped from the build (infra/platform/frontdoor.py) and
replaced by ours, whose values come only from the stack's secret keys:

- the upstream provider's secret: trainyard:oidcClientSecret (oidc, google), trainyard:ldapBindPassword (ldap),
  trainyard:staticUserHashes (a laptop's users' bcrypt hashes);
- the client secret between oauth2-proxy and Dex, and oauth2-proxy's cookie secret, derived from that key (HMAC
  with a fixed label each), so no second secret has to be kept and rotating the key rotates them (sessions end).

A value that is an upstream placeholder is refused when the program reads it (`pulumi up` stops naming the key).
When a key is unset the Secret is not created, so the pods that read it wait instead of running on placeholders.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import pulumi
import yaml

from infra.components import DEX, GATEWAY_POD_LABELS, GROUPS_HEADER, OAUTH2_PROXY, USERID_HEADER
from infra.platform.grafana.bootstrap import HEADER as BOOTSTRAP_HEADER
from infra.spec import SpecError
from infra.spec.frontdoor.web_access import DEX_PATH, OAUTH2_CALLBACK, FrontDoorFacts
from infra.spec.input.keys import STATIC_USER_HASHES_KEY

# Upstream's placeholder values (common/oauth2-proxy/base/kustomization.yaml, common/dex/base): the client secret,
# the cookie secret, the static user's password and its bcrypt hash.
PLACEHOLDERS = frozenset({"pUBnBOY80SnXgjibTYM9ZWNzY2xreNGQok", "7d16fee92f8d11b8940b081b3f8b8acb", "12341234",
                          "$2y$12$4K/VkmDd1q1Orb3xAt82zu8gk7Ad6ReFR4LCP9UeYE90NLiN9Df72"})
CLIENT_ID = "trainyard-front-door"  # oauth2-proxy's client at Dex (oidc, google: the provider's clientId)
DEX_SERVICE = f"http://dex.{DEX.namespace}.svc.cluster.local:5556{DEX_PATH}"  # Dex in the cluster, as upstream calls it
OAUTH2_SECRET = OAUTH2_PROXY.secrets[0]
SESSION_HOURS = 24  # oauth2-proxy's cookie_expire (upstream's): a session's lifetime, and a web binding's longest
# The audience a machine token must be minted for (`kubectl create token trainyard-ci --audience ...`): Pipelines'
# TokenReview audience (KFP common/const.go DefaultTokenReviewAudience), so a token a pod holds for another service
# (a cloud's workload identity, a vault) is not accepted at the gateway.
MACHINE_AUDIENCE = "pipelines.kubeflow.org"
HEADER_GUARD = "deny-unclaimed-identity-headers"  # the gateway's AuthorizationPolicy (header_guard)
DEX_CLIENT_SECRET, DEX_PASSWORDS = DEX.secrets
T = TypeVar("T")


def placeholder_problem(key: str, value: str) -> str | None:
    """Why a secret value may not be used, or None: an upstream placeholder, or empty."""
    if not value.strip():
        return f"is empty: set it with `pulumi config set --secret {key}`"
    for line in [value, *value.splitlines()]:
        if line.strip() in PLACEHOLDERS or any(part.strip().strip("'\"") in PLACEHOLDERS for part in line.split(":")):
            return ("holds a placeholder that ships with the upstream manifests (known to everyone): set a value of "
                    f"your own with `pulumi config set --secret {key}`")
    return None


def checked(key: str, value: str) -> str:
    problem = placeholder_problem(key, value)
    if problem:
        raise SpecError(key, problem)
    return value


def derived(master: str, label: str) -> str:
    """A secret derived from the stack's secret key: 32 hex characters (oauth2-proxy's cookie secret must be 16,
    24 or 32 bytes)."""
    return hmac.new(master.encode(), label.encode(), hashlib.sha256).hexdigest()[:32]


def _static_hashes(text: str) -> dict[str, str]:
    try:
        hashes = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(STATIC_USER_HASHES_KEY, f"is not YAML ({error.__class__.__name__}): give username: "
                        "bcrypt-hash lines") from None
    if not isinstance(hashes, dict) or not all(isinstance(v, str) and v.startswith("$2") for v in hashes.values()):
        raise SpecError(STATIC_USER_HASHES_KEY, "give a mapping of username to bcrypt hash "
                        "(htpasswd -nbBC 12 \"\" PASSWORD | tr -d ':\\n')")
    return {str(k): v for k, v in hashes.items()}


def hash_env(username: str) -> str:
    return "DEX_HASH_" + "".join(ch.upper() if ch.isalnum() else "_" for ch in username)


def dex_config(facts: FrontDoorFacts) -> str:
    """Dex's config.yaml: the issuer at the host's /dex (what the gateway verifies), Kubernetes storage as upstream,
    one static client for oauth2-proxy, and the connector of the spec. Secrets are environment references Dex
    expands ($VAR) from dex-passwords and dex-oidc-client, never values."""
    provider = facts.spec.identity_provider
    config: dict[str, Any] = {
        "issuer": facts.issuer, "storage": {"type": "kubernetes", "config": {"inCluster": True}},
        "web": {"http": "0.0.0.0:5556"}, "logger": {"level": "info", "format": "json"},
        "oauth2": {"skipApprovalScreen": True},
        "staticClients": [{"idEnv": "OIDC_CLIENT_ID", "secretEnv": "OIDC_CLIENT_SECRET", "name": "Trainyard",
                           "redirectURIs": [f"{facts.url}{OAUTH2_CALLBACK}"]}],
    }
    if provider.static_users is not None:
        config["enablePasswordDB"] = True
        config["staticPasswords"] = [{"email": user.email, "username": user.username, "userID": user.username,
                                      "hashFromEnv": hash_env(user.username), "groups": list(user.groups)}
                                     for user in provider.static_users]
    elif provider.ldap is not None:
        ldap = provider.ldap
        settings: dict[str, Any] = {
            "host": ldap.host, "bindDN": ldap.bind_dn, "bindPW": "$LDAP_BIND_PASSWORD",
            "usernamePrompt": "Username",
            "userSearch": {"baseDN": ldap.user_search.base_dn, "username": ldap.user_search.username,
                           "idAttr": ldap.user_search.id_attr, "emailAttr": ldap.user_search.email_attr,
                           "nameAttr": ldap.user_search.name_attr,
                           **({"filter": ldap.user_search.filter} if ldap.user_search.filter else {})},
            "groupSearch": {"baseDN": ldap.group_search.base_dn, "nameAttr": ldap.group_search.name_attr,
                            "userMatchers": [{"userAttr": m.user_attr, "groupAttr": m.group_attr}
                                             for m in ldap.group_search.user_matchers],
                            **({"filter": ldap.group_search.filter} if ldap.group_search.filter else {})}}
        if ldap.tls == "startTLS":
            settings["startTLS"] = True
        if ldap.ca_secret_name:
            settings["rootCA"] = "/etc/dex/ldap-ca/ca.crt"
        config["connectors"] = [{"type": "ldap", "id": "ldap", "name": "Directory", "config": settings}]
    elif provider.google is not None:
        google = provider.google
        config["connectors"] = [{"type": "google", "id": "google", "name": "Google", "config": {
            "clientID": google.client_id, "clientSecret": "$GOOGLE_CLIENT_SECRET",
            "redirectURI": f"{facts.url}{DEX_PATH}/callback", "hostedDomains": list(google.hosted_domains),
            "domainToAdminEmail": {domain: google.admin_email for domain in google.hosted_domains}}}]
    return yaml.safe_dump(config, sort_keys=False)


def oauth2_proxy_config(facts: FrontDoorFacts) -> str:
    """oauth2_proxy.cfg: upstream's (common/oauth2-proxy/base) with the issuer of the spec. With Dex, discovery is
    skipped as upstream does (the browser signs in at the host's /dex, oauth2-proxy redeems at Dex's Service);
    with an OIDC provider, oauth2-proxy discovers it and registers the host's /oauth2/callback. Kept from
    upstream: ext-authz use (`static://200`), Bearer ID token to the gateway, the cookie name and 24 h expiry, PKCE,
    the API routes that get 401 rather than a redirect."""
    lines = {
        "provider": '"oidc"', "oidc_issuer_url": f'"{facts.issuer}"',
        "scope": f'"openid profile email{"" if facts.spec.identity_provider.oidc else " groups"}"',
        "email_domains": '[ "*" ]', "upstreams": '[ "static://200" ]', "skip_auth_routes": f'[ "^{DEX_PATH}/" ]',
        "api_routes": '[ "/api/", "/apis/", "^/ml_metadata" ]',
        "set_authorization_header": "true", "set_xauthrequest": "true",
        "oidc_groups_claim": f'"{facts.groups_claim}"', "oidc_email_claim": f'"{facts.username_claim}"',
        "cookie_name": '"oauth2_proxy_kubeflow"', "cookie_expire": f'"{SESSION_HOURS}h"', "cookie_refresh": "0",
        "code_challenge_method": '"S256"', "redirect_url": f'"{facts.url}{OAUTH2_CALLBACK}"',
        "relative_redirect_url": "false",
    }
    if facts.dex:
        lines.update({"skip_oidc_discovery": "true", "login_url": f'"{DEX_PATH}/auth"',
                      "redeem_url": f'"{DEX_SERVICE}/token"', "oidc_jwks_url": f'"{DEX_SERVICE}/keys"',
                      "prompt": '"none"'})
    return "".join(f"{key} = {value}\n" for key, value in lines.items())


def oauth2_proxy_secret(facts: FrontDoorFacts, master: str) -> dict[str, str]:
    """client-id, client-secret, cookie-secret for oauth2-proxy's Secret (the keys its Deployment reads)."""
    key = facts.secret_keys[0]
    checked(key, master)
    oidc = facts.spec.identity_provider.oidc
    return {"client-id": oidc.client_id if oidc else CLIENT_ID,
            "client-secret": master if oidc else derived(master, "dex-client"),
            "cookie-secret": derived(master, "cookie")}


def dex_secrets(facts: FrontDoorFacts, master: str) -> tuple[dict[str, str], dict[str, str]]:
    """dex-oidc-client (the static client oauth2-proxy signs in with) and dex-passwords (the connector's secret
    or the static users' hashes, as environment variables Dex expands)."""
    key = facts.secret_keys[0]
    checked(key, master)
    provider = facts.spec.identity_provider
    client = {"OIDC_CLIENT_ID": CLIENT_ID, "OIDC_CLIENT_SECRET": derived(master, "dex-client")}
    if provider.static_users is not None:
        hashes = _static_hashes(master)
        missing = [user.username for user in provider.static_users if user.username not in hashes]
        if missing:
            raise SpecError(STATIC_USER_HASHES_KEY, f"no hash for {', '.join(missing)}: add a `username: hash` line")
        return client, {hash_env(user.username): hashes[user.username] for user in provider.static_users}
    if provider.ldap is not None:
        return client, {"LDAP_BIND_PASSWORD": master}
    return client, {"GOOGLE_CLIENT_SECRET": master}


def claim_headers(facts: FrontDoorFacts) -> list[dict[str, str]]:
    """The identity headers the gateway writes from the verified token, replacing whatever the client sent."""
    return [{"header": USERID_HEADER, "claim": facts.username_claim},
            {"header": GROUPS_HEADER, "claim": facts.groups_claim}]


def _bearer_rule(issuer: str, jwks_uri: str | None, headers: list[dict[str, str]]) -> dict[str, Any]:
    rule: dict[str, Any] = {"issuer": issuer, "forwardOriginalToken": True,
                            "fromHeaders": [{"name": "Authorization", "prefix": "Bearer "}],
                            "outputClaimToHeaders": headers}
    if jwks_uri:
        rule["jwksUri"] = jwks_uri
    return rule


def machine_rule(facts: FrontDoorFacts) -> dict[str, Any] | None:
    """The rule for the cluster's ServiceAccount tokens (the vendored `m2m-token-issuer`'s, for this cluster's
    issuer): `sub` (system:serviceaccount:<ns>:<sa>) becomes kubeflow-userid; the groups header is mapped as
    upstream does, and since these tokens carry no groups the header guard refuses any sent with one."""
    issuer = facts.machine_issuer
    if issuer is None:
        return None
    rule = _bearer_rule(issuer.url, issuer.jwks_uri, [{"header": USERID_HEADER, "claim": "sub"},
                                                      {"header": GROUPS_HEADER, "claim": "groups"}])
    return {**rule, "audiences": [MACHINE_AUDIENCE]}


def with_cluster_issuer(facts: FrontDoorFacts, issuer: pulumi.Input[str] | None,
                        build: Callable[[FrontDoorFacts], T]) -> T | pulumi.Output[T]:
    """`build(facts)`; where the facts leave the machine issuer to the cluster (EKS, AKS), `build` runs on the facts
    with `issuer` (the cluster's output, ClusterContract.service_account_issuer) put in, so the gateway trusts the
    issuer of the cluster that exists: a rebuilt cluster's new one with no edit of the stack."""
    machine = facts.machine_issuer
    if machine is None or machine.issuer is not None:
        return build(facts)
    if issuer is None:
        raise ValueError(f"{machine.source}: the cluster layer gave no issuer (ClusterContract.service_account_issuer)")
    return pulumi.Output.from_input(issuer).apply(
        lambda value: build(replace(facts, machine_issuer=replace(machine, issuer=value))))


def jwt_rules(facts: FrontDoorFacts) -> list[dict[str, Any]]:
    """Every token issuer the gateway trusts: the identity provider's, and the cluster's for machines."""
    machine = machine_rule(facts)
    return [request_authentication(facts), *([machine] if machine else [])]


def header_guard(facts: FrontDoorFacts) -> dict[str, Any]:
    """A DENY policy for the gateway. Envoy writes an identity header only from a claim the token carries, so a
    verified token without that claim (a ServiceAccount token has no `groups`; an OIDC provider may omit it for a
    user in no group) would let a client-sent header through: such a request is refused. So is Grafana's bootstrap
    header (grafana/orgs.py). Machine tokens are accepted only for the teams' CI accounts: any other ServiceAccount
    of the cluster is refused here."""
    rules = [{"from": [{"source": {"requestPrincipals": [f"{rule['issuer']}/*"]}}],
              "when": [{"key": f"request.headers[{mapping['header']}]", "values": ["*"]},
                       {"key": f"request.auth.claims[{mapping['claim']}]", "notValues": ["*"]}]}
             for rule in jwt_rules(facts) for mapping in rule["outputClaimToHeaders"]]
    # Grafana's bootstrap header is for its own pod (accepted from 127.0.0.1 only): nobody sends it from outside.
    rules.append({"when": [{"key": f"request.headers[{BOOTSTRAP_HEADER.lower()}]", "values": ["*"]}]})
    issuer = facts.machine_issuer
    if issuer is not None:
        accounts = [f"{issuer.url}/system:serviceaccount:{ns}:{sa}" for ns, sa in facts.machine_accounts]
        rules.append({"from": [{"source": {"requestPrincipals": [f"{issuer.url}/*"],
                                           "notRequestPrincipals": accounts}}]})
    return {"selector": {"matchLabels": dict(GATEWAY_POD_LABELS)}, "action": "DENY", "rules": rules}


def request_authentication(facts: FrontDoorFacts) -> dict[str, Any]:
    """The vendored RequestAuthentication `dex-jwt`'s rule, for the stack's issuer: with Dex its keys are read from
    Dex's Service (istiod need not reach the host), with an OIDC provider by its discovery document."""
    return _bearer_rule(facts.issuer, f"{DEX_SERVICE}/keys" if facts.dex else None, claim_headers(facts))
