"""Which REST resource an object is (API group, plural, namespaced or not), as the API server's discovery would
answer: the built-in kinds a tenant or the platform submits, and the custom ones from the CRDs the cluster holds."""

from __future__ import annotations

from typing import Any, NamedTuple

from infra.apiserver.state import ClusterState
from infra.apiserver.vap import resource_of


class Resource(NamedTuple):
    group: str
    plural: str
    namespaced: bool


def _core(group: str, namespaced: bool, *kinds: str) -> dict[tuple[str, str], Resource]:
    return {(group, kind): Resource(group, resource_of(kind), namespaced) for kind in kinds}


BUILT_IN: dict[tuple[str, str], Resource] = {
    **_core("", True, "Pod", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "ServiceAccount",
            "ResourceQuota", "LimitRange", "Event", "Endpoints", "PodTemplate", "ReplicationController"),
    **_core("", False, "Namespace", "Node", "PersistentVolume"),
    **_core("batch", True, "Job", "CronJob"),
    **_core("apps", True, "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"),
    **_core("rbac.authorization.k8s.io", True, "Role", "RoleBinding"),
    **_core("rbac.authorization.k8s.io", False, "ClusterRole", "ClusterRoleBinding"),
    **_core("networking.k8s.io", True, "NetworkPolicy", "Ingress"),
    **_core("policy", True, "PodDisruptionBudget"),
    **_core("storage.k8s.io", False, "StorageClass", "CSIDriver", "VolumeAttachment"),
    **_core("scheduling.k8s.io", False, "PriorityClass"),
    **_core("admissionregistration.k8s.io", False, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
            "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"),
    **_core("apiextensions.k8s.io", False, "CustomResourceDefinition"),
    **_core("coordination.k8s.io", True, "Lease"),
}


def resource(obj: dict[str, Any], cluster: ClusterState) -> Resource:
    """The object's resource: built in, else from the cluster's CRD of its group and kind, else the kind's
    lower-case plural in its group (namespaced when the object names a namespace)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", ""))
    if (group, kind) in BUILT_IN:
        return BUILT_IN[(group, kind)]
    for crd in cluster.of_kind("CustomResourceDefinition"):
        spec = crd.get("spec", {})
        if spec.get("group") == group and spec.get("names", {}).get("kind") == kind:
            return Resource(group, str(spec["names"]["plural"]), spec.get("scope") == "Namespaced")
    return Resource(group, resource_of(kind), bool(obj.get("metadata", {}).get("namespace")))
