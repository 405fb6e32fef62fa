"""Namespaces no team may take: Kubernetes' own, the platform's (where Trainyard installs its operators), and the
prefixes Trainyard derives namespaces with. A team's namespaces (its name by default) get a ResourceQuota, a
default-deny NetworkPolicy, PVCs and RoleBindings: in kube-system or kueue-system these would break the cluster.
"""

from __future__ import annotations

from infra.components import namespaces

# Kubernetes creates these (kube-* is reserved for it: kubernetes.io/docs/concepts/overview/working-with-objects/
# namespaces); the platform's components live in theirs (infra/components.py). The others are where a site or a
# later release installs what Trainyard works with: rook-ceph is the Rook cluster's default namespace.
KUBERNETES_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
SITE_NAMESPACES = frozenset({"rook-ceph", "trainyard-system", "nvidia-network-operator"})
PLATFORM_NAMESPACES = namespaces() | SITE_NAMESPACES
RESERVED_NAMESPACES = KUBERNETES_NAMESPACES | PLATFORM_NAMESPACES
# drill-<namespace> is where the restore drill restores a team namespace (infra/spec/backup.py DRILL_PREFIX).
RESERVED_PREFIXES = ("kube-", "drill-")


def reserved_problem(namespace: str) -> str | None:
    """Why a team may not have this namespace, or None."""
    if namespace in KUBERNETES_NAMESPACES:
        return f"namespace '{namespace}' is reserved: it belongs to Kubernetes"
    if namespace in PLATFORM_NAMESPACES:
        return f"namespace '{namespace}' is reserved for the platform's own components"
    prefix = next((p for p in RESERVED_PREFIXES if namespace.startswith(p)), None)
    if prefix == "drill-":
        return (f"namespace '{namespace}' is reserved: 'drill-' names the namespaces restore drills restore team "
                "namespaces into")
    if prefix is not None:
        return f"namespace '{namespace}' is reserved: Kubernetes keeps the '{prefix}' prefix for itself"
    return None
