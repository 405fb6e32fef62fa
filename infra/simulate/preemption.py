"""Which running jobs Kueue would evict so that a pending one fits on a pool, by the queue's policies.

Candidates (Kueue's order): jobs of other queues before the queue's own, lower priority first, the most recently
admitted first. Own jobs qualify by `withinClusterQueue`; other queues' jobs only while that queue borrows, by
`reclaimWithinCohort` (classic preemption: only for a job that then fits in its nominal quota) or by
`borrowWithinCohort` (lower priority, up to its threshold). Under fair sharing the queue with the largest share is
the next target, and another queue's job is taken only if the preemptor's share after admission is at most the
target's share after the eviction (LessThanOrEqualToFinalShare) or below its share before (LessThanInitialShare).
The state is left as it was found: the caller evicts the returned runs."""

from __future__ import annotations

import heapq

from infra.simulate.state import Run, State, Workload


def _eligible(policy: str, victim: Run, preemptor: Workload) -> bool:
    if policy in ("Never", ""):
        return False
    if policy == "Any":
        return True
    lower = victim.workload.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return lower or (victim.workload.priority == preemptor.priority
                         and victim.workload.key() > preemptor.key())
    return lower


def _order(run: Run, own: str) -> tuple[int, int, int, int]:
    return (run.team == own, run.workload.priority, -run.start, -run.serial)


def _own(state: State, team: str, flavor: str, pending: Workload) -> list[Run]:
    policy = state.model.queues[team].within
    return [run for run in state.runs(team, flavor) if _eligible(policy, run, pending)]


def _candidates(state: State, team: str, flavor: str, pending: Workload, reclaim: bool,
                least: float = -1.0) -> list[Run]:
    """Own jobs by withinClusterQueue, and jobs of borrowing queues (with a share of at least `least`)."""
    queue = state.model.queues[team]
    found = _own(state, team, flavor, pending)
    threshold = queue.borrow_threshold
    for share, other in state.borrowers(flavor):
        if other == team or share < least:
            continue
        for run in state.runs(other, flavor):
            if (reclaim and _eligible(queue.reclaim, run, pending)) or (
                    queue.borrow_policy == "LowerPriority" and run.workload.priority < pending.priority
                    and (threshold is None or run.workload.priority <= threshold)):
                found.append(run)
    return sorted(found, key=lambda run: _order(run, team))


def _hopeless(state: State, team: str, flavor: str, pending: Workload, least: float) -> bool:
    """Whether evicting every job that could qualify would still leave too little room: the common case on a full
    pool, answered without ordering candidates."""
    room = state.size[flavor] - state.from_pool[flavor]
    own = sum(run.units for run in _own(state, team, flavor, pending))
    return room + own + state.held_above(flavor, least, team) < pending.job.demand


def _restore(state: State, removed: list[Run]) -> None:
    for run in removed:
        state.add(run)


def classic(state: State, team: str, flavor: str, pending: Workload) -> list[Run] | None:
    units = pending.job.demand
    if _hopeless(state, team, flavor, pending, -1.0):
        return None
    reclaim = not state.borrows(team, flavor, units)  # reclaiming needs a job that fits its nominal quota
    removed: list[Run] = []
    for run in _candidates(state, team, flavor, pending, reclaim):
        if run.team != team and not state.borrows(run.team, flavor):
            continue  # that queue is back within its quota: nothing more to reclaim from it
        state.remove(run)
        removed.append(run)
        if state.fits(team, flavor, units):
            break
    else:
        _restore(state, removed)
        return None
    # Kueue's minimal set: give back, newest victim last, every eviction the job does not need.
    victims = []
    for run in reversed(removed):
        state.add(run)
        if not state.fits(team, flavor, units):
            state.remove(run)
            victims.append(run)
    _restore(state, victims)
    return victims


def fair(state: State, team: str, flavor: str, pending: Workload) -> list[Run] | None:
    units = pending.job.demand
    mine = state.share(team, flavor, units)
    # Neither strategy lets a queue whose share is below the preemptor's (after admission) lose a job.
    if _hopeless(state, team, flavor, pending, mine):
        return None
    by_team: dict[str, list[Run]] = {}
    for run in _candidates(state, team, flavor, pending, reclaim=True, least=mine):
        by_team.setdefault(run.team, []).append(run)
    # The queue with the largest share is the next target: a heap of (share, queue), stale entries skipped.
    shares = {t: state.share(t) for t in by_team}
    heap = [(-shares[t], t != team, t) for t in by_team]
    heapq.heapify(heap)
    removed: list[Run] = []
    while not state.fits(team, flavor, units):
        while heap and (-heap[0][0] != shares[heap[0][2]] or not by_team[heap[0][2]]):
            heapq.heappop(heap)
        if not heap:
            _restore(state, removed)
            return None
        target = heapq.heappop(heap)[2]
        if target != team and not state.borrows(target, flavor):
            by_team[target] = []  # back within its quota: nothing more to reclaim from it
            continue
        run = by_team[target].pop(0)
        before = shares[target]
        state.remove(run)
        after = state.share(target)
        if target == team or mine <= after or mine < before:
            removed.append(run)
            shares[target] = after
            heapq.heappush(heap, (-after, target != team, target))
        else:
            state.add(run)
            by_team[target] = []
    _restore(state, removed)
    return removed
