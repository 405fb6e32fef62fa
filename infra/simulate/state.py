"""What the cohort holds at one instant: each queue's usage per pool, the part of it drawn from what the cohort
lends, the running jobs, and Kueue's two yardsticks over them: whether a job fits (nominal quota, borrowing limit,
what the others lend) and a queue's dominant resource share (fair sharing)."""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.simulate.queues import Model
from infra.simulate.trace import Job

SHARE_SCALE = 1000  # Kueue computes shares in thousandths, with integer division


@dataclass
class Workload:
    """A job inside the simulation: its queue-order timestamp moves to its last eviction (requeuingStrategy
    timestamp: Eviction); the time it waited is summed over every stay in the queue."""

    job: Job
    priority: int
    ordered_at: int
    pending_since: int
    waited: int = 0
    admissions: int = 0
    parked: bool = False  # found inadmissible: tried again once quota is released (a job finishes)

    def key(self) -> tuple[int, int, int]:
        """Kueue's queue order: higher priority first, then the earlier timestamp, then the name (the line)."""
        return (-self.priority, self.ordered_at, self.job.line)


@dataclass
class Run:
    workload: Workload
    team: str
    flavor: str
    units: int
    start: int
    serial: int  # tells a finish event of this run from one of an earlier, preempted run


@dataclass
class State:
    model: Model
    usage: dict[tuple[str, str], int] = field(default_factory=dict)
    from_pool: dict[str, int] = field(default_factory=dict)  # per pool: usage beyond the queues' private parts
    running: dict[tuple[str, str], dict[int, Run]] = field(default_factory=dict)  # (team, pool) -> serial -> run
    busy: dict[str, int] = field(default_factory=dict)  # per pool: unit-seconds used
    size: dict[str, int] = field(default_factory=dict)
    borrowed: dict[str, dict[str, int]] = field(default_factory=dict)  # team -> resource -> units above nominal
    epoch: int = 0  # moved on by every admission, eviction and finish: what per-epoch caches are keyed by
    _lenders: dict[str, tuple[int, list[tuple[float, str]], list[int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.size = {name: self.model.pool_size(name) for name in self.model.pools}
        self.from_pool = dict.fromkeys(self.model.pools, 0)
        self.busy = dict.fromkeys(self.model.pools, 0)
        self._lendable = {r: self.model.lendable(r) for r in {p.resource for p in self.model.pools.values()}}
        self.borrowed = {team: {} for team in self.model.queues}

    def used(self, team: str, flavor: str) -> int:
        return self.usage.get((team, flavor), 0)

    def _change(self, team: str, flavor: str, delta: int) -> None:
        entry = self.model.queues[team].entry(flavor)
        assert entry is not None
        private = entry.nominal - entry.lends
        old = self.used(team, flavor)
        self.usage[(team, flavor)] = old + delta
        self.from_pool[flavor] += max(0, old + delta - private) - max(0, old - private)
        resource = self.model.pools[flavor].resource
        borrowed = self.borrowed[team]
        borrowed[resource] = borrowed.get(resource, 0) + max(0, old + delta - entry.nominal) - \
            max(0, old - entry.nominal)

    def add(self, run: Run) -> None:
        self._change(run.team, run.flavor, run.units)
        self.running.setdefault((run.team, run.flavor), {})[run.serial] = run

    def remove(self, run: Run) -> None:
        self._change(run.team, run.flavor, -run.units)
        del self.running[(run.team, run.flavor)][run.serial]

    def fits(self, team: str, flavor: str, units: int) -> bool:
        entry = self.model.queues[team].entry(flavor)
        if entry is None:
            return False
        used = self.used(team, flavor)
        if entry.borrowing_limit is not None and used + units > entry.nominal + entry.borrowing_limit:
            return False
        private = entry.nominal - entry.lends
        extra = max(0, used + units - private) - max(0, used - private)
        return self.from_pool[flavor] + extra <= self.size[flavor]

    def borrows(self, team: str, flavor: str, units: int = 0) -> bool:
        entry = self.model.queues[team].entry(flavor)
        return entry is not None and self.used(team, flavor) + units > entry.nominal

    def share(self, team: str, flavor: str | None = None, units: int = 0) -> float:
        """The queue's weighted dominant resource share, with `units` more on `flavor`: per resource, what it
        borrows in thousandths of what the cohort lends, the largest of these, over the queue's weight."""
        queue = self.model.queues[team]
        borrowed = self.borrowed[team]
        if units and flavor is not None:
            entry = queue.entry(flavor)
            assert entry is not None
            used = self.used(team, flavor)
            resource = self.model.pools[flavor].resource
            borrowed = {**borrowed, resource: borrowed.get(resource, 0) + max(0, used + units - entry.nominal)
                        - max(0, used - entry.nominal)}
        dominant = 0
        for resource, amount in borrowed.items():
            if amount:
                lendable = self._lendable[resource]
                dominant = max(dominant, amount * SHARE_SCALE // lendable if lendable else 2**31)
        if dominant == 0:
            return 0.0
        milli = int(queue.weight * 1000)
        return float("inf") if milli == 0 else dominant * 1000 / milli

    def runs(self, team: str, flavor: str) -> list[Run]:
        return list(self.running.get((team, flavor), {}).values())

    def borrowers(self, flavor: str) -> list[tuple[float, str]]:
        """The queues borrowing on a pool, largest share first (then by name), and the units each holds there;
        computed once an epoch."""
        return self._borrowers(flavor)[1]

    def _borrowers(self, flavor: str) -> tuple[int, list[tuple[float, str]], list[int]]:
        cached = self._lenders.get(flavor)
        if cached is None or cached[0] != self.epoch:
            ranked = sorted(((self.share(team), team) for team in self.model.queues if self.borrows(team, flavor)),
                            key=lambda pair: (-pair[0], pair[1]))
            totals, running = [], 0
            for _, team in ranked:
                running += self.used(team, flavor)
                totals.append(running)
            cached = (self.epoch, ranked, totals)
            self._lenders[flavor] = cached
        return cached

    def held_above(self, flavor: str, share: float, besides: str) -> int:
        """Units held on a pool by the other queues borrowing there whose share is at least `share`: the most
        their evictions could free for a queue whose share after admission would be `share`."""
        _, ranked, totals = self._borrowers(flavor)
        count = 0
        while count < len(ranked) and ranked[count][0] >= share:
            count += 1
        held = totals[count - 1] if count else 0
        if any(team == besides for _, team in ranked[:count]):
            held -= self.used(besides, flavor)
        return held
