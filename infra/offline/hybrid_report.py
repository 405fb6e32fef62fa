"""The burst path of a multi-cluster stack, for the plan summary and the stack page: which team queue dispatches
to which worker, with what guarantee, over which link and credentials."""

from __future__ import annotations

from infra.platform.multikueue import cohort, kubeconfig_secret
from infra.spec import Platform
from infra.spec.base import format_amount
from infra.spec.hybrid import burst_queue
from infra.spec.keys import multikueue_key

from .report import table


def cluster_heading(member: Platform) -> str:
    role = member.member.role if member.member else "single"
    name = member.member.name if member.member else member.cluster_name
    return f"{name} ({role}, {member.spec.cluster.kind} {member.cluster_name})"


def burst_rows(platform: Platform) -> list[list[str]]:
    """team, LocalQueue, manager ClusterQueue, worker, guaranteed there, link, credentials key."""
    hybrid = platform.hybrid
    assert hybrid is not None
    rows = []
    for worker_name in hybrid.workers:
        worker, link = hybrid.clusters[worker_name], hybrid.links[worker_name]
        for team in worker.teams:
            guaranteed = ", ".join(f"{flavor} {format_amount(resource, amount)} {resource}"
                                   for flavor, quota in team.quota.items()
                                   for resource, amount in quota.items() if resource not in ("cpu", "memory"))
            rows.append([team.name, f"LocalQueue {worker_name}",
                         f"ClusterQueue {burst_queue(team.name, worker_name)} (cohort {cohort(platform, worker_name)},"
                         f" check {worker_name})", f"{worker_name} ({worker.spec.cluster.kind})", guaranteed or "-",
                         f"{link.network} from {link.source}",
                         f"{multikueue_key(worker_name)} -> Secret kueue-system/{kubeconfig_secret(worker_name)}"])
    return rows


def burst_lines(platform: Platform) -> list[str]:
    rows = [["team", "submit to", "on the manager", "worker", "guaranteed there", "link", "credentials"],
            *burst_rows(platform)]
    return ["Burst path (MultiKueue; teams not listed run on the manager only):", *table(rows)]
