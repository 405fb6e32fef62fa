"""The queue model the simulator replays a trace through, taken from the stack's derived queueing facts (the same
numbers infra/platform/kueue.py renders into ClusterQueues and the Cohort): per team its flavors in Kueue's order
with nominal quota, lending and borrowing limits of the pool's GPU resource, its fair-sharing weight and
preemption policies; per pool its capacity, its GPUs per node and the cohort's shared pool there.

Only the GPU resource of each pool is modelled: cpu and memory quotas follow the GPU share (infra/spec/derive.py),
so a job that fits its GPUs fits them too. On a hybrid stack this is the manager's queues (its own pools)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property

from infra.spec import Platform
from infra.spec.pools import GPU_RESOURCE

DEFAULT_RESOURCE = GPU_RESOURCE  # what a job with no pool requests
NO_PRIORITY = 0  # Kueue's priority for a workload with no WorkloadPriorityClass (and no pod PriorityClass)


@dataclass(frozen=True)
class Entry:
    """One flavor of a team's ClusterQueue, in GPU units of the pool's resource."""

    flavor: str
    nominal: int
    lends: int  # what the cohort may lend others of it: the lendingLimit, else the whole nominal quota
    borrowing_limit: int | None  # None: up to what the cohort can lend


@dataclass(frozen=True)
class Queue:
    team: str
    weight: Decimal
    entries: tuple[Entry, ...]  # in the order Kueue tries them
    reclaim: str  # reclaimWithinCohort: Never | LowerPriority | Any
    within: str  # withinClusterQueue: Never | LowerPriority | LowerOrNewerEqualPriority
    borrow_policy: str  # borrowWithinCohort: Never | LowerPriority
    borrow_threshold: int | None  # borrowWithinCohort.maxPriorityThreshold

    @cached_property
    def _by_flavor(self) -> dict[str, Entry]:
        return {entry.flavor: entry for entry in self.entries}

    def entry(self, flavor: str) -> Entry | None:
        return self._by_flavor.get(flavor)


@dataclass(frozen=True)
class Pool:
    name: str
    resource: str  # nvidia.com/gpu, or nvidia.com/mig-<profile> on a MIG pool
    capacity: int  # units at the pool's maximum size: what Kueue can admit there
    per_node: int  # units per node: one pod never gets more
    shared: int  # the cohort's own nominal quota here (units no team is guaranteed)


@dataclass(frozen=True)
class Model:
    stack: str
    queues: Mapping[str, Queue]
    pools: Mapping[str, Pool]  # GPU pools only, in Kueue's flavor order
    priorities: Mapping[str, int]
    fair_sharing: bool
    strict_fifo: bool
    when_can_borrow: str  # flavorFungibility: MayStopSearch | TryNextFlavor
    when_can_preempt: str

    def pool_size(self, flavor: str) -> int:
        """What the cohort holds to lend on a pool: its shared pool plus every queue's lendable quota there."""
        return self.pools[flavor].shared + sum(e.lends for q in self.queues.values() for e in q.entries
                                                if e.flavor == flavor)

    def reach(self, team: str, flavor: str) -> int:
        """The most a team's queue can ever hold on a pool: nominal plus what it may borrow of what others lend."""
        entry = self.queues[team].entry(flavor)
        if entry is None:
            return 0
        borrowable = self.pool_size(flavor) - entry.lends
        limit = borrowable if entry.borrowing_limit is None else min(entry.borrowing_limit, borrowable)
        return entry.nominal + max(limit, 0)

    def lendable(self, resource: str) -> int:
        """The cohort's lendable total of a resource over every pool: the denominator of Kueue's fair share."""
        return sum(self.pool_size(pool.name) for pool in self.pools.values() if pool.resource == resource)


def _units(value: Decimal | None) -> int | None:
    return None if value is None else int(value)


def build(platform: Platform) -> Model:
    facts = platform.queueing
    queueing = platform.spec.queueing
    pools: dict[str, Pool] = {}
    for name in facts.flavor_order:
        flavor = platform.flavor(name)
        if not flavor.gpu_resources or flavor.gpu is None:
            continue
        resource = flavor.gpu_resources[0]
        pools[name] = Pool(name, resource, int(flavor.max_capacity.get(resource, flavor.capacity[resource])),
                           flavor.gpu.units_per_node, int(facts.shared_pool.get(name, {}).get(resource, 0)))
    weights = {team.name: team.weight for team in platform.teams}
    queues: dict[str, Queue] = {}
    for queue in facts.queues:
        entries = []
        for entry in queue.flavors:
            pool = pools.get(entry.flavor)
            if pool is None:
                continue
            nominal = int(entry.nominal.get(pool.resource, 0))
            lending = _units(entry.lending.get(pool.resource))
            entries.append(Entry(entry.flavor, nominal, nominal if lending is None else lending,
                                 _units(entry.borrowing.get(pool.resource))))
        stanza = queue.preemption
        borrow = stanza.get("borrowWithinCohort", {})
        queues[queue.team] = Queue(queue.team, weights[queue.team], tuple(entries),
                                   stanza["reclaimWithinCohort"], stanza["withinClusterQueue"],
                                   borrow.get("policy", "Never"), borrow.get("maxPriorityThreshold"))
    fungibility = queueing.flavor_fungibility
    return Model(
        stack=platform.stack, queues=queues, pools=pools,
        priorities={name: p.value for name, p in facts.priorities.items()},
        fair_sharing=queueing.fair_sharing, strict_fifo=queueing.queueing_strategy == "StrictFIFO",
        when_can_borrow=fungibility.when_can_borrow, when_can_preempt=fungibility.when_can_preempt,
    )

