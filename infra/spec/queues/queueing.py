"""Kueue settings (the `queueing` section, per-team preemption) and what they become: priorities, the order in
which a team queue tries the pools, the Topology objects, each team's ClusterQueue entries and the cohort's
shared pool. Components read these facts; nothing downstream recomputes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from infra.spec.base import DnsLabel, Int32, NonNegativeInt32, PositiveInt32, Strict
from infra.spec.queues.borrowing import DEFAULT_BORROWING_LIMIT, Cohort, bounded

if TYPE_CHECKING:
    from infra.spec.derive import Flavor, TeamFacts
    from infra.spec.pools import PoolSpec
    from infra.spec.teams import TeamSpec

DURATION = r"^[0-9]+(s|m|h)$"
HOSTNAME = "kubernetes.io/hostname"
# Pools are tried cheapest-first: capacity already paid for, then on-demand, then interruptible spot.
CAPACITY_ORDER = ("reserved", "on-demand", "spot")
# What team quotas count: a resource prefix must not cover these (MIG slices are nvidia.com/mig-<profile>).
QUOTA_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb")


class WaitForPodsReady(Strict):
    """Gang admission: an admitted job whose pods are not all ready in time gives its quota back and is
    requeued with exponential backoff (base, max); after `backoffLimitCount` requeues it is deactivated."""

    timeout: str = Field(default="10m", pattern=DURATION)
    recovery_timeout: str = Field(default="3m", alias="recoveryTimeout", pattern=DURATION)
    block_admission: bool = Field(default=False, alias="blockAdmission")
    backoff_base_seconds: PositiveInt32 = Field(default=60, alias="backoffBaseSeconds")
    backoff_max_seconds: PositiveInt32 = Field(default=3600, alias="backoffMaxSeconds")
    backoff_limit_count: NonNegativeInt32 | None = Field(default=None, alias="backoffLimitCount")

    @field_validator("timeout", "recovery_timeout")
    @classmethod
    def _not_zero(cls, value: str) -> str:
        if int(value[:-1]) == 0:
            raise ValueError(f"'{value}' is zero: every job would be requeued at once; give a time such as 10m")
        return value

    @model_validator(mode="after")
    def _backoff_ordered(self) -> WaitForPodsReady:
        if self.backoff_base_seconds > self.backoff_max_seconds:
            raise ValueError(f"backoffBaseSeconds: {self.backoff_base_seconds} is above backoffMaxSeconds "
                             f"{self.backoff_max_seconds}: the first requeue would already wait longer than the "
                             "longest wait; lower the base or raise the maximum")
        return self


class PriorityClass(Strict):
    """A Kueue WorkloadPriorityClass; jobs pick one with the label kueue.x-k8s.io/priority-class."""

    multiline = frozenset({"description"})  # free text, shown as written

    value: Int32
    description: str = Field(default="", max_length=2048)


def _default_priorities() -> dict[str, PriorityClass]:
    return {
        "production": PriorityClass(value=1000, description="Production training: preempts research and sweeps"),
        "research": PriorityClass(value=500, description="Day-to-day experiments"),
        "sweep": PriorityClass(value=100, description="Hyperparameter sweeps and batch work: first to be preempted"),
    }


class Preemption(Strict):
    """Kueue ClusterQueue preemption. Unset fields take the `queueing.preemption` default."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] | None = Field(
        default=None, alias="reclaimWithinCohort")
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = Field(
        default=None, alias="withinClusterQueue")
    borrow_within_cohort: Literal["Never", "LowerPriority"] | None = Field(default=None, alias="borrowWithinCohort")
    borrow_max_priority: Int32 | None = Field(default=None, alias="borrowMaxPriority")

    def over(self, default: Preemption) -> Preemption:
        """These settings with the unset ones taken from `default`."""
        return default.model_copy(update={k: v for k, v in self if v is not None})

    def as_kueue(self) -> dict[str, Any]:
        stanza: dict[str, Any] = {
            "reclaimWithinCohort": self.reclaim_within_cohort or "Never",
            "withinClusterQueue": self.within_cluster_queue or "Never",
        }
        if self.borrow_within_cohort:
            stanza["borrowWithinCohort"] = {"policy": self.borrow_within_cohort}
            if self.borrow_max_priority is not None:
                stanza["borrowWithinCohort"]["maxPriorityThreshold"] = self.borrow_max_priority
        return stanza

    def problem(self, fair_sharing: bool) -> str | None:
        """Kueue's own rules for a complete preemption stanza (reference/kueue.md 4, rule 11)."""
        borrows = self.borrow_within_cohort not in (None, "Never")
        if borrows and fair_sharing:
            return "borrowWithinCohort is classic preemption only: Kueue ignores it under fair sharing; remove it"
        if borrows and self.reclaim_within_cohort in (None, "Never"):
            return "borrowWithinCohort needs reclaimWithinCohort LowerPriority or Any (Kueue rejects Never)"
        if self.borrow_max_priority is not None and not borrows:
            return "borrowMaxPriority applies only with borrowWithinCohort: LowerPriority"
        return None


class FlavorFungibility(Strict):
    """What a job does when its first pool has room only by borrowing or preempting. The defaults keep jobs
    on the cheapest pool while it has room, borrowed or not, and try the next pool before preempting."""

    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = Field(default="MayStopSearch",
                                                                        alias="whenCanBorrow")
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = Field(default="TryNextFlavor",
                                                                         alias="whenCanPreempt")


def _borrowing_default(value: int | str) -> int | str:
    if isinstance(value, int):
        valid = value >= 0
    else:
        digits = value.removesuffix("%")
        valid = value.endswith("%") and digits.isdigit() and int(digits) <= 100
    if not valid:
        raise ValueError(f"'{value}' is neither a number of GPUs (0 or more) nor a percentage from 0% to 100%: "
                         "give e.g. 8 (GPUs per pool) or 50% (of what the rest of the cohort can lend)")
    return value


BorrowingDefault = Annotated[int | str, AfterValidator(_borrowing_default)]


class Queueing(Strict):
    """Kueue settings shared by every team."""

    cohort: DnsLabel = "trainyard"
    fair_sharing: bool = Field(default=True, alias="fairSharing")
    wait_for_pods_ready: WaitForPodsReady = Field(default_factory=WaitForPodsReady, alias="waitForPodsReady")
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        default="BestEffortFIFO", alias="queueingStrategy"
    )
    priorities: dict[DnsLabel, PriorityClass] = Field(default_factory=_default_priorities)
    preemption: Preemption = Field(default_factory=lambda: Preemption(
        reclaim_within_cohort="Any", within_cluster_queue="LowerPriority"))
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility, alias="flavorFungibility")
    # Kueue lends a flavor only to queues that list it. Off: a team queue lists the pools it has a quota on
    # (and the capacity check warns about a pool no queue lists). On: every team queue lists every pool, with
    # nominal quota 0 where it has no guarantee, so idle GPUs anywhere can be borrowed.
    borrow_any_pool: bool = Field(default=False, alias="borrowAnyPool")
    # The GPU borrowingLimit of every team queue entry that declares none (docs/resource-policies.md): a number
    # of GPUs per pool, or a percentage of what the rest of the cohort can lend the team there, rounded down.
    # Below 100% a team never reaches a whole pool that other teams queue for.
    default_borrowing_limit: BorrowingDefault = Field(default="50%", alias="defaultBorrowingLimit")
    exclude_resource_prefixes: list[str] = Field(default_factory=list, alias="excludeResourcePrefixes")

    @field_validator("exclude_resource_prefixes")
    @classmethod
    def _not_quota_resources(cls, prefixes: list[str]) -> list[str]:
        # Kueue would stop counting these: a GPU, cpu or memory prefix turns every team's quota off for it.
        for index, prefix in enumerate(prefixes):
            covered = next((r for r in QUOTA_RESOURCES if r.startswith(prefix)), None)
            if covered is not None:
                raise ValueError(f"[{index}]: '{prefix}' would exclude {covered} from quota, and teams could take "
                                 "any amount of it: exclude other resources only (e.g. example.com/fpga)")
        return prefixes

    @field_validator("priorities", mode="before")
    @classmethod
    def _priority_shorthand(cls, value: object) -> object:
        # `priorities: {production: 1000}` is shorthand for `{production: {value: 1000}}`
        if not isinstance(value, dict):
            return value
        for name, item in value.items():
            if isinstance(item, bool) or not isinstance(item, int | dict):
                raise ValueError(f"{name}: give the priority as a whole number (production: 1000) or as "
                                 "{value: 1000, description: ...}")
        return {k: {"value": v} if isinstance(v, int) else v for k, v in value.items()}

    @model_validator(mode="after")
    def _consistent(self) -> Queueing:
        problem = self.preemption.problem(self.fair_sharing)
        if problem:
            raise ValueError(f"preemption: {problem}")
        values = [p.value for p in self.priorities.values()]
        if len(set(values)) != len(values):
            raise ValueError("priorities: two classes share a value: give each a distinct value")
        return self


def topology_name(levels: Mapping[str, str]) -> str:
    """A Topology is named after its level names (`rack-node`, `block-subblock-host-node`): pools that declare
    the same levels, as the pools of one environment do, share one Topology."""
    return "-".join([*levels, "node"])


def check_queueing(queueing: Queueing, pools: Mapping[str, PoolSpec], teams: Mapping[str, TeamSpec]) -> None:
    """Cross-section rules: a team's preemption override, completed by the default, must still be one Kueue
    accepts; pools whose topology levels share names must share the labels too (they share a Topology)."""
    for name, team in teams.items():
        if team.preemption is not None:
            problem = team.preemption.over(queueing.preemption).problem(queueing.fair_sharing)
            if problem:
                raise ValueError(f"teams.{name}.preemption: {problem}")
    seen: dict[str, tuple[str, dict[str, str]]] = {}
    for name, pool in pools.items():
        levels = pool.topology_levels()
        if not levels:
            continue
        first = seen.setdefault(topology_name(levels), (name, levels))
        if first[1] != levels:
            raise ValueError(f"pools.{name}.topology: same level names as pool '{first[0]}' but other labels; "
                             "rename the levels (they name the shared Kueue Topology) or use the same labels")


@dataclass(frozen=True)
class Topology:
    name: str
    levels: tuple[str, ...]  # node labels, broadest first, kubernetes.io/hostname last


@dataclass(frozen=True)
class QueueFlavor:
    """One flavor entry of a team's ClusterQueue."""

    flavor: str
    nominal: Mapping[str, Decimal]
    borrowing: Mapping[str, Decimal | None]  # GPU resources: always bounded once derived; cpu, memory: none
    lending: Mapping[str, Decimal | None]
    limit_from: str = DEFAULT_BORROWING_LIMIT  # the stack-file path its GPU borrowingLimit comes from
    # resource -> the most Kueue can admit here: nominal plus what it may borrow, within what the cohort lends
    reach: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class TeamQueue:
    team: str
    covered: tuple[str, ...]
    flavors: tuple[QueueFlavor, ...]  # in the order Kueue tries them
    preemption: Mapping[str, Any]  # the ClusterQueue preemption stanza


@dataclass(frozen=True)
class QueueingFacts:
    priorities: Mapping[str, PriorityClass]
    flavor_order: tuple[str, ...]
    topologies: tuple[Topology, ...]
    queues: tuple[TeamQueue, ...]
    shared_pool: Mapping[str, Mapping[str, Decimal]]  # flavor -> resource -> capacity no team is guaranteed
    exclude_resource_prefixes: tuple[str, ...]

    @cached_property
    def _by_team(self) -> Mapping[str, TeamQueue]:
        return {queue.team: queue for queue in self.queues}

    @cached_property
    def cohort(self) -> Cohort:
        return Cohort(self.queues, self.shared_pool)

    def queue(self, team: str) -> TeamQueue:
        return self._by_team[team]

    def lendable(self, flavor: str, resource: str, borrower: str) -> Decimal:
        return self.cohort.lendable(flavor, resource, self.queue(borrower))

    def reach(self, team: str) -> dict[str, Decimal]:
        """The most Kueue can ever admit for a team, per resource, summed over the pools its queue lists."""
        total: dict[str, Decimal] = {}
        for entry in self.queue(team).flavors:
            for resource, amount in entry.reach.items():
                total[resource] = total.get(resource, Decimal(0)) + amount
        return total


def flavor_order(flavors: Sequence[Flavor]) -> tuple[str, ...]:
    """Reserved, then on-demand, then spot; declaration order within a capacity type."""
    ranked = sorted(enumerate(flavors), key=lambda pair: (CAPACITY_ORDER.index(pair[1].capacity_type), pair[0]))
    return tuple(flavor.name for _, flavor in ranked)


def _topologies(flavors: Sequence[Flavor]) -> tuple[Topology, ...]:
    """One Topology per distinct level list (per environment: a site's rack labels, GKE blocks, EKS network
    layers); flavors with the same levels reference the same Topology."""
    topologies: dict[str, Topology] = {}
    for flavor in flavors:
        if flavor.topology_levels:
            name = topology_name(flavor.topology_levels)
            topologies.setdefault(name, Topology(name, (*flavor.topology_levels.values(), HOSTNAME)))
    return tuple(topologies.values())


def _declared_limit(team: str, spec: TeamSpec, pool: str) -> tuple[Decimal | None, str]:
    """A team's own borrowingLimit on a pool (the pool's, else the team's) and where it is written."""
    own = spec.pool_quota(pool).borrowing_limit if pool in spec.quota else None
    if own is not None:
        return Decimal(own), f"teams.{team}.quota.{pool}.borrowingLimit"
    if spec.borrowing_limit is not None:
        return Decimal(spec.borrowing_limit), f"teams.{team}.borrowingLimit"
    return None, DEFAULT_BORROWING_LIMIT


def _queue(team: TeamFacts, spec: TeamSpec, queueing: Queueing, flavors: Mapping[str, Flavor],
           order: Sequence[str], covered_all: Sequence[str]) -> TeamQueue:
    """The team's entries with its declared borrowing limits only (None: the default, resolved by borrowing.bounded)."""
    listed = [name for name in order if name in team.quota or queueing.borrow_any_pool]
    covered = tuple(r for r in covered_all if any(r in flavors[name].capacity for name in listed))
    entries = []
    for name in listed:
        limit, origin = _declared_limit(team.name, spec, name)
        borrowing = MappingProxyType({r: limit for r in flavors[name].gpu_resources})
        if name in team.quota:
            entries.append(QueueFlavor(name, team.quota[name], borrowing, team.lending[name], origin))
        else:
            entries.append(QueueFlavor(name, MappingProxyType({r: Decimal(0) for r in covered}), borrowing,
                                       MappingProxyType({}), origin))
    preemption = spec.preemption.over(queueing.preemption) if spec.preemption else queueing.preemption
    return TeamQueue(team.name, covered, tuple(entries), MappingProxyType(preemption.as_kueue()))


def derive_queueing(queueing: Queueing, pools: Mapping[str, PoolSpec], teams: Mapping[str, TeamSpec],
                    flavors: Sequence[Flavor], team_facts: Sequence[TeamFacts], covered: Sequence[str],
                    shared_pool: Mapping[str, Mapping[str, Decimal]]) -> QueueingFacts:
    by_name = {flavor.name: flavor for flavor in flavors}
    order = flavor_order(flavors)
    # Fabric devices come with a node (EFA interfaces, RDMA devices): Kueue would otherwise refuse every job that
    # requests them unless each queue also carried a quota for them.
    devices = sorted({p.fabric_resource for p in pools.values() if p.fabric_resource})
    prefixes = [*queueing.exclude_resource_prefixes, *devices]
    return QueueingFacts(
        priorities=MappingProxyType(dict(queueing.priorities)),
        flavor_order=order,
        topologies=_topologies(flavors),
        queues=bounded([_queue(t, teams[t.name], queueing, by_name, order, covered) for t in team_facts],
                        shared_pool, queueing.default_borrowing_limit),
        shared_pool=shared_pool,
        exclude_resource_prefixes=tuple(dict.fromkeys(prefixes)),
    )
