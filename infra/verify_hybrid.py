"""`trainyard verify` on a multi-cluster stack: every cluster is verified as a stack of its own (its context:
the existing cluster's `context`, else the cluster's name, or `--context CLUSTER=CONTEXT`), and the manager is
asked whether MultiKueue holds: each worker's MultiKueueCluster Active (the manager reached the worker's API
server with the kubeconfig it was given: the link and the credentials), its AdmissionCheck Active, and every
burst ClusterQueue Active."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from infra.spec import Finding, Platform, SpecError
from infra.spec.hybrid import burst_queue

# Why an object is inactive, in the words of the fix (Kueue 0.19.2 multikueuecluster.go and admissioncheck.go).
HINTS = {"InsecureKubeConfig": "the kubeconfig uses what Kueue refuses (exec plugin, token file, CA file): see "
                               "docs/hybrid.md, Manager credentials",
         "BadKubeConfig": "the kubeconfig Secret is missing or unreadable: set trainyard:multikueue-<worker> and "
                          "run pulumi up",
         "ClientConnectionFailed": "the manager cannot reach the worker's API server: check the link (VPN, routes, "
                                   "the endpoint's allowed networks) and the token"}


class ManagerView(Protocol):
    def cluster_queues(self) -> list[dict[str, Any]]: ...
    def kueue_objects(self, plural: str) -> list[dict[str, Any]]: ...


def contexts(platform: Platform, overrides: Sequence[str]) -> dict[str, str]:
    """Each cluster's kubeconfig context: `--context CLUSTER=CONTEXT`, else an existing cluster's own context,
    else the cluster's name (e.g. `aws eks update-kubeconfig --name N --alias N`)."""
    assert platform.hybrid is not None
    chosen: dict[str, str] = {}
    for override in overrides:
        cluster, _, context = override.partition("=")
        if cluster not in platform.hybrid.clusters or not context:
            raise SpecError("--context", f"'{override}': give CLUSTER=CONTEXT with CLUSTER one of "
                                         f"{', '.join(platform.hybrid.clusters)}")
        chosen[cluster] = context
    for name, member in platform.hybrid.clusters.items():
        existing = member.spec.cluster.existing
        chosen.setdefault(name, existing.context if existing else member.cluster_name)
    return chosen


def _inactive(obj: dict[str, Any] | None) -> str | None:
    """None when the object's Active condition is True; else why not."""
    if obj is None:
        return "not found"
    conditions: list[dict[str, Any]] = obj.get("status", {}).get("conditions", [])
    active = next((c for c in conditions if c.get("type") == "Active"), {})
    if active.get("status") == "True":
        return None
    reason = active.get("reason", "no Active condition yet")
    return f"{reason}" + (f": {HINTS[reason]}" if reason in HINTS else "")


def multikueue_findings(platform: Platform, live: ManagerView) -> list[Finding]:
    hybrid = platform.hybrid
    if hybrid is None:
        return []
    by_kind = {plural: {o["metadata"]["name"]: o for o in live.kueue_objects(plural)}
               for plural in ("multikueueclusters", "admissionchecks")}
    queues = {q["metadata"]["name"]: q for q in live.cluster_queues()}
    findings = []
    for worker in hybrid.workers:
        wanted = [("MultiKueueCluster", by_kind["multikueueclusters"].get(worker), worker),
                  ("AdmissionCheck", by_kind["admissionchecks"].get(worker), worker),
                  *(("ClusterQueue", queues.get(burst_queue(team, worker)), burst_queue(team, worker))
                    for team in hybrid.bursting(worker))]
        for kind, obj, name in wanted:
            why = _inactive(obj)
            if why:
                findings.append(Finding("verify", f"{kind} {name}", f"not active ({why})"))
    return findings
