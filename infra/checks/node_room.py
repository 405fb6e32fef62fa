"""What a pool's nodes leave for team pods: the kubelet's reservation (Flavor.allocatable, from the cloud's
published formula) less the requests of the DaemonSets the platform itself runs there, read from the render.

A DaemonSet lands on a pool when its pods tolerate every NoSchedule/NoExecute taint of the pool and their node
selector and required node affinity match the pool's labels (plus kubernetes.io/os=linux, kubernetes.io/arch=
amd64). A label the pool does not carry (one a node feature labeller or a cloud sets) is taken as absent, so an
operator's per-feature DaemonSets are not counted: the figure is what the platform surely takes, not more."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from infra.checks.context import Context
from infra.spec import Finding, Flavor, Platform
from infra.spec.base import format_amount, parse_quantity

RESOURCES = ("cpu", "memory")
NODE_DEFAULTS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


def _tolerated(taint: Mapping[str, str], tolerations: list[dict[str, Any]]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint["effect"]):
            continue
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            return True
        if toleration.get("key") == taint["key"] and (
                toleration.get("operator") == "Exists" or toleration.get("value", "") == taint.get("value", "")):
            return True
    return False


def _expression(expr: dict[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    return {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
            "Exists": key in labels, "DoesNotExist": key not in labels}.get(str(operator), False)


def lands_on(pod: Mapping[str, Any], flavor: Flavor) -> bool:
    labels = {**NODE_DEFAULTS, **flavor.node_labels}
    if any(labels.get(key) != value for key, value in (pod.get("nodeSelector") or {}).items()):
        return False
    if not all(_tolerated(taint, pod.get("tolerations") or []) for taint in flavor.taints
               if taint["effect"] in ("NoSchedule", "NoExecute")):
        return False
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    return not required or any(all(_expression(e, labels) for e in term.get("matchExpressions") or [])
                               for term in required)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """The scheduler's view of a pod's requests: its containers' sum, or its largest init container if more."""
    def requests(container: Mapping[str, Any], resource: str) -> Decimal:
        value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        return parse_quantity(value) if value is not None else Decimal(0)

    return {r: max(sum((requests(c, r) for c in pod.get("containers") or []), Decimal(0)),
                   max((requests(c, r) for c in pod.get("initContainers") or []), default=Decimal(0)))
            for r in RESOURCES}


def daemonset_requests(flavor: Flavor, objects: list[dict[str, Any]]) -> dict[str, Decimal]:
    """Per node of the pool: the requests of the rendered DaemonSets that land on it."""
    total = dict.fromkeys(RESOURCES, Decimal(0))
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {}) if obj.get("kind") == "DaemonSet" else None
        if pod and lands_on(pod, flavor):
            for resource, amount in pod_requests(pod).items():
                total[resource] += amount
    return total


def room(platform: Platform, objects: list[dict[str, Any]]) -> dict[str, dict[str, Decimal]]:
    """flavor -> resource -> what team pods can request on the pool's guaranteed nodes."""
    result = {}
    for flavor in platform.flavors:
        nodes = platform.pool(flavor.pool).node_count
        taken = daemonset_requests(flavor, objects)
        kubelet = {"cpu": flavor.kubelet_reserve.cpu, "memory": flavor.kubelet_reserve.memory}
        result[flavor.name] = {r: max(flavor.capacity[r] - (kubelet[r] + taken[r]) * nodes, Decimal(0))
                               for r in RESOURCES}
    return result


def check_room_after_daemonsets(ctx: Context) -> list[Finding]:
    return room_findings(ctx.platform, ctx.objects())


def room_findings(platform: Platform, objects: list[dict[str, Any]]) -> list[Finding]:
    findings = []
    for name, free in room(platform, objects).items():
        flavor = platform.flavor(name)
        for resource in RESOURCES:
            # the teams' quotas and serving budgets (InferenceServices run on the same nodes, outside Kueue)
            guaranteed = (platform.quota_sums[name].get(resource, Decimal(0))
                          + platform.serving_sums.get(name, {}).get(resource, Decimal(0)))
            # beyond the spec's allocatable, capacity-fits-pool already says so
            if free[resource] < guaranteed <= flavor.allocatable[resource]:
                findings.append(Finding(
                    "capacity", f"flavor {name}",
                    f"teams guarantee {format_amount(resource, guaranteed)} {resource} but the pool's nodes leave "
                    f"{format_amount(resource, free[resource])} for them "
                    f"({format_amount(resource, flavor.capacity[resource])} less the kubelet's reservation and the "
                    "platform's DaemonSets in the render): lower a team quota or add nodes"))
    return findings
