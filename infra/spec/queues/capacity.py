"""The capacity check: guaranteed quotas must fit in the pools that back them, no GPU is stranded, and every
queue is one Kueue accepts and can use (quota names, lending, borrowing, taints, runtime resources)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from infra.spec import runtimes
from infra.spec.derive import Platform
from infra.spec.findings import Finding
from infra.spec.queues.borrowing import DEFAULT_BORROWING_LIMIT


def _amount(resource: str, value: Decimal) -> str:
    if resource == "memory":
        return f"{value / Decimal(2**30):.0f}Gi"
    return f"{value.normalize():f}"


def capacity_findings(platform: Platform) -> list[Finding]:
    """Every capacity rule: the guarantees fit their pools, and the queue rules."""
    return pool_fit_findings(platform) + queue_findings(platform)


def pool_fit_findings(platform: Platform) -> list[Finding]:
    """Quotas are checked per flavor and resource name, in the units the pool offers (time-sliced replicas,
    MIG instances). Autoscaled pools: guaranteed quotas must fit the minimum node count; the nodes up to the
    maximum are only borrowable through the cohort, so they never count towards a guarantee."""
    findings: list[Finding] = []
    for flavor in platform.flavors:
        sums = platform.quota_sums[flavor.name]
        for resource, capacity in flavor.allocatable.items():
            total = sums.get(resource, Decimal(0))
            serving = platform.serving_sums.get(flavor.name, {}).get(resource, Decimal(0))
            if serving and total + serving > capacity:
                findings.append(_serving_finding(platform, flavor.name, resource, total, capacity))
            elif total > capacity:
                autoscaled = flavor.max_capacity.get(resource, capacity) > flavor.capacity[resource]
                nominal = flavor.capacity[resource]
                kept = (f" allocatable ({_amount(resource, nominal)} less what the kubelet and the platform's "
                        "DaemonSets keep)") if capacity < nominal else ""
                findings.append(Finding(
                    "capacity", f"flavor {flavor.name}",
                    f"teams guarantee {_amount(resource, total)} {resource} but the pool offers "
                    f"{_amount(resource, capacity)}{kept}"
                    + (" at its minimum node count (nodes above the minimum are "
                       "only borrowable)" if autoscaled else "")
                    + ": lower a team quota or add nodes",
                ))
        for resource in flavor.gpu_resources:
            reachable = any(entry.flavor == flavor.name for queue in platform.queueing.queues
                            for entry in queue.flavors)
            offered = flavor.max_capacity.get(resource, flavor.capacity[resource])
            if not reachable and offered > 0:
                findings.append(Finding(
                    "capacity", f"flavor {flavor.name}",
                    f"{_amount(resource, offered)} {resource} stranded: no team queue "
                    "lists this pool; give a team a quota on it",
                    severity="warning",
                ))
    return findings


def _serving_finding(platform: Platform, pool: str, resource: str, quotas: Decimal, capacity: Decimal) -> Finding:
    """The pool's guarantees with its serving budgets (teams.<t>.serving, outside Kueue) do not fit."""
    budgets = platform.serving_sums[pool][resource]
    teams = [name for name, team in platform.spec.teams.items() if team.serving and team.serving.pool == pool]
    return Finding(
        "capacity", ", ".join(f"teams.{name}.serving" for name in teams),
        f"on pool {pool}, the teams' Kueue quotas ({_amount(resource, quotas)}) plus the serving budgets "
        f"({_amount(resource, budgets)}) ask {_amount(resource, quotas + budgets)} {resource} but the pool offers "
        f"{_amount(resource, capacity)}: lower a serving budget or a team quota, or add nodes")


def queue_findings(platform: Platform) -> list[Finding]:
    """What Kueue itself would refuse or leave unusable, found before apply."""
    return [*quota_resource_findings(platform), *lending_findings(platform), *borrowing_findings(platform),
            *toleration_findings(platform), *runtime_resource_findings(platform), *runtime_reach_findings(platform)]


def quota_resource_findings(platform: Platform) -> list[Finding]:
    """A quota is per resource name per flavor: a name the pool does not offer can never be used."""
    findings = []
    for team in platform.teams:
        for flavor_name, resources in team.quota.items():
            offered = platform.flavor(flavor_name).capacity
            for resource, amount in resources.items():
                if amount > 0 and resource not in offered:
                    findings.append(Finding(
                        "capacity", f"flavor {flavor_name}",
                        f"team {team.name} is guaranteed {_amount(resource, amount)} {resource}, which this pool "
                        f"does not offer (it offers {', '.join(sorted(offered))}): quota the pool's own resources",
                    ))
    return findings


def lending_findings(platform: Platform) -> list[Finding]:
    """Kueue rejects a ClusterQueue whose lendingLimit exceeds its nominalQuota."""
    findings = []
    for queue in platform.queueing.queues:
        for entry in queue.flavors:
            for resource, limit in entry.lending.items():
                nominal = entry.nominal.get(resource, Decimal(0))
                if limit is not None and limit > nominal:
                    findings.append(Finding(
                        "capacity", f"flavor {entry.flavor}",
                        f"team {queue.team} lends up to {_amount(resource, limit)} {resource} but is guaranteed "
                        f"only {_amount(resource, nominal)}: a lendingLimit must not exceed the nominal quota",
                    ))
    return findings


def borrowing_findings(platform: Platform) -> list[Finding]:
    """Borrowing happens only within the cohort, from what its other members lend and from its shared pool. A
    limit from `queueing.defaultBorrowingLimit` is not the team's choice and is not reported."""
    findings = []
    for queue in platform.queueing.queues:
        for entry in queue.flavors:
            for resource, limit in entry.borrowing.items():
                if limit and entry.limit_from != DEFAULT_BORROWING_LIMIT \
                        and platform.queueing.lendable(entry.flavor, resource, queue.team) == 0:
                    findings.append(Finding(
                        "capacity", f"flavor {entry.flavor}",
                        f"team {queue.team} may borrow {_amount(resource, limit)} {resource} but nothing in cohort "
                        f"{platform.spec.queueing.cohort} can lend it: every unit is guaranteed and kept "
                        "(lendingLimit 0); the borrowingLimit has no effect",
                        severity="warning",
                    ))
    return findings


def _admitting_taints(platform: Platform, flavor: str) -> list[dict[str, str]]:
    return [dict(t) for t in platform.flavor(flavor).taints if t["effect"] in ("NoSchedule", "NoExecute")]


def toleration_findings(platform: Platform) -> list[Finding]:
    """Kueue admits a job to a flavor only if it tolerates the flavor's taints; the jobs run on the stack's
    runtimes, so a guarantee on a pool that no runtime tolerates is quota nobody can use."""
    findings = []
    names = [r["metadata"]["name"] for r in platform.runtimes]
    for team in platform.teams:
        for flavor_name, resources in team.quota.items():
            if not any(resources.values()):
                continue
            untolerated = [t for t in _admitting_taints(platform, flavor_name)
                           if not any(runtimes.tolerates(r, t) for r in platform.runtimes)]
            for taint in untolerated:
                findings.append(Finding(
                    "capacity", f"flavor {flavor_name}",
                    f"team {team.name} has a quota here but no runtime ({', '.join(names) or 'none'}) tolerates "
                    f"the pool's taint {_taint(taint)}, so Kueue admits none of its jobs to this pool: "
                    "enable a runtime for this kind of pool or change the pool's taints",
                ))
    return findings


def _taint(taint: dict[str, str]) -> str:
    return f"{taint['key']}={taint['value']}:{taint['effect']}" if taint.get("value") else \
        f"{taint['key']}:{taint['effect']}"


def runtime_resource_findings(platform: Platform) -> list[Finding]:
    """Kueue's rule: a job whose pods request a resource its ClusterQueue does not cover is never admitted
    (unless the Kueue configuration excludes the resource)."""
    findings = []
    excluded = platform.queueing.exclude_resource_prefixes
    for runtime in platform.runtimes:
        name = runtime["metadata"]["name"]
        for resource in sorted(runtimes.requested_resources(runtime)):
            if resource.startswith(excluded):
                continue
            blocked = [q.team for q in platform.queueing.queues if resource not in q.covered]
            if platform.queueing.queues and len(blocked) == len(platform.queueing.queues):
                findings.append(Finding(
                    "capacity", f"runtime {name}",
                    f"requests {resource}, which no ClusterQueue covers: Kueue would never admit its jobs; add a "
                    "pool that offers it or drop the runtime from trainer.runtimes",
                ))
            elif blocked:
                findings.append(Finding(
                    "capacity", f"runtime {name}",
                    f"requests {resource}, which the queues of {', '.join(blocked)} do not cover: their jobs on "
                    "this runtime stay pending", severity="warning",
                ))
    return findings


def _admits(platform: Platform, runtime: Mapping[str, Any], flavor_name: str) -> bool:
    """Whether Kueue may admit the runtime's jobs to a flavor: every pod tolerates the flavor's taints and no
    pod's node selector contradicts the flavor's node labels."""
    flavor = platform.flavor(flavor_name)
    if not all(runtimes.tolerates(runtime, t) for t in _admitting_taints(platform, flavor_name)):
        return False
    return all(flavor.node_labels.get(key, value) == value
               for pod in runtimes.pod_specs(runtime) for key, value in pod.get("nodeSelector", {}).items())


def runtime_reach_findings(platform: Platform) -> list[Finding]:
    """A team runs a runtime only if its queue lists a pool the runtime's jobs may be admitted to."""
    findings = []
    for queue in platform.queueing.queues:
        shut_out = [r["metadata"]["name"] for r in platform.runtimes
                    if not any(_admits(platform, r, entry.flavor) for entry in queue.flavors)]
        if shut_out:
            findings.append(Finding(
                "capacity", f"team {queue.team}",
                f"its queue lists no pool that {len(shut_out)} runtime(s) may run on (taints or node selector): "
                f"{', '.join(shut_out)}; its jobs on them stay pending: give it a quota (0 to borrow) on such a "
                "pool, or set queueing.borrowAnyPool",
                severity="warning",
            ))
    return findings
