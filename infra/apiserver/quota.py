"""The ResourceQuota admission plugin (k8s.io/apiserver pkg/admission/plugin/resourcequota with the evaluators of
k8s.io/kubernetes pkg/quota/v1/evaluator/core): each object created in a namespace adds its usage to every quota
there; one that would take a tracked resource past its hard limit is refused. What the namespace already holds is
what the stack renders in it, plus the `kube-root-ca.crt` ConfigMap Kubernetes publishes in every namespace, plus
the objects admitted earlier in the same `admit` call. LimitRange defaults are applied to a Pod's containers
first (the LimitRanger plugin runs before quota), and a Pod that still lacks a cpu or memory amount a quota
tracks is refused as the pod evaluator's Constraints refuses it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from infra.apiserver import quantity
from infra.apiserver.resources import resource
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal

FAMILY = "quota"
ROOT_CA = "kube-root-ca.crt"
CORE_COUNTS = {"Pod": "pods", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets",
               "PersistentVolumeClaim": "persistentvolumeclaims", "ReplicationController": "replicationcontrollers",
               "ResourceQuota": "resourcequotas"}
COMPUTE = ("cpu", "memory")  # the pod evaluator's validation set, with requests./limits. prefixes
STORAGE_CLASS = ".storageclass.storage.k8s.io/"
TERMINAL = ("Succeeded", "Failed")


def _amount(value: Any) -> Decimal:
    return quantity.parse(value) if quantity.valid(value) else Decimal(0)


def _containers_with_defaults(pod: dict[str, Any], cluster: ClusterState) -> list[dict[str, Any]]:
    """The pod's containers after the LimitRanger: a Container limit's defaultRequest (else its default) fills an
    unset request, its default an unset limit; then the API server's defaulting makes an unset request its limit."""
    namespace = pod.get("metadata", {}).get("namespace", "")
    defaults: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for limit_range in cluster.of_kind("LimitRange"):
        if limit_range.get("metadata", {}).get("namespace") != namespace:
            continue
        for item in limit_range.get("spec", {}).get("limits", []):
            if item.get("type") == "Container":
                defaults["limits"] |= item.get("default", {})
                defaults["requests"] |= {**item.get("default", {}), **item.get("defaultRequest", {})}
    containers = []
    for field in ("initContainers", "containers"):
        for container in pod.get("spec", {}).get(field, []):
            resources = container.get("resources", {})
            limits = {**defaults["limits"], **resources.get("limits", {})}
            requests = {**limits, **defaults["requests"], **resources.get("requests", {})}
            containers.append({"field": field, "requests": requests, "limits": limits})
    return containers


def _pod_usage(pod: dict[str, Any], cluster: ClusterState) -> tuple[dict[str, Decimal], list[str]]:
    """pods.go PodUsageFunc: the pod count, and requests and limits per resource, the larger of the sum over
    containers and the largest init container; and the cpu and memory amounts no container may leave unset."""
    if pod.get("status", {}).get("phase") in TERMINAL:
        return {}, []
    usage: dict[str, Decimal] = {"pods": Decimal(1), "count/pods": Decimal(1)}
    containers = _containers_with_defaults(pod, cluster)
    missing = sorted({f"{kind}.{name}" for c in containers for kind in ("requests", "limits") for name in COMPUTE
                      if name not in c[kind]})
    for kind in ("requests", "limits"):
        totals: dict[str, Decimal] = defaultdict(Decimal)
        init: dict[str, Decimal] = defaultdict(Decimal)
        for container in containers:
            target = init if container["field"] == "initContainers" else totals
            for name, value in container[kind].items():
                amount = _amount(value)
                target[name] = max(target[name], amount) if target is init else target[name] + amount
        for name in {*totals, *init}:
            amount = max(totals[name], init[name])
            usage[f"{kind}.{name}"] = amount
            if kind == "requests" and name in (*COMPUTE, "ephemeral-storage"):
                usage[name] = amount
    return usage, missing


def usage(obj: dict[str, Any], cluster: ClusterState) -> tuple[dict[str, Decimal], list[str]]:
    """What the object adds to its namespace's quotas, and the compute amounts it leaves unset (Pods)."""
    found = resource(obj, cluster)
    count = f"count/{found.plural}" + (f".{found.group}" if found.group else "")
    amounts: dict[str, Decimal] = {count: Decimal(1)}
    missing: list[str] = []
    kind = str(obj.get("kind", ""))
    if found.group == "" and kind in CORE_COUNTS:
        amounts[CORE_COUNTS[kind]] = Decimal(1)
    spec = obj.get("spec", {})
    if kind == "Pod" and found.group == "":
        pod, missing = _pod_usage(obj, cluster)
        amounts |= pod
    elif kind == "Service" and found.group == "":
        kind_of = spec.get("type", "ClusterIP")
        ports = Decimal(len(spec.get("ports", [])))
        if kind_of == "LoadBalancer":
            amounts["services.loadbalancers"] = Decimal(1)
        if kind_of == "NodePort" or (kind_of == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)):
            amounts["services.nodeports"] = ports
    elif kind == "PersistentVolumeClaim" and found.group == "":
        storage = _amount(spec.get("resources", {}).get("requests", {}).get("storage", 0))
        amounts["requests.storage"] = storage
        storage_class = spec.get("storageClassName")
        if storage_class:
            amounts[f"{storage_class}{STORAGE_CLASS}requests.storage"] = storage
            amounts[f"{storage_class}{STORAGE_CLASS}persistentvolumeclaims"] = Decimal(1)
    return amounts, missing


BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def _text(value: Decimal) -> str:
    """A quantity as the API server prints it: whole binary units when it is some, else the number."""
    if value != value.to_integral_value():
        return str(value.normalize())
    whole = int(value)
    return next((f"{whole // size}{suffix}" for suffix, size in BINARY if whole and whole % size == 0), str(whole))


def _once(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each object once by kind, namespace and name (the first copy)."""
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for obj in objects:
        meta = obj.get("metadata", {})
        seen.setdefault((str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace", "")),
                         str(meta.get("name", ""))), obj)
    return list(seen.values())


class Quotas:
    """The namespaces' quotas and their usage, updated by each object admitted."""

    def __init__(self, cluster: ClusterState, existing: Iterable[dict[str, Any]]) -> None:
        self.cluster = cluster
        self.used: dict[tuple[str, str], Decimal] = defaultdict(Decimal)  # (namespace, resource) -> used
        namespaces = {str(o.get("metadata", {}).get("namespace", "")) for o in cluster.of_kind("ResourceQuota")}
        for obj in _once(existing):  # a hybrid stack renders a team namespace in each of its clusters: count one
            self.add(obj)
        for namespace in namespaces:
            self.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA, "namespace": namespace}})

    def add(self, obj: dict[str, Any]) -> None:
        namespace = str(obj.get("metadata", {}).get("namespace", ""))
        if namespace:
            for name, amount in usage(obj, self.cluster)[0].items():
                self.used[(namespace, name)] += amount

    def review(self, obj: dict[str, Any]) -> list[Refusal]:
        """quota admission's checkRequest: for every quota of the namespace, each tracked resource the object
        uses stays within hard; a constrained cpu or memory amount must be given."""
        namespace = str(obj.get("metadata", {}).get("namespace", ""))
        amounts, missing = usage(obj, self.cluster)
        found = []
        for quota in _once(self.cluster.of_kind("ResourceQuota")):
            if quota.get("metadata", {}).get("namespace") != namespace:
                continue
            name, hard = quota["metadata"]["name"], quota.get("spec", {}).get("hard", {})
            unset = [item for item in missing if item in hard]
            if unset:
                found.append(Refusal(FAMILY, "", f"failed quota: {name}: must specify {','.join(unset)}",
                                     "Forbidden"))
                continue
            over = [key for key in sorted(amounts) if key in hard
                    and self.used[(namespace, key)] + amounts[key] > _amount(hard[key])]
            if over:
                found.append(Refusal(FAMILY, "", f"exceeded quota: {name}, requested: "
                                     + ",".join(f"{k}={_text(amounts[k])}" for k in over) + ", used: "
                                     + ",".join(f"{k}={_text(self.used[(namespace, k)])}" for k in over)
                                     + ", limited: " + ",".join(f"{k}={hard[k]}" for k in over), "Forbidden"))
        return found
