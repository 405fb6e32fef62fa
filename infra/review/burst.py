"""The burst path of a multi-cluster stack, for the plan summary and the stack page: which team queue dispatches
to which worker, with what guarantee, over which link and credentials, and where its jobs' data and images come
from there."""

from __future__ import annotations

from infra.components import KUEUE, kubeconfig_secret
from infra.kit.tables import text_table
from infra.spec import Platform
from infra.spec.base import format_amount
from infra.spec.hybrid.burst_data import KINDS, Registry, place
from infra.spec.hybrid.model import burst_cohort, burst_queue
from infra.spec.input.keys import multikueue_key


def cluster_heading(member: Platform) -> str:
    role = member.member.role if member.member else "single"
    name = member.member.name if member.member else member.cluster_name
    return f"{name} ({role}, {member.spec.cluster.kind} {member.cluster_name})"


def burst_rows(platform: Platform) -> list[list[str]]:
    """team, LocalQueue, manager ClusterQueue, worker, guaranteed there, link, credentials key."""
    hybrid = platform.hybrid
    assert hybrid is not None
    rows, cohort = [], platform.spec.queueing.cohort
    for worker_name in hybrid.workers:
        worker, link = hybrid.clusters[worker_name], hybrid.links[worker_name]
        for team in worker.teams:
            guaranteed = ", ".join(f"{flavor} {format_amount(resource, amount)} {resource}"
                                   for flavor, quota in team.quota.items()
                                   for resource, amount in quota.items() if resource not in ("cpu", "memory"))
            rows.append([team.name, f"LocalQueue {worker_name}",
                         f"ClusterQueue {burst_queue(team.name, worker_name)} "
                         f"(cohort {burst_cohort(cohort, worker_name)}, check {worker_name})",
                         f"{worker_name} ({worker.spec.cluster.kind})", guaranteed or "-",
                         f"{link.network} from {link.source}",
                         f"{multikueue_key(worker_name)} -> Secret {KUEUE.namespace}/{kubeconfig_secret(worker_name)}"])
    return rows


DATA_HEADER = ["worker", "team", "datasets", "checkpoints", "registries"]


def _registry(registry: Registry) -> str:
    how = [part for part in (registry.network if registry.network != "public" else None,
                             registry.pull_secret_name) if part]
    return registry.prefix + (f" ({', '.join(how)})" if how else "")


def data_rows(platform: Platform) -> list[list[str]]:
    """worker, team, where its datasets and checkpoints are from there (and with which credentials), registries."""
    hybrid = platform.hybrid
    assert hybrid is not None
    rows = []
    for worker_name in hybrid.workers:
        worker = hybrid.clusters[worker_name]
        data = worker.member.data if worker.member else None
        registries = ", ".join(_registry(r) for r in data.registries) if data else "-"
        for team in worker.teams:
            cells = []
            for kind in KINDS:
                found = place(data, kind, team.name, platform, worker) if data else None
                if found is None or found.uri is None:
                    cells.append(f"{found.location if found else 'volume'} (not reachable: see the findings)")
                    continue
                via = f" at {found.endpoint}" if found.endpoint else ""
                cells.append(f"{found.uri}{via} ({found.secret or 'workload identity'})")
            rows.append([worker_name, team.name, *cells, registries])
    return rows


def burst_lines(platform: Platform) -> list[str]:
    rows = [["team", "submit to", "on the manager", "worker", "guaranteed there", "link", "credentials"],
            *burst_rows(platform)]
    return ["Burst path (MultiKueue; teams not listed run on the manager only):", *text_table(rows), "",
            "Burst data (where dispatched jobs find their data and images; ConfigMap trainyard-data in each team "
            "namespace on the worker):", *text_table([DATA_HEADER, *data_rows(platform)])]
