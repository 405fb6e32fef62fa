"""The plan summary a reviewer reads: resources per component, capacity vs quota, versions, findings."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from infra.checks.node_room import room
from infra.kit.tables import text_table
from infra.offline.clusters import split
from infra.offline.engine import Capture, Registration
from infra.offline.plan import objects
from infra.review.burst import burst_lines, cluster_heading
from infra.spec import Finding, Platform
from infra.spec.base import format_amount

STACK_TYPE = "pulumi:pulumi:Stack"


def top_component(record: Registration, by_ref: dict[str, Registration]) -> str:
    current = record
    while current.parent and not current.parent.startswith(STACK_TYPE) and current.parent in by_ref:
        current = by_ref[current.parent]
    return current.type


def per_component(capture: Capture) -> Counter[str]:
    by_ref = {r.ref(): r for r in capture.resources}
    return Counter(top_component(r, by_ref) for r in capture.resources)


def capacity_rows(platform: Platform, free: dict[str, dict[str, Decimal]] | None = None) -> list[list[str]]:
    """`free`: per flavor, what the nodes leave for team pods (node_room.room); default: the spec's allocatable."""
    rows = [["flavor", "resource", "nominal", "allocatable", "guaranteed", "shared", "teams"]]
    for flavor in platform.flavors:
        for resource in (*flavor.gpu_resources, "cpu", "memory"):
            teams = [f"{t.name} {format_amount(resource, t.quota[flavor.name][resource])}"
                     for t in platform.teams if flavor.name in t.quota and t.quota[flavor.name].get(resource)]
            offered = (free or {}).get(flavor.name, {}).get(resource, flavor.allocatable[resource])
            rows.append([
                flavor.name, resource, format_amount(resource, flavor.capacity[resource]),
                format_amount(resource, offered),
                format_amount(resource, platform.quota_sums[flavor.name].get(resource, Decimal(0))),
                format_amount(resource, platform.shared_pool[flavor.name].get(resource, Decimal(0))),
                ", ".join(teams) or "-",
            ])
    return rows


def summary(platform: Platform, capture: Capture, findings: list[Finding]) -> str:
    spec = platform.spec
    if platform.hybrid is None:
        lines = [f"Trainyard plan: stack {platform.stack}, cluster {platform.cluster_name} ({spec.cluster.kind})", ""]
        lines += _cluster_lines(platform, capture)
    else:
        clusters = ", ".join(cluster_heading(member) for member in platform.hybrid.clusters.values())
        lines = [f"Trainyard plan: stack {platform.stack}, {len(platform.hybrid.clusters)} clusters: {clusters}",
                 "", f"Resources: {len(capture.resources)}"]
        for member, part in split(platform, capture).values():
            lines += ["", f"== Cluster {cluster_heading(member)}", *_cluster_lines(member, part)]
        lines += ["", *burst_lines(platform)]
    versions = spec.versions
    lines += ["", f"Versions: kueue {versions.kueue}, trainer {versions.trainer}, jobset {versions.jobset}, "
                  f"kubernetes {versions.kubernetes}"]
    lines += [f"  {'ok ' if v.ok else 'BAD'} {v.pair}: {v.reason}" for v in platform.version_verdicts]
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    lines += ["", f"Findings: {len(errors)} error(s), {len(warnings)} warning(s)"]
    lines += [f"  {f.line()}" for f in findings]
    return "\n".join(lines)


def _cluster_lines(platform: Platform, capture: Capture) -> list[str]:
    """Resources per component, pools and capacity per flavor of one cluster."""
    counts = per_component(capture)
    lines = [f"Resources: {len(capture.resources)}"]
    from_charts = sum(1 for r in capture.resources if r.chart)
    kustomizations = f" and {len(capture.kustomizations)} kustomizations" if capture.kustomizations else ""
    lines.append(f"Kubernetes objects: {len(objects(capture)) - from_charts} declared, {from_charts} from "
                 f"{len(capture.charts)} charts{kustomizations} "
                 f"({sum(len(c.hooks) for c in capture.charts)} chart hooks skipped)")
    lines += text_table([["component", "resources"]] + [[name, str(n)] for name, n in sorted(counts.items())])
    lines += ["", "Pools (capacity derived from):"]
    lines += text_table([["flavor", "from"]] + [[flavor.name, flavor.origin] for flavor in platform.flavors])
    lines += ["", "Capacity per flavor (nominal: the nodes' size; allocatable: less the kubelet's reservation and the "
                  "platform's DaemonSets; what teams are guaranteed; the rest is the cohort's shared pool):"]
    lines += text_table(capacity_rows(platform, room(platform, [obj for _, obj in objects(capture)])))
    return lines
