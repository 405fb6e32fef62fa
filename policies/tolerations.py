"""The gpu-tolerations rule: a GPU workload may tolerate only the taints of the GPU pools it is meant for.

GPU pools are the Kueue ResourceFlavors that offer GPUs (a ClusterQueue or the Cohort gives them a GPU
quota above zero); the taints they are meant for are those flavors' nodeTaints (the pools' node taints,
which a workload must tolerate to use the flavor) and tolerations. GPU workloads are anything that
requests a GPU, and training runtimes that tolerate a GPU taint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from infra.spec.base import parse_quantity
from policies.kube import (
    GPU_RESOURCE_PREFIX,
    POD_SPEC_PATHS,
    TRAINING_RUNTIMES,
    get,
    items,
    kind_of,
    meta,
    objects,
    pod_specs,
    requests_gpu,
)


def _offers_gpus(resource_entry: Any) -> bool:
    name = str(get(resource_entry, "name") or "")
    if not name.startswith(GPU_RESOURCE_PREFIX):
        return False
    try:
        return parse_quantity(str(get(resource_entry, "nominalQuota") or 0)) > 0
    except ValueError:
        return True  # an unreadable quota is the schema check's finding; count the flavor as GPU


def gpu_flavors(resources: Sequence[Any]) -> set[str]:
    names: set[str] = set()
    for kind in ("ClusterQueue", "Cohort"):
        for queue in objects(resources, kind):
            for group in items(get(queue.props, "spec", "resourceGroups")):
                for flavor in items(get(group, "flavors")):
                    if any(_offers_gpus(entry) for entry in items(get(flavor, "resources"))):
                        names.add(str(get(flavor, "name") or ""))
    return names


def _field(toleration: Any, key: str) -> str:
    return str(get(toleration, key) or "")


def covers(meant: Any, toleration: Any) -> bool:
    """Whether `toleration` tolerates nothing beyond `meant`, a flavor's node taint or toleration."""
    if _field(toleration, "key") != _field(meant, "key"):
        return False
    effect = _field(toleration, "effect")
    if effect and effect != _field(meant, "effect"):
        return False
    if _field(toleration, "operator") == "Exists" or _field(meant, "operator") == "Exists":
        return True
    return _field(toleration, "value") == _field(meant, "value")


def describe(toleration: Any) -> str:
    key, value, effect = _field(toleration, "key"), _field(toleration, "value"), _field(toleration, "effect")
    taint = f"{key}={value}" if value else (key or "*")
    return f"{taint}:{effect or '*'}"


def _workload_tolerations(kind: str, props: Mapping[str, Any], gpu_keys: set[str]) -> list[Any]:
    """Tolerations of the pod specs that are GPU workloads: those requesting GPUs, and training runtimes
    that tolerate a GPU taint (a CPU-only runtime may tolerate its own pool's taints)."""
    tolerations: list[Any] = []
    for spec in pod_specs(kind, props):
        own = items(spec.get("tolerations"))
        gpu_runtime = kind in TRAINING_RUNTIMES and any(_field(t, "key") in gpu_keys | {""} for t in own)
        if gpu_runtime or requests_gpu(spec):
            tolerations += own
    return tolerations


def gpu_tolerations(args: StackValidationArgs, report: ReportViolation) -> None:
    wanted = gpu_flavors(args.resources)
    meant = [t for flavor in objects(args.resources, "ResourceFlavor") if meta(flavor.props)[1] in wanted
             for field in ("nodeTaints", "tolerations") for t in items(get(flavor.props, "spec", field))]
    for resource in args.resources:
        kind = kind_of(resource.resource_type)
        if kind not in POD_SPEC_PATHS:
            continue
        namespace, name, _ = meta(resource.props)
        where = f"{kind} {'/'.join(filter(None, (namespace, name)))}"
        for toleration in _workload_tolerations(kind, resource.props, {_field(m, "key") for m in meant}):
            if not _field(toleration, "key"):
                report(f"{where} tolerates every taint ({describe(toleration)}): tolerate the GPU pools' taints "
                       "by key", resource.urn)
            elif not any(covers(m, toleration) for m in meant):
                report(f"{where} tolerates {describe(toleration)}, which no GPU pool's flavor carries "
                       f"(GPU taints: {', '.join(sorted({describe(m) for m in meant})) or 'none'})", resource.urn)
