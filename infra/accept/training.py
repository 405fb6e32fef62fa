"""Checks that train: end to end per runtime family and pool, restart from checkpoint, node failure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.accept.jobs import NOT_RUN, Spec, families, per_node_gpus, trainjob
from infra.accept.runner import Failed, Run, Skipped
from infra.accept.status import evidence, finished, job_pods, parse, progress_of
from infra.spec.pools import POOL_LABEL
from infra.spec.runtimes import cpu_only

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def queue_pools(run: Run) -> list[str]:
    """The pools the team's ClusterQueue lists, in the order Kueue tries them."""
    return [entry.flavor for entry in run.platform.queueing.queue(run.team).flavors]


def ceiling(run: Run, pool: str) -> int:
    """The most GPUs of a pool the team's queue can hold: its guarantee plus what it may borrow, within the pool."""
    flavor = run.platform.flavor(pool)
    resource = flavor.gpu_resources[0]
    entry = next(e for e in run.platform.queueing.queue(run.team).flavors if e.flavor == pool)
    capacity = flavor.capacity[resource]
    borrow = entry.borrowing.get(resource)
    return int(min(capacity, entry.nominal.get(resource, 0) + (capacity if borrow is None else borrow)))


def gpu_pools(run: Run) -> list[str]:
    return [p for p in queue_pools(run) if run.platform.flavor(p).gpu_resources]


def submit(run: Run, job: Spec) -> str:
    run.kube.create(run.namespace, trainjob(run.platform, job, run.team))
    return job.name


def end_state(run: Run, name: str) -> str:
    """Wait for the TrainJob to end; its evidence goes into the report either way."""
    try:
        return run.wait(f"TrainJob {name} to finish", lambda: finished(run.kube.trainjob(run.namespace, name)))
    finally:
        run.evidence[name] = evidence(run.kube, run.namespace, name)


def training_runtime(run: Run) -> Mapping[str, Any]:
    """The runtime the restart checks use: torch if the stack has it, else the first GPU runtime it runs."""
    usable = {f: r for f, r in families(run.platform).items() if f not in NOT_RUN and not cpu_only(r)}
    if not usable:
        raise Skipped("the stack lists no GPU runtime that accept can run")
    return usable.get("torch") or next(iter(usable.values()))


def end_to_end(run: Run) -> str:
    jobs: list[Spec] = []
    for framework, runtime in sorted(families(run.platform).items()):
        if framework in NOT_RUN:
            run.evidence.setdefault("not run", []).append(f"{framework}: {NOT_RUN[framework]}")
            continue
        for pool in queue_pools(run):
            if bool(run.platform.flavor(pool).gpu_resources) == cpu_only(runtime):
                continue
            gpus = 0 if cpu_only(runtime) else 1
            multi = run.platform.pool(pool).node_count >= 2 and (not gpus or ceiling(run, pool) >= 2)
            nodes = 2 if multi else 1
            allreduce = nodes > 1 and gpus > 0 and "torch" in runtime["spec"].get("mlPolicy", {})
            jobs.append(Spec(f"e2e-{framework}-{pool}", runtime, pool, nodes, gpus, allreduce=allreduce))
    if not jobs:
        raise Skipped(f"team {run.team}'s queue lists no pool that a runtime of the stack runs on")
    for job in jobs:
        submit(run, job)
    outcomes, problems, figures = [], [], []
    for job in jobs:
        state = end_state(run, job.name)
        progress = progress_of(run.kube, run.namespace, job.name)
        outcomes.append(f"{job.name}: {state} on {job.nodes} node(s)")
        if state != "Complete":
            problems.append(f"{job.name} ended {state}")
        elif len(progress.done) < job.nodes:
            problems.append(f"{job.name} is Complete but {len(progress.done)} of {job.nodes} process(es) "
                            "reported their last step")
        if job.allreduce:
            if progress.busbw_gbps is None:
                problems.append(f"{job.name}: no all-reduce figure in the log")
            else:
                fabric = run.platform.pool(job.pool).fabric
                figures.append(f"all-reduce {progress.busbw_gbps:.2f} GB/s bus bandwidth over {job.nodes} nodes of "
                               f"{job.pool} (fabric {fabric}, {progress.ranks} ranks)")
                run.evidence[job.name]["allreduce_busbw_gbps"] = progress.busbw_gbps
    run.evidence["jobs"] = outcomes
    if problems:
        raise Failed("; ".join(problems))
    return f"{len(jobs)} TrainJob(s) completed through queue {run.team}" + "".join(f"; {f}" for f in figures)


def _running_step(run: Run, name: str, at_least: int) -> tuple[dict[str, Any], int] | None:
    """A Running pod of the job and the step its program has saved, once that is at least `at_least`."""
    progress = progress_of(run.kube, run.namespace, name)
    for pod in job_pods(run.kube, run.namespace, name):
        host = pod.get("spec", {}).get("hostname") or pod["metadata"]["name"]
        if pod.get("status", {}).get("phase") == "Running" and progress.steps.get(host, 0) >= at_least:
            return pod, progress.steps[host]
    return None


def _resumed(run: Run, name: str, gone: str, host: str) -> int | None:
    """The step a new process on the same host started from, once a pod other than `gone` printed it; Failed
    when the job ends without one."""
    for pod in job_pods(run.kube, run.namespace, name):
        if pod["metadata"]["name"] == gone:
            continue
        starts = parse(run.kube.log(run.namespace, pod["metadata"]["name"])).starts
        resumed = [step for start_host, step in starts if start_host == host]
        if resumed:
            return resumed[-1]
    state = finished(run.kube.trainjob(run.namespace, name))
    if state is not None:
        run.evidence[name] = evidence(run.kube, run.namespace, name)
        raise Failed(f"{name} ended {state} instead of resuming")
    return None


def _judge_resume(saved: int, resumed: int) -> None:
    if resumed < saved:
        raise Failed(f"the job restarted from step {resumed}, but step {saved} had been saved: the checkpoint "
                     "was not used")


def checkpoint_restart(run: Run) -> str:
    pools = gpu_pools(run)
    if not pools:
        raise Skipped(f"team {run.team}'s queue lists no GPU pool")
    name = submit(run, Spec("checkpoint", training_runtime(run), pools[0], steps=40, step_seconds=3))
    pod, saved = run.wait(f"{name} to save step 3", lambda: _running_step(run, name, 3))
    host = pod.get("spec", {}).get("hostname") or pod["metadata"]["name"]
    run.kube.delete_pod(run.namespace, pod["metadata"]["name"])
    run.evidence["deleted"] = f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')} at step {saved}"
    resumed = run.wait(f"a new pod of {name} to start", lambda: _resumed(run, name, pod["metadata"]["name"], host))
    run.evidence["resumed_from"] = resumed
    _judge_resume(saved, resumed)
    state = end_state(run, name)
    if state != "Complete":
        raise Failed(f"{name} ended {state} after the restart")
    return f"pod deleted at step {saved}; its replacement resumed from step {resumed}; the job completed"


def _drain(run: Run, node: str) -> list[str]:
    """What `kubectl drain` does: evict every pod on the node except DaemonSet pods and static (mirror) pods."""
    evicted = []
    for pod in run.kube.pods_on_node(node):
        meta = pod["metadata"]
        if MIRROR_ANNOTATION in meta.get("annotations", {}) or any(
                ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences", [])):
            continue
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        run.kube.evict(meta["namespace"], meta["name"])
        evicted.append(f"{meta['namespace']}/{meta['name']}")
    return evicted


def node_failure(run: Run) -> str:
    node = run.drain_node
    if node is None:
        raise Skipped("runs only with --drain-node NODE")
    found = run.kube.node(node)
    if found is None:
        raise Failed(f"node {node} not found")
    pool = found["metadata"].get("labels", {}).get(POOL_LABEL)
    if pool not in gpu_pools(run):
        raise Failed(f"node {node} is in pool {pool or '(none)'}, not in a GPU pool of team {run.team}'s queue: "
                     f"name a node of {', '.join(gpu_pools(run)) or 'a GPU pool'}")
    name = submit(run, Spec("node-failure", training_runtime(run), pool, gpus=min(1, per_node_gpus(
        run.platform, pool)), steps=60, step_seconds=3, prefer_node=node))
    pod, saved = run.wait(f"{name} to save step 2", lambda: _running_step(run, name, 2))
    if pod["spec"].get("nodeName") != node:
        raise Failed(f"the job's pod runs on {pod['spec'].get('nodeName')}, not on {node}: is {node} full?")
    try:
        run.kube.set_unschedulable(node, True)
        run.evidence["cordoned"] = node
        run.evidence["evicted"] = _drain(run, node)
        host = pod.get("spec", {}).get("hostname") or pod["metadata"]["name"]
        resumed = run.wait(f"{name} to run again", lambda: _resumed(run, name, pod["metadata"]["name"], host))
        run.evidence["resumed_from"] = resumed
        _judge_resume(saved, resumed)
        state = end_state(run, name)
    finally:
        run.kube.set_unschedulable(node, False)
        run.evidence["uncordoned"] = node
    if state != "Complete":
        raise Failed(f"{name} ended {state} after {node} was drained")
    return f"{node} drained at step {saved}; the job resumed from step {resumed} elsewhere and completed"
