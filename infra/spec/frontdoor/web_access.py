"""What the front door lets each directory group do, derived once from the groups that already bind the kubectl
personas: one `teams.<team>.groups` declaration decides both (docs/front-door.md, docs/access.md).

- a team's `engineers` groups: `edit` in the team's namespaces (their profile: runs, pipelines, registry entries);
- a team's `analysts` groups: `read` there;
- a team's `ci` groups: nothing on the web. CI reaches the UIs' APIs with a token of its namespace's
  `trainyard-ci` ServiceAccount, issued by the cluster (`machine_accounts`), never with a directory group;
- `identity.platformAdmins`: `admin`, every team's views and the platform's own.

A group holds one persona of one team (teams.check_group_personas), so each group maps to at most one team grant;
a platform-admin group that is also one team's group holds both grants, which add up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from infra.spec.frontdoor.model import FrontDoorSpec
from infra.spec.input.keys import LDAP_BIND_PASSWORD_KEY, OIDC_CLIENT_SECRET_KEY, STATIC_USER_HASHES_KEY
from infra.spec.teams import CI_SERVICE_ACCOUNT, TeamSpec

Right = Literal["read", "edit", "admin"]
# A team's `groups` key -> the persona (docs/access.md) and its web right. `ci` is absent on purpose (above).
WEB_PERSONAS: Mapping[str, tuple[str, Right]] = MappingProxyType({
    "engineers": ("ml-engineer", "edit"),
    "analysts": ("analyst", "read"),
})
PLATFORM_ADMIN = "platform-admin"
# Where the gateway sends people back after sign-in: oauth2-proxy's callback, and Dex's when Dex brokers an
# upstream provider (paths as the vendored manifests route them: common/oauth2-proxy, common/dex).
OAUTH2_CALLBACK = "/oauth2/callback"
DEX_PATH = "/dex"


@dataclass(frozen=True, order=True)
class WebGrant:
    """One group's right on the web: in one team's namespaces, or (`team` empty) on every team and the
    platform."""

    group: str  # as the token's groups claim carries it (no groupPrefix)
    team: str
    persona: str
    right: Right
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class WebUi:
    """A web UI served behind the front door: its path under the host, the platform component that runs it (its
    Service comes from that component), and the UI's own role for each web right."""

    name: str
    path: str
    component: str
    roles: Mapping[str, str]


# Grafana's basic roles. Teams see their own dashboards (queues, GPU use): the component puts each team's in a
# folder that only the team's groups may view or edit; platform admins are Grafana admins.
GRAFANA = WebUi("grafana", "/grafana/", "observability",
                MappingProxyType({"read": "Viewer", "edit": "Editor", "admin": "Admin"}))
# Kubeflow Pipelines' UI: it has no roles of its own; the API server asks the cluster whether the user may act in
# the namespace, which the upstream ClusterRoles kubeflow-pipelines-{view,edit} grant.
PIPELINES_UI = WebUi("pipelines", "/pipeline", "pipelines",
                     MappingProxyType({"read": "kubeflow-pipelines-view", "edit": "kubeflow-pipelines-edit",
                                       "admin": "kubeflow-pipelines-edit"}))


@dataclass(frozen=True)
class FrontDoorFacts:
    spec: FrontDoorSpec
    url: str  # https://<host>
    dex: bool  # Dex runs: it signs people in (ldap, staticUsers) or brokers Google
    issuer: str  # the issuer whose ID tokens the gateway verifies and turns into identity headers
    callback: str | None  # the redirect URI to register at the upstream provider (None: Dex is the provider)
    groups_claim: str  # the token claim carrying groups
    username_claim: str  # the token claim that is the user's identity on every UI
    secret_keys: tuple[str, ...]  # the secret config keys the front door reads
    grants: tuple[WebGrant, ...]
    machine_accounts: tuple[tuple[str, str], ...]  # (namespace, ServiceAccount) whose cluster tokens CI presents
    uis: tuple[WebUi, ...]

    def grants_of(self, group: str) -> tuple[WebGrant, ...]:
        return tuple(grant for grant in self.grants if grant.group == group)

    @property
    def platform_admins(self) -> tuple[str, ...]:
        return tuple(grant.group for grant in self.grants if grant.persona == PLATFORM_ADMIN)


def web_grants(platform_admins: list[str], teams: Mapping[str, TeamSpec],
               namespaces: Mapping[str, tuple[str, ...]]) -> tuple[WebGrant, ...]:
    """Every group's web grants, sorted; `namespaces`: each team's namespaces."""
    grants = [WebGrant(group, "", PLATFORM_ADMIN, "admin", ()) for group in platform_admins]
    for name, team in teams.items():
        for key, (persona, right) in WEB_PERSONAS.items():
            grants += [WebGrant(group, name, persona, right, namespaces[name]) for group in getattr(team.groups, key)]
    return tuple(sorted(grants))


def derive_front_door(door: FrontDoorSpec | None, platform_admins: list[str], teams: Mapping[str, TeamSpec],
                      namespaces: Mapping[str, tuple[str, ...]], grafana: bool,
                      pipelines: bool = False) -> FrontDoorFacts | None:
    """The front door's facts, or None when the stack declares none; `grafana`, `pipelines`: the stack runs
    Grafana, Kubeflow Pipelines."""
    if door is None:
        return None
    provider = door.identity_provider
    url = f"https://{door.host}"
    dex = provider.oidc is None
    secret = {"oidc": OIDC_CLIENT_SECRET_KEY, "google": OIDC_CLIENT_SECRET_KEY, "ldap": LDAP_BIND_PASSWORD_KEY,
              "static": STATIC_USER_HASHES_KEY}[provider.kind]
    return FrontDoorFacts(
        spec=door,
        url=url,
        dex=dex,
        issuer=provider.oidc.issuer_url if provider.oidc else f"{url}{DEX_PATH}",
        callback=(f"{url}{OAUTH2_CALLBACK}" if provider.oidc else f"{url}{DEX_PATH}/callback" if provider.google
                  else None),
        # Dex puts groups in `groups` and the user's address in `email` (what the vendored dex-jwt reads).
        groups_claim=provider.oidc.groups_claim if provider.oidc else "groups",
        username_claim=provider.oidc.username_claim if provider.oidc else "email",
        secret_keys=(secret,),
        grants=web_grants(platform_admins, teams, namespaces),
        machine_accounts=tuple((ns, CI_SERVICE_ACCOUNT) for name in teams for ns in namespaces[name]),
        uis=(*((GRAFANA,) if grafana else ()), *((PIPELINES_UI,) if pipelines else ())),
    )
