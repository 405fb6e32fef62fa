"""Checks of Kueue's rules as tenants meet them: gang admission within the team's limits, and preemption by
priority within the team's queue."""

from __future__ import annotations

from typing import Any

from infra.accept.jobs import Spec, highest_priority, lowest_priority, per_node_gpus
from infra.accept.runner import Failed, Run, Skipped
from infra.accept.status import admitted, condition, evidence, job_pods, workload_of
from infra.accept.training import ceiling, end_state, gpu_pools, submit, training_runtime

OBSERVE_SECONDS = 120.0


def _pool(run: Run) -> tuple[str, int, int]:
    pools = gpu_pools(run)
    if not pools:
        raise Skipped(f"team {run.team}'s queue lists no GPU pool")
    pool = pools[0]
    return pool, ceiling(run, pool), max(per_node_gpus(run.platform, pool), 1)


def gang(run: Run) -> str:
    """A job one node larger than all the team's queue can hold must get nothing: no pod, no admission."""
    pool, limit, per_node = _pool(run)
    nodes = limit // per_node + 1
    name = submit(run, Spec("gang", training_runtime(run), pool, nodes=nodes, gpus=per_node))
    asked = nodes * per_node
    run.evidence["asked"] = (f"{nodes} node(s) x {per_node} GPU(s) = {asked} on {pool}; team {run.team} may hold "
                             f"{limit} there (guarantee plus borrowing limit, within the pool)")

    def violation() -> str | None:
        trainjob = run.kube.trainjob(run.namespace, name)
        if trainjob and admitted(workload_of(run.kube, run.namespace, trainjob)):
            return f"admitted with {asked} GPUs of {pool}, above the team's limit of {limit}"
        pods = job_pods(run.kube, run.namespace, name)
        if pods:
            return f"partially started: {len(pods)} pod(s) of a job that cannot be admitted whole"
        return None

    try:
        run.hold(OBSERVE_SECONDS, violation)
        trainjob = run.kube.trainjob(run.namespace, name)
        workload = workload_of(run.kube, run.namespace, trainjob) if trainjob else None
        if workload is None:
            raise Failed("Kueue made no Workload for the TrainJob: is the queue label honoured?")
        reserved: dict[str, Any] = next((c for c in workload.get("status", {}).get("conditions", [])
                         if c.get("type") == "QuotaReserved"), {})
        pending = reserved.get("message", "")
    finally:
        run.evidence[name] = evidence(run.kube, run.namespace, name)
        run.kube.delete_trainjob(run.namespace, name)
    return (f"{asked} GPUs asked, {limit} allowed: pending for {OBSERVE_SECONDS:.0f}s with no pod started"
            + (f" (Kueue: {pending})" if pending else ""))


def _preempted(workload: dict[str, Any] | None) -> bool:
    evicted = condition(workload, "Evicted")
    return condition(workload, "Preempted") is not None or (
        evicted is not None and evicted.get("reason") == "Preempted")


def preemption(run: Run) -> str:
    """A job at the lowest priority fills the team's room on a pool; one at the highest must then take its place."""
    rule = run.platform.queueing.queue(run.team).preemption.get("withinClusterQueue", "Never")
    if rule == "Never":
        raise Skipped(f"team {run.team}'s queue never preempts within itself (withinClusterQueue: Never)")
    low_class, high_class = lowest_priority(run.platform), highest_priority(run.platform)
    if low_class == high_class:
        raise Skipped("the stack declares a single priority")
    pool, limit, per_node = _pool(run)
    gpus = min(per_node, limit)
    runtime = training_runtime(run)
    low = submit(run, Spec("preempt-low", runtime, pool, nodes=max(limit // gpus, 1), gpus=gpus,
                           priority=low_class, steps=600, step_seconds=3))
    run.wait(f"{low} to be admitted", lambda: True if admitted(_workload(run, low)) else None)
    high = submit(run, Spec("preempt-high", runtime, pool, nodes=1, gpus=gpus, priority=high_class))
    run.wait(f"{high} to be admitted", lambda: True if admitted(_workload(run, high)) else None)
    run.evidence[low] = evidence(run.kube, run.namespace, low)
    if not _preempted(_workload(run, low)):
        raise Failed(f"{high} ({high_class}) was admitted but {low} ({low_class}) was not preempted: the queue "
                     "had room, so this run proved nothing")
    state = end_state(run, high)
    run.kube.delete_trainjob(run.namespace, low)
    if state != "Complete":
        raise Failed(f"{high} ended {state}")
    return (f"{high_class} job admitted on {pool} by preempting the {low_class} job ({rule} within the queue); "
            "it completed")


def _workload(run: Run, name: str) -> dict[str, Any] | None:
    trainjob = run.kube.trainjob(run.namespace, name)
    return workload_of(run.kube, run.namespace, trainjob) if trainjob else None
