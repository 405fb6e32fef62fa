"""A multi-cluster stack's run, cluster by cluster: each cluster's resources are those under its top-level
components, whose names carry the cluster (infra/kit/naming.py). Every check then runs on each cluster as on a
single-cluster stack, against that cluster's own Platform."""

from __future__ import annotations

from dataclasses import replace

from infra.offline.engine import Capture, Registration
from infra.spec import Platform

STACK_TYPE = "pulumi:pulumi:Stack"


def _top(record: Registration, by_ref: dict[str, Registration]) -> Registration:
    current = record
    while current.parent and not current.parent.startswith(STACK_TYPE) and current.parent in by_ref:
        current = by_ref[current.parent]
    return current


def owner(name: str, clusters: list[str]) -> str:
    """The cluster whose prefix a top-level name carries (the longest, should one cluster's name start another's)."""
    matches = [cluster for cluster in clusters if name.startswith(f"{cluster}-")]
    if not matches:
        raise ValueError(f"resource '{name}' belongs to no cluster: build it inside cluster_scope()")
    return max(matches, key=len)


def split(platform: Platform, capture: Capture) -> dict[str, tuple[Platform, Capture]]:
    """cluster name -> (its Platform, its part of the run); a single-cluster stack is one part named ''."""
    if platform.hybrid is None:
        return {"": (platform, capture)}
    clusters = list(platform.hybrid.clusters)
    by_ref = {r.ref(): r for r in capture.resources}
    parts: dict[str, list[Registration]] = {name: [] for name in clusters}
    for record in capture.resources:
        parts[owner(_top(record, by_ref).name, clusters)].append(record)
    chart_owner = {r.ref(): cluster for cluster, records in parts.items() for r in records}
    return {name: (platform.hybrid.clusters[name],
                   replace(capture, resources=tuple(parts[name]),
                           charts=tuple(c for c in capture.charts if chart_owner.get(c.source.ref) == name),
                           kustomizations=tuple(k for k in capture.kustomizations
                                                if chart_owner.get(k.source.ref) == name)))
            for name in clusters}
