"""A cluster's finished Kueue Workloads (`kubectl get workloads -A -o json`, kueue.x-k8s.io/v1beta2) as a trace.

Per Workload that finished (condition Finished True) and asks for GPUs: submit is its creationTimestamp in seconds
after the earliest one's, team its ClusterQueue (Trainyard names each team's queue after the team), pool the pool
its pod template pins with the trainyard.io/pool node selector (else empty: any pool the queue lists), gpus and
pods from its pod sets, duration from its last admission (QuotaReserved) to Finished, priority its
WorkloadPriorityClass. Pod sets that ask for GPUs are summed: pods is their pod count, gpus the GPUs per pod
(rounded up when the pod sets differ)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from infra.simulate.trace import Job
from infra.spec.pools import POOL_LABEL

GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def _time(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def _condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in workload.get("status", {}).get("conditions", [])
                 if c.get("type") == kind and c.get("status") == "True"), None)


def _pod_gpus(template: Mapping[str, Any]) -> int:
    total = 0
    for container in template.get("spec", {}).get("containers", []):
        resources = container.get("resources", {})
        asked = {**resources.get("limits", {}), **resources.get("requests", {})}
        total += sum(int(value) for name, value in asked.items() if name.startswith(GPU_PREFIXES))
    return total


def _priority(spec: Mapping[str, Any]) -> str | None:
    ref = spec.get("priorityClassRef") or {}
    return ref.get("name") if ref.get("kind") == "WorkloadPriorityClass" else None


def convert(dump: Mapping[str, Any]) -> tuple[list[Job], int]:
    """The trace's jobs, in submit order, and how many Workloads were left out (unfinished or without GPUs)."""
    found: list[tuple[int, str, Job]] = []
    skipped = 0
    for workload in dump.get("items", []):
        spec, meta = workload.get("spec", {}), workload.get("metadata", {})
        finished, reserved = _condition(workload, "Finished"), _condition(workload, "QuotaReserved")
        gpu_sets = [(ps.get("count", 1), _pod_gpus(ps.get("template", {}))) for ps in spec.get("podSets", [])]
        gpu_sets = [(count, gpus) for count, gpus in gpu_sets if gpus > 0]
        queue = workload.get("status", {}).get("admission", {}).get("clusterQueue")
        if finished is None or reserved is None or not gpu_sets or not queue:
            skipped += 1
            continue
        pods = sum(count for count, _ in gpu_sets)
        gpus = math.ceil(sum(count * gpus for count, gpus in gpu_sets) / pods)
        selectors: Iterable[Mapping[str, str]] = (ps.get("template", {}).get("spec", {}).get("nodeSelector", {})
                                                  for ps in spec.get("podSets", []))
        pool = next((s[POOL_LABEL] for s in selectors if POOL_LABEL in s), None)
        created = _time(meta["creationTimestamp"])
        duration = max(_time(finished["lastTransitionTime"]) - _time(reserved["lastTransitionTime"]), 1)
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        found.append((created, name, Job(0, created, queue, pool, gpus, pods, duration, _priority(spec))))
    found.sort(key=lambda item: (item[0], item[1]))
    start = found[0][0] if found else 0
    jobs = [Job(i + 2, job.submit - start, job.team, job.pool, job.gpus, job.pods, job.duration, job.priority)
            for i, (_, _, job) in enumerate(found)]
    return jobs, skipped
