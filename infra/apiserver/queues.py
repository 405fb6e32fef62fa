"""Kueue's side of a tenant's question: the LocalQueue a workload names exists in its namespace, and the
ClusterQueue behind it has quota (or can borrow) for every extended resource (GPUs, RDMA devices) the
workload's pods request. Otherwise the API server admits the object and the Workload stays pending forever,
which a tenant asking "will this run" must hear about."""

from __future__ import annotations

from typing import Any

from infra.apiserver import quantity
from infra.apiserver.podsecurity import pod_templates
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal

FAMILY = "queue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
BUILTIN = ("cpu", "memory", "ephemeral-storage", "pods", "hugepages-")


def requested(obj: dict[str, Any], cluster: ClusterState) -> set[str]:
    """Extended resources (not cpu, memory, storage) that the object's pods ask for with a non-zero amount."""
    amounts: list[dict[str, Any]] = []
    for _, template in pod_templates(obj, cluster):
        for field in ("initContainers", "containers"):
            for container in template.get("spec", {}).get(field, []):
                resources = container.get("resources", {})
                amounts += [resources.get("requests", {}), resources.get("limits", {})]
    if obj.get("kind") == "TrainJob":
        per_node = obj.get("spec", {}).get("trainer", {}).get("resourcesPerNode", {})
        amounts += [per_node.get("requests", {}), per_node.get("limits", {})]
    return {name for amount in amounts for name, value in amount.items()
            if not name.startswith(BUILTIN) and quantity.valid(value) and quantity.parse(value) > 0}


def _can_use(cluster_queue: dict[str, Any], resource: str) -> bool:
    spec = cluster_queue.get("spec", {})
    for group in spec.get("resourceGroups", []):
        for flavor in group.get("flavors", []):
            for quota in flavor.get("resources", []):
                if quota.get("name") != resource:
                    continue
                if quantity.parse(quota.get("nominalQuota", 0)) > 0:
                    return True
                borrowing = quota.get("borrowingLimit")
                if spec.get("cohortName") and (borrowing is None or quantity.parse(borrowing) > 0):
                    return True
    return False


def review(obj: dict[str, Any], cluster: ClusterState, excluded: tuple[str, ...] = ()) -> list[Refusal]:
    """`excluded`: resource prefixes Kueue's configuration leaves out of quota (excludeResourcePrefixes)."""
    queue = obj.get("metadata", {}).get("labels", {}).get(QUEUE_LABEL)
    if queue is None:
        return []
    namespace = str(obj.get("metadata", {}).get("namespace", ""))
    where = f"metadata.labels[{QUEUE_LABEL}]"
    local = cluster.local_queue(namespace, str(queue))
    if local is None:
        names = sorted(q["metadata"]["name"] for q in cluster.of_kind("LocalQueue")
                       if q.get("metadata", {}).get("namespace") == namespace)
        return [Refusal(FAMILY, where, f"LocalQueue {queue!r} does not exist in namespace {namespace} "
                        f"(its queues: {', '.join(names) or 'none'}); the Workload would stay pending")]
    name = str(local.get("spec", {}).get("clusterQueue", ""))
    cluster_queue = cluster.cluster_queue(name)
    if cluster_queue is None:
        return [Refusal(FAMILY, where, f"LocalQueue {queue!r} points to ClusterQueue {name!r}, which does not exist")]
    return [Refusal(FAMILY, "", f"ClusterQueue {name!r} (LocalQueue {namespace}/{queue}) has no quota for "
                    f"{resource} and cannot borrow it: the Workload would stay pending")
            for resource in sorted(requested(obj, cluster))
            if not resource.startswith(excluded) and not _can_use(cluster_queue, resource)]
