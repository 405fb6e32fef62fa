"""Checks across the clusters of a multi-cluster stack, on what the run declares on each side: what MultiKueue
needs to exist on a worker for a job the manager dispatches (its LocalQueue, the runtimes, the priorities), the
manager's rights there (least privilege, every dispatched kind), the worker's kubeconfig on the manager, and
the data and images its jobs reach (hybrid_data.py)."""

from __future__ import annotations

from typing import Any

from infra.checks.context import StackContext
from infra.components import KUEUE, kubeconfig_secret
from infra.components import KUEUE_FRAMEWORKS as FRAMEWORKS
from infra.components import KUEUE_JOB_KINDS as JOB_KINDS
from infra.components import MULTIKUEUE_ACCOUNT as ACCOUNT
from infra.components import MULTIKUEUE_WRITE as WRITE
from infra.spec import Finding
from infra.spec.input.keys import multikueue_key

KUEUE_GROUP, KUEUE_NAMESPACE = KUEUE.crds[0].group, KUEUE.namespace

CHECK = "multikueue"


def _of(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objs if obj.get("kind") == kind]


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta.get("name", "")


def needed_rules() -> list[tuple[str, str, tuple[str, ...]]]:
    """(API group, resource, verbs) the manager's MultiKueue client uses on a worker (Kueue v0.19.2
    test/util/multikueue.go): Workloads, and each integrated job kind with its status."""
    needed = [(KUEUE_GROUP, "workloads", tuple(WRITE)), (KUEUE_GROUP, "workloads/status", ("get", "patch", "update"))]
    for framework in FRAMEWORKS:
        group, resource = JOB_KINDS[framework]
        needed += [(group, resource, tuple(WRITE)), (group, f"{resource}/status", ("get",))]
    return needed


def rbac_findings(worker: str, objs: list[dict[str, Any]]) -> list[Finding]:
    """The manager's ServiceAccount on the worker: bound to exactly the rights it needs, no wildcard, no
    built-in admin role."""
    subject = f"ClusterRole/{ACCOUNT}"
    bound = [b["roleRef"]["name"] for b in _of(objs, "ClusterRoleBinding")
             if any(s.get("kind") == "ServiceAccount" and s.get("name") == ACCOUNT and
                    s.get("namespace") == KUEUE_NAMESPACE for s in b.get("subjects", []))]
    if bound != [ACCOUNT]:
        return [Finding(CHECK, f"{worker}: {subject}", f"the manager's ServiceAccount {KUEUE_NAMESPACE}/{ACCOUNT} must "
                        f"be bound to {ACCOUNT} only, not {', '.join(bound) or 'nothing'}")]
    role = next((r for r in _of(objs, "ClusterRole") if r["metadata"]["name"] == ACCOUNT), {})
    rules = role.get("rules", [])
    findings = [Finding(CHECK, f"{worker}: {subject}", f"rule {rule} has a wildcard: name the groups, resources "
                        "and verbs MultiKueue uses") for rule in rules
                if "*" in [*rule.get("apiGroups", []), *rule.get("resources", []), *rule.get("verbs", [])]]
    for group, resource, verbs in needed_rules():
        granted = {verb for rule in rules if group in rule.get("apiGroups", []) and resource in
                   rule.get("resources", []) for verb in rule.get("verbs", [])}
        missing = [verb for verb in verbs if verb not in granted]
        if missing:
            findings.append(Finding(CHECK, f"{worker}: {subject}", f"lacks {', '.join(missing)} on "
                                    f"{resource}.{group}: MultiKueue cannot dispatch or follow that kind there"))
    return findings


def mirror_findings(worker: str, manager_objs: list[dict[str, Any]],
                    worker_objs: list[dict[str, Any]]) -> list[Finding]:
    """A dispatched job keeps its namespace, queue name, runtime and priority class: each must exist on the
    worker, and a priority must have the same value there."""
    findings = []
    checked = {cq["metadata"]["name"] for cq in _of(manager_objs, "ClusterQueue")
               if {"name": worker} in cq["spec"].get("admissionChecksStrategy", {}).get("admissionChecks", [])}
    worker_queues = {_key(lq) for lq in _of(worker_objs, "LocalQueue")}
    for lq in _of(manager_objs, "LocalQueue"):
        if lq["spec"]["clusterQueue"] in checked and _key(lq) not in worker_queues:
            findings.append(Finding(CHECK, f"{worker}: LocalQueue {'/'.join(_key(lq))}", "dispatched jobs keep "
                                    "their namespace and queue name, but the worker has no such LocalQueue"))
    theirs = {obj["metadata"]["name"]: obj.get("value") for obj in _of(worker_objs, "WorkloadPriorityClass")}
    for priority in _of(manager_objs, "WorkloadPriorityClass"):
        name = priority["metadata"]["name"]
        if theirs.get(name) != priority.get("value"):
            findings.append(Finding(CHECK, f"{worker}: WorkloadPriorityClass {name}", f"value {priority.get('value')} "
                                    f"on the manager, {theirs.get(name)} on the worker: priorities must mean the "
                                    "same on both"))
    runtimes = {obj["metadata"]["name"] for obj in _of(worker_objs, "ClusterTrainingRuntime")}
    only_here = sorted(obj["metadata"]["name"] for obj in _of(manager_objs, "ClusterTrainingRuntime")
                       if obj["metadata"]["name"] not in runtimes)
    if only_here:
        findings.append(Finding(CHECK, f"{worker}: ClusterTrainingRuntimes", f"{', '.join(only_here)} exist on the "
                                "manager only (pool variants): a burst job naming one stays pending on the worker; "
                                "burst jobs name the base runtimes", severity="warning"))
    return findings


def check_worker_kubeconfig(stack: StackContext) -> list[Finding]:
    """The manager holds each worker's kubeconfig Secret (MultiKueue reaches the worker with it)."""
    hybrid = stack.platform.hybrid
    if hybrid is None:
        return []
    secrets = {_key(obj) for obj in _of(stack.parts[hybrid.manager], "Secret")}
    return [Finding(CHECK, f"{worker}: MultiKueueCluster {worker}", "no kubeconfig: set it with "
                    f"`pulumi config set --secret {multikueue_key(worker)} < {worker}.kubeconfig` "
                    "(docs/hybrid.md); until then nothing bursts", severity="warning")
            for worker in hybrid.workers if (KUEUE_NAMESPACE, kubeconfig_secret(worker)) not in secrets]


def check_worker_rbac(stack: StackContext) -> list[Finding]:
    return [f for worker in stack.workers() for f in rbac_findings(worker, stack.parts[worker])]


def check_worker_mirror(stack: StackContext) -> list[Finding]:
    hybrid = stack.platform.hybrid
    if hybrid is None:
        return []
    manager = stack.parts[hybrid.manager]
    return [f for worker in hybrid.workers for f in mirror_findings(worker, manager, stack.parts[worker])]
