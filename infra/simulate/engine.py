"""The discrete-event simulation: jobs arrive and finish; after the events of each instant Kueue's scheduler runs
cycles until one admits nothing. A cycle takes from every queue its first job (in queue order) that can be admitted
now, by fitting or by preemption (BestEffortFIFO; StrictFIFO: only the head), orders these heads as Kueue does, and
admits them in that order, each checked again against what the earlier ones took.

Heads are ordered, classic preemption: jobs that fit in nominal quota before borrowing ones, then higher priority,
then the earlier queue timestamp, then the name (trace line). Fair sharing: the lower dominant share after
admission first, then the same tie-breaks. A flavor is chosen in the queue's order: the first where the job fits
(with flavorFungibility whenCanBorrow MayStopSearch, also by borrowing), else the first where it fits by
borrowing, else the first where preemption makes room (whenCanPreempt TryNextFlavor tries every flavor first).
A job's pods are admitted all together or not at all. An evicted job runs its whole duration once admitted again;
it is queued again (ordered by its eviction time) at the next instant at which a job arrives or finishes: its pods
must stop first, and two queues cannot evict each other's jobs back and forth within one instant for ever. A job
found inadmissible waits, as in Kueue's inadmissible list, until a job finishes and releases quota."""

from __future__ import annotations

import heapq
from bisect import insort
from dataclasses import dataclass, field

from infra.simulate import preemption
from infra.simulate.queues import DEFAULT_RESOURCE, NO_PRIORITY, Model
from infra.simulate.state import Run, State, Workload
from infra.simulate.trace import Job

FINISH, SUBMIT = 0, 1  # at one instant, finished jobs give their quota back before new ones queue


@dataclass(frozen=True)
class Choice:
    flavor: str
    borrows: bool
    victims: tuple[Run, ...]  # empty: it fits as things are


@dataclass(frozen=True)
class Record:
    """What happened to one job."""

    job: Job
    flavor: str | None  # the pool its last run was admitted to; None: never admitted
    waited: int  # seconds in the queue, over every stay
    end: int | None


@dataclass
class Outcome:
    records: list[Record]
    preempted: dict[str, int]  # team -> evictions suffered
    preempting: dict[str, int]  # team -> evictions caused
    busy: dict[str, int]  # pool -> unit-seconds used
    span: int  # seconds from the trace start to the last job's end


@dataclass
class _Simulation:
    model: Model
    state: State = field(init=False)
    pending: dict[str, list[tuple[tuple[int, int, int], Workload]]] = field(default_factory=dict)
    events: list[tuple[int, int, int, object]] = field(default_factory=list)
    serial: int = 0
    records: list[Record] = field(default_factory=list)
    preempted: dict[str, int] = field(default_factory=dict)
    preempting: dict[str, int] = field(default_factory=dict)
    held: list[Workload] = field(default_factory=list)  # evicted at this instant: queued again at the next

    def __post_init__(self) -> None:
        self.state = State(self.model)

    def flavors(self, job: Job) -> list[str]:
        """The pools Kueue may admit the job to, in the queue's order: its own pool, or every pool the queue lists
        that offers the default GPU resource; each pod must fit one node."""
        queue = self.model.queues.get(job.team)
        if queue is None:
            return []
        names = [job.pool] if job.pool else [e.flavor for e in queue.entries
                                             if self.model.pools[e.flavor].resource == DEFAULT_RESOURCE]
        return [name for name in names if name in self.model.pools and queue.entry(name) is not None
                and job.gpus <= self.model.pools[name].per_node]

    def admissible(self, job: Job) -> bool:
        return any(job.demand <= self.model.reach(job.team, name) for name in self.flavors(job))

    def choose(self, pending: Workload) -> Choice | None:
        job, state, model = pending.job, self.state, self.model
        borrowing: Choice | None = None
        preempting: Choice | None = None
        for flavor in self.flavors(job):
            if state.fits(job.team, flavor, job.demand):
                borrows = state.borrows(job.team, flavor, job.demand)
                choice = Choice(flavor, borrows, ())
                if not borrows or model.when_can_borrow == "MayStopSearch":
                    return choice
                borrowing = borrowing or choice
                continue
            if preempting is not None and model.when_can_preempt == "TryNextFlavor":
                continue
            search = preemption.fair if model.fair_sharing else preemption.classic
            victims = search(state, job.team, flavor, pending)
            if victims is not None:
                preempting = Choice(flavor, state.borrows(job.team, flavor, job.demand), tuple(victims))
                if model.when_can_preempt == "MayStopSearch":
                    return preempting
        return borrowing or preempting

    def head(self, team: str) -> tuple[Workload, Choice] | None:
        """The queue's first job that can be admitted now. A job that cannot is parked, as Kueue moves it to the
        inadmissible list, until a job finishes; jobs of the same pool, priority and size as one that cannot are
        parked unevaluated (nothing changes within a scan)."""
        failed: dict[tuple[str | None, int], int] = {}
        for _, pending in self.pending[team]:
            if pending.parked:
                if self.model.strict_fifo:
                    return None
                continue
            shape = (pending.job.pool, pending.priority)
            if failed.get(shape, pending.job.demand + 1) > pending.job.demand:
                choice = self.choose(pending)
                if choice is not None:
                    return pending, choice
                failed[shape] = min(failed.get(shape, pending.job.demand), pending.job.demand)
            pending.parked = True
            if self.model.strict_fifo:
                return None
        return None

    def order(self, pending: Workload, choice: Choice) -> tuple[float, int, int, int]:
        first = self.state.share(pending.job.team, choice.flavor, pending.job.demand) if self.model.fair_sharing \
            else float(choice.borrows)
        return (first, *pending.key())

    def admit(self, now: int, pending: Workload, choice: Choice) -> None:
        team = pending.job.team
        for victim in choice.victims:
            self.evict(now, victim, team)
        queue = self.pending[team]
        queue.remove((pending.key(), pending))
        pending.waited += now - pending.pending_since
        pending.admissions += 1
        self.serial += 1
        run = Run(pending, team, choice.flavor, pending.job.demand, now, self.serial)
        self.state.add(run)
        self.state.epoch += 1
        heapq.heappush(self.events, (now + pending.job.duration, FINISH, self.serial, run))

    def evict(self, now: int, run: Run, by: str) -> None:
        self.state.remove(run)
        self.state.epoch += 1
        self.state.busy[run.flavor] += run.units * (now - run.start)
        self.preempted[run.team] = self.preempted.get(run.team, 0) + 1
        self.preempting[by] = self.preempting.get(by, 0) + 1
        workload = run.workload
        workload.ordered_at = workload.pending_since = now
        self.held.append(workload)

    def requeue(self, released: bool) -> None:
        """Evicted jobs back in their queues; when quota was released, every parked job may try again."""
        for workload in self.held:
            insort(self.pending[workload.job.team], (workload.key(), workload))
        self.held = []
        if released:
            for queue in self.pending.values():
                for _, workload in queue:
                    workload.parked = False

    def cycle(self, now: int) -> bool:
        heads = [head for team in sorted(self.pending) if self.pending[team] for head in [self.head(team)] if head]
        admitted = False
        for pending, choice in sorted(heads, key=lambda head: self.order(*head)):
            again = choice if not admitted else self.choose(pending)
            if again is not None:
                self.admit(now, pending, again)
                admitted = True
        return admitted

    def finish(self, now: int, run: Run) -> bool:
        key = (run.team, run.flavor)
        if run.serial not in self.state.running.get(key, {}):
            return False  # preempted before it could finish: nothing happens
        self.state.remove(run)
        self.state.epoch += 1
        self.state.busy[run.flavor] += run.units * (now - run.start)
        self.records.append(Record(run.workload.job, run.flavor, run.workload.waited, now))
        return True

    def submit(self, now: int, job: Job) -> None:
        if not self.admissible(job):
            self.records.append(Record(job, None, 0, None))
            return
        priority = self.model.priorities.get(job.priority, NO_PRIORITY) if job.priority else NO_PRIORITY
        workload = Workload(job, priority, now, now)
        insort(self.pending.setdefault(job.team, []), (workload.key(), workload))

    def run(self, jobs: list[Job]) -> Outcome:
        for job in jobs:
            heapq.heappush(self.events, (job.submit, SUBMIT, job.line, job))
        span = 0
        while self.events:
            now = self.events[0][0]
            happened = released = False
            while self.events and self.events[0][0] == now:
                _, kind, _, payload = heapq.heappop(self.events)
                if kind == FINISH:
                    assert isinstance(payload, Run)
                    if self.finish(now, payload):
                        happened = released = True
                        span = now
                else:
                    assert isinstance(payload, Job)
                    self.submit(now, payload)
                    happened = True
            if happened:
                self.requeue(released)
                while self.cycle(now):
                    pass
        self.records.sort(key=lambda record: record.job.line)
        return Outcome(self.records, self.preempted, self.preempting, dict(self.state.busy), span)


def simulate(model: Model, jobs: list[Job]) -> Outcome:
    return _Simulation(model).run(jobs)
