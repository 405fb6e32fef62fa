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

from infra.components import ISTIO
from infra.spec.clouds import CLOUDS
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
# The ClusterRoles a web right is bound to in team namespaces (infra/platform/web/binder.py builds them): the
# Pipelines API's SubjectAccessReview rules only. A platform admin gets `edit` in every team's namespaces.
WEB_ROLES: Mapping[Right, str] = MappingProxyType({"read": "trainyard-web-read", "edit": "trainyard-web-edit",
                                                   "admin": "trainyard-web-edit"})
WEB_CI_ROLE = "trainyard-web-ci"  # CI's namespace ServiceAccount, bound statically (its token has no groups)
# KFAM's role names (kubeflow/kubeflow components/access-management kfam/bindings.go roleBindingNameMap), which
# its `role` annotation and binding names use.
KFAM_ROLES: Mapping[Right, str] = MappingProxyType({"read": "view", "edit": "edit", "admin": "edit"})
# Where a kind/kubeadm cluster's ServiceAccount tokens come from, and how the gateway reads their keys: the
# vendored overlay common/oauth2-proxy/overlays/m2m-dex-and-kind (the in-cluster issuer's keys are served with
# the cluster's own CA, so the cluster-jwks-proxy re-serves them over HTTP inside the cluster).
IN_CLUSTER_ISSUER = "https://kubernetes.default.svc.cluster.local"
JWKS_PROXY = "cluster-jwks-proxy"
JWKS_PROXY_URI = f"http://{JWKS_PROXY}.{ISTIO.namespace}.svc.cluster.local/openid/v1/jwks"
GKE_ISSUER = "https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{name}"
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


# Grafana's role per web right, as it signs people in from the token (infra/platform/grafana/sso.py,
# grafana/orgs.py): a team's engineers and analysts are Viewers in the team's own organization (its dashboards only,
# no Explore); platform admins are Admin in every organization and server admins.
GRAFANA_TEAM_ROLE = "Viewer in the team's organization"
GRAFANA = WebUi("grafana", "/grafana/", "observability",
                MappingProxyType({"read": GRAFANA_TEAM_ROLE, "edit": GRAFANA_TEAM_ROLE,
                                  "admin": "Admin in every organization, server admin"}))
# Kubeflow Pipelines' UI: it has no roles of its own; the API server asks the cluster whether the user may act in
# the namespace, which the upstream ClusterRoles kubeflow-pipelines-{view,edit} grant.
# Pipelines authorizes a person by the RoleBindings the web binder writes: its roles are the web roles.
PIPELINES_UI = WebUi("pipelines", "/pipeline", "pipelines", MappingProxyType({str(k): v for k, v in WEB_ROLES.items()}))


@dataclass(frozen=True)
class MachineIssuer:
    """The cluster's ServiceAccount token issuer as the gateway trusts it: `issuer` None when it is an output of the
    cluster the stack creates (EKS, AKS: ClusterContract.service_account_issuer, put in by the platform); `jwks_uri`
    None reads its keys by discovery; `proxied` when they come through the cluster-jwks-proxy; `source` says how
    Trainyard knows it."""

    issuer: str | None
    jwks_uri: str | None
    proxied: bool
    source: str

    @property
    def url(self) -> str:
        """The issuer itself, once known (the builders of the gateway's rules run after the cluster's is put in)."""
        if self.issuer is None:
            raise ValueError(f"the issuer ({self.source}) is the cluster's output: build with it put in")
        return self.issuer


def machine_issuer(door: FrontDoorSpec, kind: str, laptop: bool, gke: tuple[str, str, str] | None) -> \
        MachineIssuer | None:
    """The issuer of the cluster's ServiceAccount tokens: declared (frontDoor.serviceAccountIssuer, which wins), or
    derived: a laptop's kind cluster, GKE (`gke`: project, location, cluster name), the output of an EKS or AKS
    cluster the stack creates (its keys read by discovery, as Istio reads them: `<issuer>/.well-known/...`, a
    trailing slash trimmed); None where unknown (an existing cluster until declared)."""
    declared = door.service_account_issuer
    if declared is not None:
        in_cluster = declared.jwks_uri is None and ".svc" in declared.issuer.removeprefix("https://").split("/")[0]
        return MachineIssuer(declared.issuer, JWKS_PROXY_URI if in_cluster else declared.jwks_uri, in_cluster,
                             "declared in frontDoor.serviceAccountIssuer")
    if laptop:
        return MachineIssuer(IN_CLUSTER_ISSUER, JWKS_PROXY_URI, True, "kind's in-cluster issuer")
    if kind == "gke" and gke is not None:
        project, location, name = gke
        return MachineIssuer(GKE_ISSUER.format(project=project, location=location, name=name), None, False,
                             "GKE's issuer of the cluster")
    from_cluster = CLOUDS[kind].service_account_issuer
    if from_cluster is not None:
        return MachineIssuer(None, None, False, from_cluster)
    return None


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
    machine_issuer: MachineIssuer | None = None  # None: machine tokens are refused (a prerequisite finding)

    def grants_of(self, group: str) -> tuple[WebGrant, ...]:
        return tuple(grant for grant in self.grants if grant.group == group)

    @property
    def platform_admins(self) -> tuple[str, ...]:
        return tuple(grant.group for grant in self.grants if grant.persona == PLATFORM_ADMIN)

    @property
    def team_namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({namespace for namespace, _ in self.machine_accounts}))

    def bindings_of(self, group: str) -> tuple[tuple[str, Right], ...]:
        """(namespace, right) pairs a member of `group` is bound to on the web: a team grant's namespaces, a
        platform admin's every team namespace."""
        return tuple(sorted({(namespace, grant.right) for grant in self.grants_of(group)
                             for namespace in (grant.namespaces or self.team_namespaces)}))


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
                      issuer: MachineIssuer | None = None, pipelines: bool = False) -> FrontDoorFacts | None:
    """The front door's facts, or None when the stack declares none; `grafana`, `pipelines`: the stack runs
    Grafana, Kubeflow Pipelines; `issuer`: the cluster's ServiceAccount token issuer (machine_issuer)."""
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
        machine_issuer=issuer,
    )
