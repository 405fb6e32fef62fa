"""Teams: declared once, each becomes namespaces, quotas, queues and access bindings."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.spec.base import Bytes, Cidr, DnsLabel, NonNegativeInt, PositiveInt, Quantity, Strict
from infra.spec.namespaces import reserved_problem
from infra.spec.queues.queueing import Preemption


def acceptance_namespace(team: str) -> str:
    """The namespace `trainyard accept` creates for its run on a team's queue and removes afterwards; the team's
    ClusterQueue admits it by name like the team's own namespaces (docs/acceptance.md)."""
    return f"{team}-accept"


class PoolQuota(Strict):
    """A team's guaranteed share of one pool. GPUs count whole devices (or time-sliced replicas);
    cpu and memory default to the GPUs' share of what the pool's nodes leave for pods (allocatable: less the kubelet's
    reservation and the platform's DaemonSets)."""

    gpus: NonNegativeInt | None = None
    cpu: Quantity | None = None
    memory: Bytes | None = None
    borrowing_limit: NonNegativeInt | None = Field(default=None, alias="borrowingLimit")
    lending_limit: NonNegativeInt | None = Field(default=None, alias="lendingLimit")


def _group_name(value: str) -> str:
    if not value or value != value.strip() or any(ch.isspace() for ch in value):
        raise ValueError(f"'{value}' is not a group name: give the identity provider's group without spaces")
    if value.startswith("system:"):
        raise ValueError(f"'{value}': 'system:' groups belong to Kubernetes, not to the identity provider")
    return value


GroupName = Annotated[str, AfterValidator(_group_name)]


GROUP_PERSONAS = ("engineers", "analysts", "ci")  # the keys of a team's `groups`
CI_SERVICE_ACCOUNT = "trainyard-ci"  # in every team namespace: what CI submits with, on kubectl and on the web


class Groups(Strict):
    """Identity-provider groups per persona (names without the stack's groupPrefix). `ci` lists the groups
    of external CI identities; every team namespace also gets a `trainyard-ci` ServiceAccount."""

    engineers: list[GroupName] = Field(default_factory=list)
    analysts: list[GroupName] = Field(default_factory=list)
    ci: list[GroupName] = Field(default_factory=list)

    @field_validator("engineers", "analysts", "ci", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _distinct(self) -> Groups:
        for persona in GROUP_PERSONAS:
            names: list[str] = getattr(self, persona)
            if len(set(names)) != len(names):
                raise ValueError(f"{persona}: a group is listed twice")
        return self


class PodSecurity(Strict):
    """The Pod Security Admission level enforced on the team's namespaces (audit and warn stay
    `restricted`). `baseline` is the exception for runtimes that need it (e.g. MPI launchers running
    sshd) and needs a reason, which is written on the namespace for reviewers. `privileged` is never
    granted to a team."""

    level: Literal["restricted", "baseline"] = "restricted"
    reason: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        # `podSecurity: restricted` is shorthand for `podSecurity: {level: restricted}`
        return {"level": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _reasoned(self) -> PodSecurity:
        if self.level == "baseline" and not self.reason:
            raise ValueError("`baseline` is an exception: give `reason` (which runtime needs it and why)")
        return self


Port = Annotated[int, Field(ge=1, le=65535)]


class Destination(Strict):
    """Addresses outside the cluster that a team's pods may reach, e.g. the object store's endpoint."""

    cidr: Cidr
    ports: list[Port] = Field(default_factory=lambda: [443], min_length=1)


# Where team pods go outside the cluster. A team namespace denies all egress but DNS, its own team and the Trainer
# status server; what its pods must reach beyond that is declared once for the stack under `egress` and rendered as
# the team's NetworkPolicies (infra/platform/network.py), then judged against what each pod must reach
# (infra/checks/team_egress.py):
# - `objectStore`: the address ranges of the object store that holds the teams' buckets (S3's published ranges of the
#   region, Google's private.googleapis.com, the Blob private endpoint) and of the token service the pods exchange
#   their federated identity at where it has ranges (Entra ID); every pod of a team reaches them, and so does a
#   volume driver that runs inside the pod (GKE's GCS FUSE sidecar). A team's own `objectStorage` adds to them, and
#   the cloud's credentials endpoint (CloudFacts.pod_credentials) is added for it.
# - `modelHub`: where the runtimes' `hf://` initializers download (the Hugging Face Hub, which publishes no ranges);
#   only the initializer pods reach it.
# Other volume drivers mount on the node's network, and image pulls are the kubelet's: neither needs a rule. The
# in-cluster Ceph RGW has its own rule. Other tenants stay unreachable: their namespaces deny all ingress that is
# not their own team's.

# JobSet labels every pod with the name of its replicated job; a runtime's initializers are replicated jobs.
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
INITIALIZER_JOBS = ("dataset-initializer", "model-initializer")
HF_SCHEME = "hf://"
# CSI drivers whose data path runs inside the pod that mounts the volume (an injected sidecar), so the pod's own
# NetworkPolicies decide whether the volume mounts. GCS FUSE: GoogleCloudPlatform/gcs-fuse-csi-driver.
IN_POD_DRIVERS = {"gcsfuse.csi.storage.gke.io": "the GCS FUSE sidecar of its volume"}


class Egress(Strict):
    """Where every team's pods go outside the cluster: `objectStore`, the object store of the teams' buckets (its
    endpoint's address ranges, and the identity token service's where the cloud has ranges; every pod, and the GCS
    FUSE sidecar), and `modelHub`, where the runtimes' hf:// initializers download (only their pods). A team's own
    `objectStorage` adds to `objectStore`; the cloud's credentials endpoint is added by Trainyard."""

    object_store: list[Destination] = Field(default_factory=list, alias="objectStore")
    model_hub: list[Destination] = Field(default_factory=list, alias="modelHub")
    # What the site keeps for these destinations: `private-store-endpoint` (the store's names resolve to the private
    # addresses objectStore lists: GCS's private.googleapis.com zone, a Blob private endpoint; docs/prerequisites.md)
    provides: list[Literal["private-store-endpoint"]] = Field(default_factory=list)


def store_destinations(egress: Egress, team_destinations: tuple[Destination, ...],
                       credentials: tuple[tuple[str, int], ...]) -> tuple[Destination, ...]:
    """What every pod of a team reaches to use its bucket: the stack's store, the team's own destinations, and the
    cloud's credentials endpoint (CloudFacts.pod_credentials of a cloud store), once something is declared: without
    a store nothing is reached, and the check names the field."""
    declared = [*egress.object_store, *(d for d in team_destinations if d not in egress.object_store)]
    return (*declared, *(Destination(cidr=cidr, ports=[port]) for cidr, port in credentials if declared))


class ServingBudget(Strict):
    """What a team's InferenceServices may request in total, on one pool (`pool`): GPUs (GPU pools only), CPU and
    memory. It is the ResourceQuota of the team's models namespace (infra/spec/models/model.py), plus what its
    registry requests, and it is kept out of the pool's capacity for Kueue: the teams' guaranteed quotas and all
    serving budgets on a pool must fit in it together."""

    pool: DnsLabel
    gpus: NonNegativeInt = 0
    cpu: Quantity
    memory: Bytes


class NamespaceQuota(Strict):
    """Object counts and storage per team namespace (compute comes from `quota`)."""

    pods: PositiveInt = 500
    services: NonNegativeInt = 50
    config_maps: PositiveInt = Field(default=100, alias="configMaps")
    secrets: NonNegativeInt = 100
    persistent_volume_claims: NonNegativeInt = Field(default=20, alias="persistentVolumeClaims")
    storage: Bytes = "20Ti"
    train_jobs: NonNegativeInt = Field(default=100, alias="trainJobs")


class TeamSpec(Strict):
    """A team: its namespaces (default: the team name), guaranteed quota per pool, and access. Each
    namespace gets Pod Security labels, a ResourceQuota up to what Kueue can admit for the team, default
    requests, default-deny network policies with allows for DNS, the team's own namespaces, object storage
    (`objectStorage`: only the declared destinations) and the Trainer status server, and a
    `trainyard-ci` ServiceAccount."""

    namespaces: list[DnsLabel] | None = None
    quota: dict[DnsLabel, NonNegativeInt | PoolQuota]
    weight: Decimal = Field(default=Decimal(1), gt=0, le=1000, strict=False)
    borrowing_limit: NonNegativeInt | None = Field(default=None, alias="borrowingLimit")
    groups: Groups = Field(default_factory=Groups)
    pod_security: PodSecurity = Field(default_factory=PodSecurity, alias="podSecurity")
    object_storage: list[Destination] | None = Field(default=None, alias="objectStorage", min_length=1)
    namespace_quota: NamespaceQuota = Field(default_factory=NamespaceQuota, alias="namespaceQuota")
    # Kueue preemption for this team's ClusterQueue; unset fields take `queueing.preemption`.
    preemption: Preemption | None = None
    # What the team's InferenceServices may use (needs the stack's `models`); None: it serves nothing.
    serving: ServingBudget | None = None

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, names: list[str] | None) -> list[str] | None:
        if names is not None:
            if not names:
                raise ValueError("list at least one namespace, or leave `namespaces` out")
            if len(set(names)) != len(names):
                raise ValueError("a namespace is listed twice")
            for name in names:
                problem = reserved_problem(name)
                if problem:
                    raise ValueError(f"{problem}: choose another name")
        return names

    @model_validator(mode="after")
    def _has_quota(self) -> TeamSpec:
        if not self.quota:
            raise ValueError("`quota` needs at least one pool")
        return self

    def egress_destinations(self) -> tuple[Destination, ...]:
        return tuple(self.object_storage or ())

    def pool_quota(self, pool: str) -> PoolQuota:
        value = self.quota[pool]
        return PoolQuota(gpus=value) if isinstance(value, int) else value


def check_group_personas(teams: dict[str, TeamSpec]) -> None:
    """A directory group holds one persona of one team. Two teams sharing a group would each reach the other's
    namespaces (kubectl and web alike); a group that is two personas of one team is ambiguous in review, and as
    `ci` beside another persona it would hold that persona's jobs to CI's admission rules."""
    holder: dict[str, tuple[str, str]] = {}
    for name, team in teams.items():
        for persona in GROUP_PERSONAS:
            for group in getattr(team.groups, persona):
                where = f"teams.{name}.groups.{persona}"
                if group in holder and holder[group][0] != name:
                    raise ValueError(f"{where}: '{group}' is already team {holder[group][0]}'s "
                                     f"{holder[group][1]}: one group would reach both teams' namespaces; give each "
                                     "team its own group")
                if group in holder:
                    raise ValueError(f"{where}: '{group}' is already the team's {holder[group][1]}: a group holds "
                                     "one persona (engineers may do what analysts may); keep it under one")
                holder[group] = (name, persona)
