"""The capacity check: guaranteed quotas must fit in the pools that back them, and no GPU is stranded."""

from __future__ import annotations

from decimal import Decimal

from .derive import Platform
from .findings import Finding


def _amount(resource: str, value: Decimal) -> str:
    if resource == "memory":
        return f"{value / Decimal(2**30):.0f}Gi"
    return f"{value.normalize():f}"


def capacity_findings(platform: Platform) -> list[Finding]:
    """Quotas are checked per flavor and resource name, in the units the pool offers (time-sliced replicas,
    MIG instances). Autoscaled pools: guaranteed quotas must fit the minimum node count; the nodes up to the
    maximum are only borrowable through the cohort, so they never count towards a guarantee."""
    findings: list[Finding] = []
    for flavor in platform.flavors:
        sums = platform.quota_sums[flavor.name]
        for resource, capacity in flavor.capacity.items():
            total = sums.get(resource, Decimal(0))
            if total > capacity:
                autoscaled = flavor.max_capacity.get(resource, capacity) > capacity
                findings.append(Finding(
                    "capacity", f"flavor {flavor.name}",
                    f"teams guarantee {_amount(resource, total)} {resource} but the pool offers "
                    f"{_amount(resource, capacity)}" + (" at its minimum node count (nodes above the minimum are "
                                                         "only borrowable)" if autoscaled else "")
                    + ": lower a team quota or add nodes",
                ))
        for resource in flavor.gpu_resources:
            reachable = any(flavor.name in team.quota for team in platform.teams)
            offered = flavor.max_capacity.get(resource, flavor.capacity[resource])
            if not reachable and offered > 0:
                findings.append(Finding(
                    "capacity", f"flavor {flavor.name}",
                    f"{_amount(resource, offered)} {resource} stranded: no team queue "
                    "lists this pool; give a team a quota on it",
                    severity="warning",
                ))
    return findings
