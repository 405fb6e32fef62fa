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

    def __post_init__(self) -> None:
        self.size = {name: self.model.pool_size(name) for name in self.model.pools}
        self.from_pool = dict.fromkeys(self.model.pools, 0)
        self.busy = dict.fromkeys(self.model.pools, 0)
        self._lendable = {r: self.model.lendable(r) for r in {p.resource for p in self.model.pools.values()}}

    def used(self, team: str, flavor: str) -> int:
        return self.usage.get((team, flavor), 0)

    def _change(self, team: str, flavor: str, delta: int) -> None:
        entry = self.model.queues[team].entry(flavor)
        assert entry is not None
        private = entry.nominal - entry.lends
        old = self.used(team, flavor)
        self.usage[(team, flavor)] = old + delta
        self.from_pool[flavor] += max(0, old + delta - private) - max(0, old - private)

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
        borrowed: dict[str, int] = {}
        for entry in queue.entries:
            used = self.used(team, entry.flavor) + (units if entry.flavor == flavor else 0)
            resource = self.model.pools[entry.flavor].resource
            borrowed[resource] = borrowed.get(resource, 0) + max(0, used - entry.nominal)
        dominant = 0
        for resource, amount in borrowed.items():
            if amount:
                lendable = self._lendable[resource]
                dominant = max(dominant, amount * SHARE_SCALE // lendable if lendable else 2**31)
        if dominant == 0:
            return 0.0
        milli = int(queue.weight * 1000)
        return float("inf") if milli == 0 else dominant * 1000 / milli

    def runs_on(self, flavor: str) -> list[Run]:
        """Every job running on a pool, by team name then admission."""
        return [run for (_, f), runs in sorted(self.running.items()) if f == flavor for run in runs.values()]
