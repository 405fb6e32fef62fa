"""Which running jobs Kueue would evict so that a pending one fits on a pool, by the queue's policies.

Candidates (Kueue's order): jobs of other queues before the queue's own, lower priority first, the most recently
admitted first. Own jobs qualify by `withinClusterQueue`; other queues' jobs only while that queue borrows, by
`reclaimWithinCohort` (classic preemption: only for a job that then fits in its nominal quota) or by
`borrowWithinCohort` (lower priority, up to its threshold). Under fair sharing the queue with the largest share is
the next target, and another queue's job is taken only if the preemptor's share after admission is at most the
target's share after the eviction (LessThanOrEqualToFinalShare) or below its share before (LessThanInitialShare).
The state is left as it was found: the caller evicts the returned runs."""

from __future__ import annotations

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


def _candidates(state: State, team: str, flavor: str, pending: Workload, reclaim: bool) -> list[Run]:
    queue = state.model.queues[team]
    found = []
    for run in state.runs_on(flavor):
        if run.team == team:
            if _eligible(queue.within, run, pending):
                found.append(run)
        elif state.borrows(run.team, flavor):
            threshold = queue.borrow_threshold
            if (reclaim and _eligible(queue.reclaim, run, pending)) or (
                    queue.borrow_policy == "LowerPriority" and run.workload.priority < pending.priority
                    and (threshold is None or run.workload.priority <= threshold)):
                found.append(run)
    return sorted(found, key=lambda run: _order(run, team))


def _restore(state: State, removed: list[Run]) -> None:
    for run in removed:
        state.add(run)


def classic(state: State, team: str, flavor: str, pending: Workload) -> list[Run] | None:
    units = pending.job.demand
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
    by_team: dict[str, list[Run]] = {}
    for run in _candidates(state, team, flavor, pending, reclaim=True):
        by_team.setdefault(run.team, []).append(run)
    removed: list[Run] = []
    while not state.fits(team, flavor, units):
        targets = [t for t, runs in by_team.items() if runs and (t == team or state.borrows(t, flavor))]
        if not targets:
            _restore(state, removed)
            return None
        target = max(targets, key=lambda t: (state.share(t), t == team, t))
        run = by_team[target].pop(0)
        if target == team:
            state.remove(run)
            removed.append(run)
            continue
        mine = state.share(team, flavor, units)
        before = state.share(target)
        state.remove(run)
        if mine <= state.share(target) or mine < before:
            removed.append(run)
        else:
            state.add(run)
            by_team[target] = []
    _restore(state, removed)
    return removed
