"""The front door: the one host where people sign in with the corporate directory and reach the platform's web UIs.

`frontDoor` names the host, where its certificate comes from (`tls`) and who signs people in
(`identityProvider`). Which groups reach what is not declared here: it comes from the same `teams.<team>.groups`
and `identity.platformAdmins` that bind the kubectl personas (infra/spec/frontdoor/web_access.py derives it). The
platform
component that builds the gateway (Istio ingress gateway, oauth2-proxy, Dex, cert-manager, as the vendored Kubeflow
Platform 26.03 does) reads only the derived facts. Credentials are secret config keys, never fields here
(infra/spec/input/keys.py): the OIDC client secret, the LDAP bind password, a laptop's static users' hashes.

Upstream names the fields map to: cert-manager's ClusterIssuer `acme.{email,server,solvers}` and `ca.secretName`;
Dex's `ldap` connector (`host`, `startTLS`, `rootCA`, `bindDN`, `userSearch.{baseDN,filter,username,idAttr,emailAttr,
nameAttr}`, `groupSearch.{baseDN,filter,userMatchers[].{userAttr,groupAttr},nameAttr}`), its `google` connector
(`clientID`, `hostedDomains`, `domainToAdminEmail`) and `staticPasswords` (`email`, `username`, `hashFromEnv`,
`groups`: Dex 2.45); oauth2-proxy's `oidc_issuer_url`, `client_id` and Istio's `outputClaimToHeaders` claims.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from infra.spec.base import SecretName, Strict
from infra.spec.teams import GroupName

HOST_LIMIT = 253  # RFC 1123: a DNS name's length
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_EMAIL = re.compile(r"^[^@\s]+@[a-z0-9.-]+\.[a-z]+$")
LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory"
# Google's sign-in issuer: its ID tokens carry no groups claim, so no web right could come from a group.
GOOGLE_ISSUER = "https://accounts.google.com"


def host_problem(value: str) -> str | None:
    """Why `value` is not a host people can sign in at (a lowercase, fully qualified DNS name), or None."""
    if "://" in value or "/" in value:
        return "is a URL: give the host name alone, e.g. ml.example.com"
    if "*" in value:
        return ("is a wildcard: the front door is the one name people sign in at and the identity provider "
                "redirects to; give that name, e.g. ml.example.com")
    if ":" in value:
        return "carries a port: the gateway serves HTTPS on 443; give the name alone, e.g. ml.example.com"
    if value != value.lower():
        return "has capital letters: give the name in lowercase"
    try:
        ipaddress.ip_address(value)
        return "is an IP address: a certificate and the sign-in redirect need a DNS name, e.g. ml.example.com"
    except ValueError:
        pass
    labels = value.split(".")
    if len(labels) < 2 or len(value) > HOST_LIMIT or not all(_LABEL.fullmatch(label) for label in labels):
        return (f"is not a fully qualified DNS name: give labels of letters, digits and '-' joined by '.', at most "
                f"{HOST_LIMIT} characters, e.g. ml.example.com")
    return None


def https_url_problem(value: str) -> str | None:
    """Why `value` is not an https URL an OIDC client may trust as an issuer (or an ACME directory), or None."""
    if not value.startswith("https://"):
        return "is not an https:// URL: tokens and keys are only trusted over TLS; give the https:// URL"
    rest = value.removeprefix("https://")
    authority = rest.split("/", 1)[0]
    if not authority or any(ch.isspace() for ch in value) or "@" in authority:
        return "is not a URL of the form https://host[/path] (no spaces, no user:password@)"
    if "?" in rest or "#" in rest:
        return "has a query or fragment, which an OIDC issuer may not have: give https://host[/path]"
    return None



def optional_https(value: str | None) -> str | None:
    """An optional URL's check: absent, or https."""
    if value is not None:
        refuse(value, https_url_problem(value))
    return value


def refuse(value: str, problem: str | None) -> None:
    """A validator's refusal of `value` for the problem a *_problem function found, if any."""
    if problem:
        raise ValueError(f"'{value}' {problem}")

class Acme(Strict):
    """A certificate from an ACME server (cert-manager ClusterIssuer `acme`): `email` for expiry notices,
    `server` the ACME directory URL (default Let's Encrypt production), `solver` how the server checks the name:
    `http01` through the gateway (the host must be reachable from the ACME server on port 80), or `dns01` in the
    cloud's DNS zone `dnsZone` (Route 53 hosted zone id, Cloud DNS zone, Azure DNS zone), written as the
    cert-manager pod's workload identity."""

    email: str
    server: str = LETS_ENCRYPT
    solver: Literal["http01", "dns01"] = "http01"
    dns_zone: str | None = Field(default=None, alias="dnsZone", pattern=r"^\S+$")

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"'{value}' is not an email address: give the address that receives expiry notices")
        return value

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        refuse(value, https_url_problem(value))
        return value

    @model_validator(mode="after")
    def _zone(self) -> Acme:
        if self.solver == "dns01" and self.dns_zone is None:
            raise ValueError("dnsZone: dns01 writes the challenge into a DNS zone: name it (dnsZone: <zone>)")
        if self.solver == "http01" and self.dns_zone is not None:
            raise ValueError("dnsZone: http01 answers through the gateway and writes no DNS record: drop dnsZone "
                             "or set solver: dns01")
        return self


class CorporateCa(Strict):
    """Certificates signed by the corporate CA (cert-manager ClusterIssuer `ca`): `secretName` is the Secret in
    the cert-manager namespace holding the CA's `tls.crt` and `tls.key`, created by the site."""

    secret_name: SecretName = Field(alias="secretName")


class Tls(Strict):
    """Where the host's certificate comes from, exactly one of: `acme`, `ca` (both through a cert-manager
    ClusterIssuer the stack declares, renewed by cert-manager), or `secretName`, an existing `kubernetes.io/tls`
    Secret in the gateway's namespace that the site renews."""

    acme: Acme | None = None
    ca: CorporateCa | None = None
    secret_name: SecretName | None = Field(default=None, alias="secretName")

    @model_validator(mode="after")
    def _one(self) -> Tls:
        given = [key for key, value in (("acme", self.acme), ("ca", self.ca), ("secretName", self.secret_name))
                 if value is not None]
        if len(given) != 1:
            raise ValueError(f"declare exactly one certificate source (acme, ca or secretName), not "
                             f"{' and '.join(given) if given else 'none'}")
        return self

    @property
    def source(self) -> Literal["acme", "ca", "secret"]:
        return "acme" if self.acme is not None else "ca" if self.ca is not None else "secret"


class Oidc(Strict):
    """An OIDC provider oauth2-proxy signs people in with directly, no Dex (Entra ID, Okta, ...): its issuer URL,
    the client id of the web application registered there (its secret: the key trainyard:oidcClientSecret),
    the claim carrying the user's groups (as `teams.<team>.groups` name them) and the one carrying the user name.
    Register https://<host>/oauth2/callback as the application's redirect URI. `jwksUri`: the provider's keys (the
    `jwks_uri` of <issuerUrl>/.well-known/openid-configuration), which Grafana verifies the ID token with; required
    when the stack runs Grafana (Grafana reads no discovery document)."""

    issuer_url: str = Field(alias="issuerUrl")
    client_id: str = Field(alias="clientId", pattern=r"^\S+$")
    groups_claim: str = Field(default="groups", alias="groupsClaim", pattern=r"^\S+$")
    username_claim: str = Field(default="email", alias="usernameClaim", pattern=r"^\S+$")
    jwks_uri: str | None = Field(default=None, alias="jwksUri")

    @field_validator("issuer_url")
    @classmethod
    def _issuer(cls, value: str) -> str:
        refuse(value, https_url_problem(value))
        if value.rstrip("/") == GOOGLE_ISSUER:
            raise ValueError(f"'{value}': Google's ID tokens carry no groups, so no team group would reach a UI: "
                             "use identityProvider.google (Dex reads the groups from the Workspace directory)")
        return value

    @field_validator("jwks_uri")
    @classmethod
    def _jwks(cls, value: str | None) -> str | None:
        return optional_https(value)


class Google(Strict):
    """Google Workspace through Dex's `google` connector, which reads each user's groups (their email
    addresses, as GKE's Google Groups for RBAC names them) from the Admin SDK directory: `clientId` of the OAuth
    client (its secret: trainyard:oidcClientSecret; redirect URI https://<host>/dex/callback), `hostedDomains`
    allowed to sign in, and `adminEmail`, the Workspace administrator Dex's service account impersonates to list
    groups (domain-wide delegation, scope admin.directory.group.readonly; Dex runs as a workload identity)."""

    client_id: str = Field(alias="clientId", pattern=r"^\S+$")
    hosted_domains: list[str] = Field(alias="hostedDomains", min_length=1)
    admin_email: str = Field(alias="adminEmail")

    @field_validator("hosted_domains")
    @classmethod
    def _domains(cls, domains: list[str]) -> list[str]:
        for domain in domains:
            problem = host_problem(domain)
            if problem:
                raise ValueError(f"'{domain}' {problem.replace('ml.example.com', 'example.com')}")
        if len(set(domains)) != len(domains):
            raise ValueError("a domain is listed twice")
        return domains

    @field_validator("admin_email")
    @classmethod
    def _admin(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"'{value}' is not an email address: give the Workspace administrator's address")
        return value


_ATTR = r"^[A-Za-z][A-Za-z0-9-]*$"  # an LDAP attribute name (Dex also takes "DN", the entry's own name)


def _dn(value: str) -> str:
    if "=" not in value or any(ch in value for ch in "\n\r"):
        raise ValueError(f"'{value}' is not a distinguished name: give e.g. ou=people,dc=example,dc=com")
    return value


def _filter(value: str | None) -> str | None:
    if value is not None and not (value.startswith("(") and value.endswith(")")):
        raise ValueError(f"'{value}' is not an LDAP filter: give it in parentheses, e.g. (objectClass=person)")
    return value


class UserSearch(Strict):
    """How Dex finds the person signing in: under `baseDN`, entries matching `filter` whose `username` attribute
    is what they typed; `idAttr`, `emailAttr`, `nameAttr` map the entry's attributes to the token's claims (the
    email is the user's identity on every UI)."""

    base_dn: str = Field(alias="baseDN")
    filter: str | None = None
    username: str = Field(default="uid", pattern=_ATTR)
    id_attr: str = Field(default="uid", alias="idAttr", pattern=_ATTR)
    email_attr: str = Field(default="mail", alias="emailAttr", pattern=_ATTR)
    name_attr: str = Field(default="cn", alias="nameAttr", pattern=_ATTR)

    valid_dn = field_validator("base_dn")(_dn)
    valid_filter = field_validator("filter")(_filter)


class UserMatcher(Strict):
    """A user belongs to a group when the group's `groupAttr` holds the user's `userAttr` (`DN`: the entry's
    distinguished name)."""

    user_attr: str = Field(alias="userAttr", pattern=_ATTR)
    group_attr: str = Field(alias="groupAttr", pattern=_ATTR)


class GroupSearch(Strict):
    """How Dex finds a person's groups: entries under `baseDN` matching `filter` and one of `userMatchers`; the
    group's `nameAttr` is its name in the token, as `teams.<team>.groups` and `identity.platformAdmins` name it."""

    base_dn: str = Field(alias="baseDN")
    filter: str | None = None
    user_matchers: list[UserMatcher] = Field(
        default_factory=lambda: [UserMatcher(user_attr="DN", group_attr="member")], alias="userMatchers", min_length=1)
    name_attr: str = Field(default="cn", alias="nameAttr", pattern=_ATTR)

    valid_dn = field_validator("base_dn")(_dn)
    valid_filter = field_validator("filter")(_filter)


class Ldap(Strict):
    """A corporate directory through Dex's `ldap` connector. `host` is host:port; `tls` is `ldaps` (TLS from the
    first byte) or `startTLS`: never plaintext, since Dex binds with the user's own password. `caSecretName`: a
    Secret in Dex's namespace with the directory's CA as `ca.crt` (default: the image's public roots). Dex searches
    as `bindDN`, whose password is the secret key trainyard:ldapBindPassword."""

    host: str
    tls: Literal["ldaps", "startTLS"] = "ldaps"
    ca_secret_name: SecretName | None = Field(default=None, alias="caSecretName")
    bind_dn: str = Field(alias="bindDN")
    user_search: UserSearch = Field(alias="userSearch")
    group_search: GroupSearch = Field(alias="groupSearch")

    valid_dn = field_validator("bind_dn")(_dn)

    @field_validator("host")
    @classmethod
    def _host_port(cls, value: str) -> str:
        name, _, port = value.rpartition(":")
        if "://" in value:
            raise ValueError(f"'{value}' is a URL: give host:port (e.g. ldap.example.com:636); `tls` says how")
        if not name or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"'{value}' is not host:port: give the directory's name and port, e.g. "
                             "ldap.example.com:636 (ldaps) or :389 (startTLS)")
        if host_problem(name) and not _is_ip(name):
            raise ValueError(f"'{value}': '{name}' {host_problem(name)}")
        return value


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


class StaticUser(Strict):
    """A user Dex keeps itself, for a laptop stack only (`cluster.existing.simulatedGpus`): `email` (the identity
    on every UI), `username` (what is typed at sign-in) and `groups` (stack groups it belongs to). Its password
    hash is never written here: the secret key trainyard:staticUserHashes holds a YAML mapping of username to
    bcrypt hash (`htpasswd -nbBC 12 "" PASSWORD | tr -d ':'`), which Dex reads through `hashFromEnv`."""

    email: str
    username: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    groups: list[GroupName] = Field(min_length=1)

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        if not _EMAIL.fullmatch(value):
            raise ValueError(f"'{value}' is not an email address: give the user's address, e.g. ada@example.com")
        return value


class IdentityProvider(Strict):
    """Who signs people in, exactly one of: `oidc` (an OIDC provider directly: Entra ID, Okta), `google`
    (Google Workspace through Dex), `ldap` (a directory through Dex), `staticUsers` (Dex's own users, a laptop
    stack only)."""

    oidc: Oidc | None = None
    google: Google | None = None
    ldap: Ldap | None = None
    static_users: list[StaticUser] | None = Field(default=None, alias="staticUsers", min_length=1)

    @model_validator(mode="after")
    def _one(self) -> IdentityProvider:
        given = [key for key, value in (("oidc", self.oidc), ("google", self.google), ("ldap", self.ldap),
                                        ("staticUsers", self.static_users)) if value is not None]
        if len(given) != 1:
            raise ValueError(f"declare exactly one identity provider (oidc, google, ldap or staticUsers), not "
                             f"{' and '.join(given) if given else 'none'}")
        for key in ("email", "username"):
            seen = [getattr(user, key) for user in self.static_users or []]
            if len(set(seen)) != len(seen):
                raise ValueError(f"staticUsers: a user's {key} is given twice")
        return self

    @property
    def kind(self) -> Literal["oidc", "google", "ldap", "static"]:
        return ("oidc" if self.oidc else "google" if self.google else "ldap" if self.ldap else "static")


class ServiceAccountIssuer(Strict):
    """The issuer of the cluster's ServiceAccount tokens, which the gateway accepts from machines (CI's
    `trainyard-ci` tokens, `sub` -> kubeflow-userid), where Trainyard cannot derive it: an existing cluster (its API
    server's --service-account-issuer). EKS and AKS clusters the stack creates give theirs (the cluster's output), GKE
    and kind are derived; declared, it wins on any kind. `jwksUri`: where its keys are read; absent, an in-cluster
    issuer (a `.svc` host, kubeadm's default) is read through the cluster-jwks-proxy and a public one by its
    discovery document."""

    issuer: str
    jwks_uri: str | None = Field(default=None, alias="jwksUri")

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        refuse(value, https_url_problem(value))
        return value

    @field_validator("jwks_uri")
    @classmethod
    def _jwks(cls, value: str | None) -> str | None:
        return optional_https(value)


class FrontDoorSpec(Strict):
    """The one web entry of the stack (docs/front-door.md): `host` (the DNS name people type, served on 443),
    `tls` (required), `identityProvider`, `provides` (what the site does outside the cluster) and
    `serviceAccountIssuer` (the cluster's token issuer, where neither the spec nor the created cluster gives it).
    Every web UI of the platform is served under this host, behind sign-in; nothing web-facing is reachable around
    it. In a stack of several clusters it is the manager's."""

    host: str
    tls: Tls | None = None
    identity_provider: IdentityProvider = Field(alias="identityProvider")
    # What the site does for the door outside the cluster (infra/spec/prerequisites.py FRONT_DOOR_SITE_NEEDS):
    # `dns` (the host's record points at the gateway's address), `acme-http01` (the ACME server reaches the gateway
    # on port 80 from the internet).
    provides: list[Literal["dns", "acme-http01"]] = Field(default_factory=list)
    service_account_issuer: ServiceAccountIssuer | None = Field(default=None, alias="serviceAccountIssuer")

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        refuse(value, host_problem(value))
        return value

    @model_validator(mode="after")
    def _tls(self) -> FrontDoorSpec:
        if self.tls is None:
            raise ValueError("tls: a front door without TLS would send sign-in cookies and tokens in clear: declare "
                             "tls: {acme: {email: ...}}, {ca: {secretName: ...}} or {secretName: <tls Secret>}")
        return self


def check_front_door(door: FrontDoorSpec | None, laptop: bool, declared_groups: set[str],
                     login_oidc: tuple[str, str] | None) -> None:
    """Checks that need the rest of the stack. `laptop`: the cluster is a laptop's (simulated GPUs);
    `declared_groups`: every group the stack binds; `login_oidc`: the (issuer, groups claim) of the cluster's own
    OIDC login (EKS), which must read groups the same way when the front door uses the same issuer."""
    if door is None:
        return
    where = "frontDoor.identityProvider"
    users = door.identity_provider.static_users
    if users is not None and not laptop:
        raise ValueError(f"{where}.staticUsers: users kept in Dex are for a laptop stack (cluster.existing."
                         "simulatedGpus); a shared cluster signs people in through the directory: use ldap, oidc "
                         "or google")
    for position, user in enumerate(users or []):
        for group in user.groups:
            if group not in declared_groups:
                raise ValueError(f"{where}.staticUsers[{position}].groups: '{group}' is no group this stack binds "
                                 "(teams.<team>.groups, identity.platformAdmins): it would grant nothing; use one "
                                 "of " + ", ".join(sorted(declared_groups)))
    oidc = door.identity_provider.oidc
    if oidc is not None and login_oidc is not None and oidc.issuer_url.rstrip("/") == login_oidc[0].rstrip("/") \
            and oidc.groups_claim != login_oidc[1]:
        raise ValueError(f"{where}.oidc.groupsClaim: '{oidc.groups_claim}' differs from the cluster login's "
                         f"groupsClaim '{login_oidc[1]}' for the same issuer, so kubectl and the web would see "
                         "different groups: use the same claim")
