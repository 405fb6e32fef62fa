"""A stack of several clusters: one Kueue MultiKueue manager and its workers, from one declaration.

`clusters` names each cluster with its role; every pool names its cluster; a team's `quota` is on the
manager's pools and its `burst` on workers' pools. Each cluster is then validated and derived as a stack of
its own (the same identity, versions, queueing, trainer, storage, backup, policy and observability sections,
its own pools, the teams that run there), so every check a single-cluster stack gets runs on every cluster.
`frontDoor` is the manager's alone: the one web entry, in front of the UIs that run there.
On a worker a team's quota is its burst quota, its ClusterQueue `<team>-<worker>` and its LocalQueue named
after the worker, the name the manager's burst LocalQueue has (MultiKueue keeps the queue name).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from infra.spec.base import Strict, ipv4_cidr
from infra.spec.clouds import CLOUD_STORAGE, CLOUDS
from infra.spec.hybrid.burst_data import Network, WorkerData, link_needs
from infra.spec.input.errors import SpecError, from_validation_error
from infra.spec.input.keys import PLATFORM_KEY
from infra.spec.prerequisites import with_needs

if TYPE_CHECKING:
    from infra.spec.derive import Platform, TeamFacts

MANAGER, WORKER = "manager", "worker"
ROLE_KEYS = ("role", "link", "workerLostTimeout", "data")
FRONT_DOOR = "frontDoor"  # the one section only the manager carries
PIPELINES = "pipelines"  # served through the front door, so the manager's too
MODELS = "models"  # the registries and serving: behind the front door too
SERVING = "serving"  # a team's serving budget: where its models namespace is, on the manager
CLUSTER_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,28}[a-z0-9])?$")  # the keys of a `clusters` entry besides its kind


class Link(Strict):
    """How the manager reaches a worker: its Kueue calls the worker's API server over HTTPS (the worker never
    calls the manager). `network`: vpn, interconnect (Direct Connect, Cloud Interconnect, ExpressRoute) or the
    public endpoint; `from`: the manager's egress addresses as the worker's API server sees them. The
    credentials are the secret config key trainyard:multikueue-<worker> (docs/hybrid.md). `attachment` (vpn,
    interconnect): the cloud side of the private path, which the site provisions and Trainyard does not: the VPN
    connection or interconnect attachment id, with routes between `from` and the worker's network and the
    worker's API endpoint security group admitting `from` on 443; without it the private path is provided by
    nothing."""

    network: Network
    source: str = Field(alias="from")
    attachment: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9/_-]*$")

    valid_source = field_validator("source")(ipv4_cidr)


class Role(Strict):
    """A cluster's part: `manager` (admits every job; burst queues dispatch to workers) or `worker` (runs what
    the manager dispatches). `workerLostTimeout` (manager): how long a job dispatched to a worker the manager
    lost contact with stays admitted before it is requeued. `data` (worker): how its dispatched jobs reach their
    data and images (infra/spec/hybrid/burst_data.py)."""

    role: Literal["manager", "worker"]
    link: Link | None = None
    data: WorkerData | None = None
    worker_lost_timeout: str = Field(default="30m", alias="workerLostTimeout", pattern=r"^[0-9]+(s|m|h)$")


@dataclass(frozen=True)
class Member:
    """Which cluster of a multi-cluster stack a Platform is, as its components need it."""

    name: str  # the key in `clusters`
    role: str  # manager | worker
    origin: str  # the manager's MultiKueue origin label value: its cluster name
    worker_lost_timeout: str
    data: WorkerData | None = None  # a worker: where its dispatched jobs' data and images come from


@dataclass(frozen=True)
class Hybrid:
    manager: str
    clusters: Mapping[str, Platform]  # every cluster's platform, the manager first
    links: Mapping[str, Link]  # worker -> link

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(name for name in self.clusters if name != self.manager)

    def bursting(self, worker: str) -> tuple[str, ...]:
        """The teams that may send work to `worker`."""
        return tuple(team.name for team in self.clusters[worker].teams)


def burst_cohort(cohort: str, worker: str) -> str:
    """The cohort of the burst queues to a worker on the manager, from the manager's own cohort."""
    return f"{cohort}-{worker}"


def burst_queue(team: str, worker: str) -> str:
    """The ClusterQueue of a team's burst to a worker, on both sides."""
    return f"{team}-{worker}"


def _mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise SpecError(f"{PLATFORM_KEY}.{key}", "must be a mapping")
    return value


def _optional_mapping(value: Any, where: str, what: str) -> dict[str, Any]:
    """A section that may be left out (None) but, when given, is a mapping: `teams: 0` or `burst: []` is a
    mistake, not an empty section."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(where, f"{value!r} is not a mapping: give a mapping of {what}, or leave the key out")
    return value


def _roles(clusters: dict[str, Any]) -> dict[str, Role]:
    roles: dict[str, Role] = {}
    for name, entry in clusters.items():
        where = f"{PLATFORM_KEY}.clusters.{name}"
        if not isinstance(name, str) or not CLUSTER_NAME.fullmatch(name):
            raise SpecError(where, "a cluster's name prefixes its resources and names its burst LocalQueue: up to 30 "
                                   "lowercase letters, digits and '-', starting with a letter")
        if not isinstance(entry, dict):
            raise SpecError(where, "must be a mapping: {role: manager|worker, <kind>: {...}}")
        if FRONT_DOOR in entry:
            raise SpecError(f"{where}.{FRONT_DOOR}", "the front door is declared once, at the top level, and serves "
                                                     "on the manager: move it out of `clusters`")
        try:
            roles[name] = Role.model_validate({k: v for k, v in entry.items() if k in ROLE_KEYS})
        except ValidationError as error:
            raise from_validation_error(error, where, Role) from None
        if roles[name].role == WORKER and roles[name].link is None:
            raise SpecError(f"{where}.link", "a worker declares how the manager reaches it: "
                                             "link: {network: vpn|interconnect|public, from: <manager egress CIDR>}")
        if roles[name].role == MANAGER and roles[name].link is not None:
            raise SpecError(f"{where}.link", "the manager is not reached by anyone: declare `link` on workers only")
        if roles[name].role == WORKER and "workerLostTimeout" in entry:
            raise SpecError(f"{where}.workerLostTimeout", "the manager decides how long it waits for a lost worker "
                                                          "(a worker never reads it): move it to the manager's entry")
        if roles[name].role == MANAGER and roles[name].data is not None:
            raise SpecError(f"{where}.data", "the manager's jobs use its own storage and registries: declare `data` "
                                             "on workers only (where dispatched jobs run)")
    managers = [name for name, role in roles.items() if role.role == MANAGER]
    if len(managers) != 1 or len(roles) < 2:
        raise SpecError(f"{PLATFORM_KEY}.clusters", "declare exactly one cluster with role: manager and at least "
                                                    "one with role: worker (Kueue 0.19's manager cannot be its own "
                                                    "worker)")
    return roles


def _pool_clusters(pools: dict[str, Any], roles: Mapping[str, Role]) -> dict[str, str]:
    owner: dict[str, str] = {}
    for name, pool in pools.items():
        cluster = pool.get("cluster") if isinstance(pool, dict) else None
        if not isinstance(cluster, str) or cluster not in roles:
            what = "missing" if cluster is None else f"{cluster!r} is not a declared cluster"
            raise SpecError(f"{PLATFORM_KEY}.pools.{name}.cluster", f"{what}: name the cluster this pool belongs "
                                                                    f"to, one of {', '.join(roles)}")
        owner[name] = cluster
    return owner


def _team_quotas(teams: dict[str, Any], owner: Mapping[str, str], roles: Mapping[str, Role]) -> None:
    for team, entry in teams.items():
        if not isinstance(entry, dict):
            continue  # TeamSpec names the problem
        if team in roles:
            raise SpecError(f"{PLATFORM_KEY}.teams.{team}", f"'{team}' is also a cluster's name, which is the burst "
                                                           "LocalQueue's name in every team namespace: rename one")
        for key, wanted in (("quota", MANAGER), ("burst", WORKER)):
            section = _optional_mapping(entry.get(key), f"{PLATFORM_KEY}.teams.{team}.{key}", "pool to quota")
            for pool in section:
                cluster = owner.get(pool)
                if cluster is not None and roles[cluster].role != wanted:
                    fix = ("its guaranteed quota is on the manager's pools; worker pools go under `burst`"
                           if key == "quota" else "`burst` names worker pools; the manager's go under `quota`")
                    raise SpecError(f"{PLATFORM_KEY}.teams.{team}.{key}.{pool}",
                                    f"pool '{pool}' is on {roles[cluster].role} '{cluster}': {fix}")
                if cluster is None:
                    raise SpecError(f"{PLATFORM_KEY}.teams.{team}.{key}.{pool}",
                                    f"no pool named '{pool}': use one of {', '.join(sorted(owner))}")


def _cluster_spec(name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry without its role keys; the kind's `name` defaults to the cluster's key (not the stack's)."""
    spec = {k: v for k, v in entry.items() if k not in ROLE_KEYS}
    return {kind: ({"name": name, **value} if isinstance(value, dict) else value) for kind, value in spec.items()}


def _cluster_raw(raw: Mapping[str, Any], name: str, role: str, owner: Mapping[str, str]) -> dict[str, Any]:
    """The stack as a single-cluster stack of this cluster: its pools, and its teams with their quota there."""
    clusters, pools, teams = _mapping(raw, "clusters"), _mapping(raw, "pools"), raw.get("teams") or {}
    quota_key = "quota" if role == MANAGER else "burst"
    own_teams = {}
    for team, entry in teams.items():
        if not isinstance(entry, dict):
            own_teams[team] = entry  # TeamSpec names the problem
            continue
        quota = {pool: q for pool, q in (entry.get(quota_key) or {}).items() if owner[pool] == name}
        if role == MANAGER or quota:
            dropped = ("burst",) if role == MANAGER else ("burst", SERVING)
            own_teams[team] = {**{k: v for k, v in entry.items() if k not in dropped}, "quota": quota}
    # The front door is the manager's: the one entry, in front of the UIs that run there (docs/front-door.md).
    own_sections = ("clusters", "pools", "teams") if role == MANAGER else ("clusters", "pools", "teams", FRONT_DOOR,
                                                                           PIPELINES, MODELS)
    return {**{k: v for k, v in raw.items() if k not in own_sections},
            "cluster": _cluster_spec(name, clusters[name]),
            "pools": {pool: {k: v for k, v in spec.items() if k != "cluster"}
                      for pool, spec in pools.items() if owner[pool] == name},
            "teams": own_teams}


def _relocated(error: SpecError, cluster: str, role: str) -> SpecError:
    """An error found in one cluster's stack, at the path the user wrote it."""
    path, root = error.path, f"{PLATFORM_KEY}.cluster"
    if path == root or path.startswith(f"{root}."):
        path = f"{PLATFORM_KEY}.clusters.{cluster}{path[len(root):]}"
    teams = f"{PLATFORM_KEY}.teams."
    if role == WORKER and path.startswith(teams):
        team, _, rest = path[len(teams):].partition(".")
        if rest == "quota" or rest.startswith("quota."):
            path = f"{teams}{team}.burst{rest[len('quota'):]}"
    return SpecError(path, error.message)


def _link_problem(worker: Platform, link: Link) -> str | None:
    """A public link needs a public endpoint that admits the manager's egress addresses."""
    if link.network == "public" and link.attachment is not None:
        return "a public link has no attachment (the endpoint is reached over the internet): drop `attachment`"
    chosen = worker.spec.cluster.chosen
    endpoint = getattr(chosen, "endpoint", None)
    if link.network != "public" or endpoint is None:
        return None
    if endpoint.private:
        return ("the link is the public endpoint, but the worker's endpoint is private: use network: vpn or "
                "interconnect, or give the endpoint cidrs")
    source = ipaddress.IPv4Network(link.source)
    if not any(source.subnet_of(ipaddress.IPv4Network(cidr)) for cidr in endpoint.cidrs):
        return (f"the manager's egress {link.source} is not within the worker endpoint's cidrs "
                f"({', '.join(endpoint.cidrs)}): add it there")
    return None


def _address_problems(name: str, worker: Platform, role: Role) -> Iterator[tuple[str, str]]:
    """The manager's addresses as a worker sees them (its egress, its object store) must lie outside the ranges
    the worker's own network uses: the worker would route them to itself instead of over the link."""
    outside = {f"{PLATFORM_KEY}.clusters.{name}.link.from": role.link.source if role.link else None,
               f"{PLATFORM_KEY}.clusters.{name}.data.manager.cidr":
                   role.data.manager.cidr if role.data and role.data.manager else None}
    kind, networks = worker.spec.cluster.kind, worker.spec.cluster.own_networks()
    for where, cidr in outside.items():
        for key, own in networks.items():
            if cidr and ipaddress.IPv4Network(cidr).overlaps(own):
                yield where, (f"{cidr} overlaps the worker's own {kind}.{key} {own}, so the worker would route the "
                              "manager's addresses to itself: give the manager's real addresses, or renumber one "
                              "network")


def validate_hybrid(raw: Mapping[str, Any], stack: str, one: Callable[[Any, str], Platform]) -> Platform:
    """Validate and derive every cluster of a multi-cluster stack; the manager's Platform, carrying the rest."""
    if "cluster" in raw:
        raise SpecError(f"{PLATFORM_KEY}.cluster", "a stack declares `cluster` or `clusters`, not both")
    clusters = _mapping(raw, "clusters")
    roles = _roles(clusters)
    kinds = [kind for entry in clusters.values() for kind in entry if kind in CLOUDS and CLOUDS[kind].cloud]
    for kind in set(kinds):
        if kinds.count(kind) > 1:
            raise SpecError(f"{PLATFORM_KEY}.clusters", f"two {kind} clusters in one stack: their cloud resources "
                                                        "would share names; use one per cloud (or a stack each)")
    owner = _pool_clusters(_mapping(raw, "pools"), roles)
    _team_quotas(_optional_mapping(raw.get("teams"), f"{PLATFORM_KEY}.teams", "team name to its declaration"),
                 owner, roles)
    manager = next(name for name, role in roles.items() if role.role == MANAGER)
    platforms: dict[str, Platform] = {}
    for name in sorted(roles, key=lambda n: (n != manager, n)):
        role = roles[name].role
        try:
            platform = one(_cluster_raw(raw, name, role, owner), stack)
        except SpecError as error:
            raise _relocated(error, name, role) from None
        origin = platforms[manager].cluster_name if platforms else platform.cluster_name
        member = Member(name, role, origin, roles[manager].worker_lost_timeout, roles[name].data)
        prerequisites = platform.prerequisites
        link = roles[name].link
        if link is not None:
            cloud = platform.storage.profile in CLOUD_STORAGE
            prerequisites = with_needs(prerequisites, *link_needs(name, link, roles[name].data, cloud))
        platforms[name] = dataclasses.replace(platform, member=member, prerequisites=prerequisites,
                                              teams=_queues(platform, name, role, owner, raw))
    links = {name: role.link for name, role in roles.items() if role.link is not None}
    for name, link in links.items():
        problem = _link_problem(platforms[name], link)
        if problem:
            raise SpecError(f"{PLATFORM_KEY}.clusters.{name}.link", problem)
        for where, overlap in _address_problems(name, platforms[name], roles[name]):
            raise SpecError(where, overlap)
    hybrid = Hybrid(manager, MappingProxyType(platforms), MappingProxyType(links))
    return dataclasses.replace(platforms[manager], hybrid=hybrid)


def _queues(platform: Platform, name: str, role: str, owner: Mapping[str, str],
            raw: Mapping[str, Any]) -> tuple[TeamFacts, ...]:
    """Queue names across the burst: on a worker the team's queues are named after the worker; on the manager
    each team also gets a burst LocalQueue per worker it may send work to."""
    teams = raw.get("teams") or {}
    if role == WORKER:
        return tuple(dataclasses.replace(team, queue=burst_queue(team.name, name), local_queue=name)
                     for team in platform.teams)
    return tuple(dataclasses.replace(team, burst_queues=tuple(sorted({owner[pool] for pool in
                                                                      teams[team.name].get("burst") or {}})))
                 for team in platform.teams)


def kubeconfig_problem(text: str) -> str | None:
    """What Kueue 0.19.2 refuses in a worker's kubeconfig (the MultiKueueCluster stays Active=False with
    InsecureKubeConfig or BadKubeConfig), or None: exec plugins, auth providers, token files, basic auth, CA
    files and skipped TLS verification are refused; a bearer token and inline CA data over https pass."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return "is not YAML: give the kubeconfig file itself"
    if not isinstance(config, dict) or not config.get("users") or not config.get("clusters"):
        return "is not a kubeconfig (no users or clusters)"
    for entry in config["users"]:
        user, name = (entry or {}).get("user") or {}, (entry or {}).get("name")
        for key, what in (("exec", "an exec plugin (aws eks get-token, gke-gcloud-auth-plugin, kubelogin)"),
                          ("auth-provider", "an auth provider"), ("tokenFile", "a token file"),
                          ("username", "basic auth"), ("client-key", "a client key file")):
            if key in user:
                return (f"user '{name}' uses {what}, which Kueue refuses: use the token of the worker's "
                        "trainyard-multikueue ServiceAccount (docs/hybrid.md)")
        if not user.get("token"):
            return f"user '{name}' has no token: use the token of the worker's trainyard-multikueue ServiceAccount"
    for entry in config["clusters"]:
        cluster, name = (entry or {}).get("cluster") or {}, (entry or {}).get("name")
        if cluster.get("insecure-skip-tls-verify"):
            return f"cluster '{name}' skips TLS verification: give certificate-authority-data"
        if "certificate-authority" in cluster:
            return f"cluster '{name}' reads its CA from a file: inline it as certificate-authority-data"
        if not str(cluster.get("server", "")).startswith("https://"):
            return f"cluster '{name}' server must be an https:// URL"
    return None
