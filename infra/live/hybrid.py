"""`trainyard verify` on a multi-cluster stack: every cluster is verified as a stack of its own (its context:
the existing cluster's `context`, else the cluster's name, or `--context CLUSTER=CONTEXT`), and the manager is
asked whether MultiKueue holds: each worker's MultiKueueCluster Active (the manager reached the worker's API
server with the kubeconfig it was given: the link and the credentials), its AdmissionCheck Active, and every
burst ClusterQueue Active. On each worker it checks what MultiKueue does not copy and the site creates: the
Secrets the stack's burst needs (`secret:<name>` prerequisites) in every bursting team namespace, and the pull
Secrets on each team's data account."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from infra.spec import Finding, Platform, SpecError
from infra.spec.hybrid.burst_data import pull_secrets
from infra.spec.hybrid.model import WORKER, burst_queue
from infra.spec.storage.model import TEAM_DATA_ACCOUNT

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


class WorkerView(Protocol):
    def secret_exists(self, namespace: str, name: str) -> bool: ...
    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None: ...


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


def worker_data_findings(platform: Platform, live: WorkerView) -> list[Finding]:
    """On a worker: each Secret its burst needs, in every bursting team namespace, and the pull Secrets on the
    team data accounts (what the site creates: MultiKueue copies no Secret)."""
    member = platform.member
    if member is None or member.role != WORKER:
        return []
    needed = [(need.capability.removeprefix("secret:"), need.who) for need in platform.prerequisites.needs
              if need.capability.startswith("secret:")]
    pulls = pull_secrets(member.data)
    findings = []
    for namespace in (ns for team in platform.teams for ns in team.namespaces):
        findings += [Finding("verify", f"Secret {namespace}/{name}", f"missing (needed by {who}): MultiKueue copies "
                             "no Secret; create it in every bursting team namespace (docs/hybrid.md)")
                     for name, who in needed if not live.secret_exists(namespace, name)]
        account = live.service_account(namespace, TEAM_DATA_ACCOUNT)
        named = {ref.get("name") for ref in (account or {}).get("imagePullSecrets") or []}
        missing = [name for name in pulls if name not in named]
        if account is None or missing:
            findings.append(Finding("verify", f"ServiceAccount {namespace}/{TEAM_DATA_ACCOUNT}",
                                    "not found" if account is None else f"lacks imagePullSecrets {', '.join(missing)}: "
                                    "run pulumi up"))
    return findings
