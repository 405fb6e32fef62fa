"""How a worker's dispatched jobs reach their data and images (`clusters.<worker>.data`).

MultiKueue copies a job and its Workload to the worker, nothing else: the volumes, Secrets and registry access
the job uses must already be there. A worker therefore declares where the bursting teams' jobs read datasets and
write checkpoints, and how it reaches them: `manager`, the team's bucket in the manager's object store, published
to the worker at `manager.endpoint` over a network path and read with the S3 keys of a Secret the site copies to
each bursting team namespace; `worker`, the team's bucket that the worker's own storage layer makes, reached as
the team's `datasets` account (the cloud's workload identity, infra/spec/storage/model.py); or `volume`, the team's
volume, which the plan refuses for a burst (the worker's volume of that name is another, empty one). It also
lists the registries its nodes pull from, with the pull Secret of a private one. The offline checks
(infra/checks/hybrid_data.py) judge the declaration against what each cluster builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from infra.spec.base import Cidr, SecretName, Strict
from infra.spec.clouds import CLOUD_STORAGE
from infra.spec.policy import RegistryPrefix
from infra.spec.prerequisites import Need, Provision
from infra.spec.storage.model import TEAM_DATA_ACCOUNT, Bucket

if TYPE_CHECKING:
    from infra.spec.derive import Platform
    from infra.spec.hybrid.model import Link

Network = Literal["vpn", "interconnect", "public"]  # a path between the sites: a link, a store, a registry
Location = Literal["manager", "worker", "volume"]
KINDS = ("datasets", "checkpoints")
CONFIG_MAP = "trainyard-data"  # in each bursting team namespace on the worker: where its jobs' data is
# Team bucket URIs per storage profile (Rook's object store speaks S3).
SCHEME = {"rook-ceph": "s3", **{profile: cloud.bucket_scheme for profile, cloud in CLOUD_STORAGE.items()}}


class ManagerStore(Strict):
    """The manager's object store as the worker's pods reach it: `endpoint` (the S3 API, published for the
    worker), `network` (the path: vpn, interconnect, or public, which needs https), `cidr` (the endpoint's
    addresses as the worker's pods see them; their egress is opened to it) and `secretName` (a Secret the site
    copies into each bursting team namespace on the worker, with the keys of the team's bucket claim)."""

    endpoint: str
    network: Network
    cidr: Cidr
    secret_name: SecretName = Field(alias="secretName")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.path.strip("/") or parts.query:
            raise ValueError(f"'{value}' is not an object store endpoint: give https://host[:port]")
        if parts.username or parts.password:
            raise ValueError(f"'{value}' carries credentials: put them in the Secret named by secretName")
        return value

    @property
    def port(self) -> int:
        parts = urlsplit(self.endpoint)
        return parts.port or (443 if parts.scheme == "https" else 80)


class Registry(Strict):
    """A registry (or a path in it) the worker's nodes pull from: over `network` (default public), with the
    pull Secret `pullSecretName` when it is private (set on each bursting team's `datasets` account)."""

    prefix: RegistryPrefix
    network: Network = "public"
    pull_secret_name: SecretName | None = Field(default=None, alias="pullSecretName")


class WorkerData(Strict):
    """`clusters.<worker>.data`: where the bursting teams' jobs read datasets and write checkpoints on this
    worker (manager | worker | volume), the manager's object store as seen from here, and the registries."""

    datasets: Location = "volume"
    checkpoints: Location = "volume"
    manager: ManagerStore | None = None
    registries: list[Registry] = Field(default_factory=list)

    @field_validator("registries")
    @classmethod
    def _distinct(cls, registries: list[Registry]) -> list[Registry]:
        prefixes = [r.prefix for r in registries]
        twice = sorted({p for p in prefixes if prefixes.count(p) > 1})
        if twice:
            raise ValueError(f"'{twice[0]}' is listed twice: one entry per registry prefix")
        return registries

    @property
    def read_store(self) -> ManagerStore | None:
        """The manager's object store when datasets or checkpoints are read there (None when neither is)."""
        return self.manager if "manager" in (self.datasets, self.checkpoints) else None


@dataclass(frozen=True)
class Place:
    """Where one kind of a team's data is for its jobs on a worker."""

    location: Location
    uri: str | None  # None: a volume, or no bucket on that side
    endpoint: str | None  # the S3 endpoint when it is not the cloud's own
    secret: str | None  # the Secret with its keys; None: the team's datasets account (workload identity)


def _bucket(platform: Platform, team: str) -> Bucket | None:
    return next((b for b in platform.storage.buckets if b.team == team), None)


def place(data: WorkerData, kind: str, team: str, manager: Platform, worker: Platform) -> Place:
    """Where `kind` (datasets | checkpoints) of `team` is for its jobs on the worker; checkpoints go under
    `checkpoints/` of the team bucket."""
    location: Location = getattr(data, kind)
    if location == "volume":
        return Place(location, None, None, None)
    side = manager if location == "manager" else worker
    bucket = _bucket(side, team)
    uri = None if bucket is None else f"{SCHEME[side.storage.profile]}://{bucket.name}"
    if uri is not None and kind == "checkpoints":
        uri += "/checkpoints"
    if location == "manager":
        store = data.manager
        return Place(location, uri, store.endpoint if store else None, store.secret_name if store else None)
    # A bucket claim (Ceph) brings its keys in a Secret named after it; a cloud bucket is the account's identity.
    claim = bucket.key if bucket is not None and worker.storage.bucket_class is not None else None
    return Place(location, uri, worker.storage.rgw_url, claim)


def data_env(data: WorkerData, team: str, manager: Platform, worker: Platform) -> dict[str, str]:
    """The ConfigMap `trainyard-data` of a bursting team namespace: DATASETS_URI, CHECKPOINTS_URI and, where
    they apply, *_ENDPOINT (an S3 endpoint other than the cloud's) and *_SECRET (the Secret with the keys)."""
    env: dict[str, str] = {}
    for kind in KINDS:
        found = place(data, kind, team, manager, worker)
        for key, value in (("URI", found.uri), ("ENDPOINT", found.endpoint), ("SECRET", found.secret)):
            if value is not None:
                env[f"{kind.upper()}_{key}"] = value
    return env


def pull_secrets(data: WorkerData | None) -> tuple[str, ...]:
    return tuple(sorted({r.pull_secret_name for r in data.registries if r.pull_secret_name})) if data else ()


def link_needs(worker: str, link: Link, data: WorkerData | None,
               worker_cloud: bool) -> tuple[list[Need], dict[str, Provision]]:
    """What a worker needs from the site for the burst, as prerequisites: the network path of each connection
    and the Secrets that MultiKueue does not copy. The declared link provides its network, the worker's internet
    egress `public`; another private path than the link's is provided by nothing (the plan's prerequisites
    check then refuses it); so is the link's own private network until its cloud side is declared
    (`link.attachment`)."""
    where = f"clusters.{worker}"
    needs = [Need(f"link:{link.network}", f"multikueue ({where}.link: the manager's Kueue calls this API server "
                                          f"from {link.source})")]
    provided = {"link:public": Provision("cluster", "the worker's internet egress")}
    if link.attachment is not None:
        provided[f"link:{link.network}"] = Provision("site", f"declared in {where}.link.attachment "
                                                            f"({link.attachment})")
    if data is None:
        return needs, provided
    store = data.read_store
    if store is not None:
        needs.append(Need(f"link:{store.network}", f"burst data ({where}.data.manager: {store.endpoint})"))
        needs.append(Need(f"secret:{store.secret_name}", f"burst data ({where}.data.manager.secretName: the keys "
                                                         "of the team's bucket on the manager)"))
    for network in sorted({r.network for r in data.registries}):
        prefixes = ", ".join(r.prefix for r in data.registries if r.network == network)
        needs.append(Need(f"link:{network}", f"images ({where}.data.registries: {prefixes})"))
    for registry in data.registries:
        if registry.pull_secret_name:
            needs.append(Need(f"secret:{registry.pull_secret_name}", f"images ({where}.data.registries: pull "
                                                                     f"Secret for {registry.prefix})"))
    if "worker" in (data.datasets, data.checkpoints) and worker_cloud:
        needs.append(Need("workload-identity", f"burst data ({where}.data: the team's bucket here, as its "
                                               f"{TEAM_DATA_ACCOUNT} account)"))
    for need in needs:
        if need.capability.startswith("secret:"):
            provided[need.capability] = Provision("site", "created by the site in each bursting team namespace "
                                                          "(MultiKueue copies no Secret); trainyard verify checks it")
    return needs, provided
