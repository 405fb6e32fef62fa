"""Kueue 0.19 validating webhooks, beyond what its CRDs say, re-written from the upstream source at v0.19.2
(kubernetes-sigs/kueue). Kueue 0.19.2 has webhooks for ClusterQueue, Cohort, ResourceFlavor and Workload
(`pkg/webhooks/`) and for the job integrations (`pkg/controller/jobs/*/…_webhook.go`); LocalQueue,
WorkloadPriorityClass and Topology have none: their CRD schema and CEL rules are all the server checks.
Feature-gated rules are written for the 0.19 defaults (TopologyAwareScheduling on, ConcurrentAdmission off)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from .. import quantity
from ..names import dns1123_subdomain, label_value, qualified_name
from ..state import ClusterState
from ..verdict import Refusal
from .podsets import jobset_pod_sets, trainjob_pod_sets

FAMILY = "webhook:kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def _quantity(value: Any) -> Decimal | None:
    try:
        return quantity.parse(value)
    except ValueError:
        return None  # the CRD schema's quantity pattern reports it


# pkg/webhooks/common.go validateResourceName: covered resources are label keys
# pkg/webhooks/clusterqueue_webhook.go validateResourceGroups / validateFlavorQuotas / validateLimit /
# validateLendingLimit / validateResourceQuantity
def _resource_groups(groups: list[dict[str, Any]], has_parent: bool, is_cohort: bool) -> Iterator[Refusal]:
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    parent = "parent" if is_cohort else "cohort"
    for i, group in enumerate(groups):
        covered = list(group.get("coveredResources", []))
        for j, name in enumerate(covered):
            path = f"spec.resourceGroups[{i}].coveredResources[{j}]"
            for problem in qualified_name(str(name)):
                yield _refuse(path, f"Invalid value: {name!r}: {problem}")
            if name in seen_resources:
                yield _refuse(path, f"Duplicate value: {name!r}")
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors", [])):
            path = f"spec.resourceGroups[{i}].flavors[{j}]"
            for k, quota in enumerate(flavor.get("resources", [])[:len(covered)]):
                where = f"{path}.resources[{k}]"
                if quota.get("name") != covered[k]:
                    yield _refuse(f"{where}.name", "must match the name in coveredResources")
                nominal = _quantity(quota.get("nominalQuota", 0))
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if key not in quota:
                        continue
                    amount = _quantity(quota[key])
                    if amount is not None and amount < 0:
                        yield _refuse(f"{where}.{key}", "must be greater than or equal to 0")
                    if key != "nominalQuota" and not has_parent:
                        yield _refuse(f"{where}.{key}", f"must be nil when {parent} is empty")
                    if (key == "lendingLimit" and not is_cohort and amount is not None and nominal is not None
                            and amount > nominal):
                        yield _refuse(f"{where}.{key}", "must be less than or equal to the nominalQuota")
            if flavor.get("name") in seen_flavors:
                yield _refuse(f"{path}.name", f"Duplicate value: {flavor.get('name')!r}")
            seen_flavors.add(flavor.get("name"))


# pkg/webhooks/common.go validateFairSharing
def _fair_sharing(spec: dict[str, Any]) -> Iterator[Refusal]:
    weight = spec.get("fairSharing", {}).get("weight")
    amount = _quantity(weight) if weight is not None else None
    if amount is None:
        return
    if amount < 0:
        yield _refuse("spec.fairSharing", "must be greater than or equal to 0")
    elif 0 < amount <= Decimal("1e-9"):
        yield _refuse("spec.fairSharing", "When not 0, weight must be > 10e-9")


def _selector(selector: Any, path: str) -> Iterator[Refusal]:
    """apimachinery ValidateLabelSelector: keys are label keys; In/NotIn need values, Exists/DoesNotExist none."""
    if not isinstance(selector, dict):
        return
    for key, value in selector.get("matchLabels", {}).items():
        for problem in qualified_name(key) + label_value(str(value)):
            yield _refuse(f"{path}.matchLabels", f"Invalid value: {key!r}: {problem}")
    for i, expression in enumerate(selector.get("matchExpressions", [])):
        operator, values = expression.get("operator"), expression.get("values", [])
        if operator in ("In", "NotIn") and not values:
            yield _refuse(f"{path}.matchExpressions[{i}].values",
                          "must be specified when `operator` is 'In' or 'NotIn'")
        if operator in ("Exists", "DoesNotExist") and values:
            yield _refuse(f"{path}.matchExpressions[{i}].values",
                          "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")


def cluster_queue(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """pkg/webhooks/clusterqueue_webhook.go ValidateClusterQueue."""
    spec = obj.get("spec", {})
    groups = spec.get("resourceGroups", [])
    found = list(_resource_groups(groups, bool(spec.get("cohortName")), is_cohort=False))
    found += _selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    preemption = spec.get("preemption", {})
    if (preemption.get("reclaimWithinCohort", "Never") == "Never"
            and preemption.get("borrowWithinCohort", {}).get("policy", "Never") != "Never"):
        found.append(_refuse("spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"))
    fungibility = spec.get("flavorFungibility", {})
    if "preference" in fungibility and (fungibility.get("whenCanBorrow", "MayStopSearch") != "TryNextFlavor"
                                        or fungibility.get("whenCanPreempt", "TryNextFlavor") != "TryNextFlavor"):
        found.append(_refuse("spec.flavorFungibility.preference", f"preference {fungibility['preference']!r} "
                             "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"))
    found += _fair_sharing(spec)
    flavors = sum(len(g.get("flavors", [])) for g in groups)
    if flavors > 256:
        found.append(_refuse("spec.resourceGroups", f"total number of flavors across all resourceGroups must be "
                             f"≤ 256, got {flavors}"))
    covered = sum(len(g.get("coveredResources", [])) for g in groups)
    if covered > 256:
        found.append(_refuse("spec.resourceGroups", f"total number of covered resources across all resourceGroups "
                             f"must be ≤ 256, got {covered}"))
    for i, group in enumerate(groups):
        combinations = sum(len(f.get("resources", [])) for f in group.get("flavors", []))
        if combinations > 512:
            found.append(_refuse(f"spec.resourceGroups[{i}]", "number of flavor-resource combinations in a "
                                 f"resourceGroup must be ≤ 512, got {combinations}"))
    names = {f.get("name") for g in groups for f in g.get("flavors", [])}
    for i, check in enumerate(spec.get("admissionChecksStrategy", {}).get("admissionChecks", [])):
        for j, flavor in enumerate(check.get("onFlavors", [])):
            if flavor not in names:
                found.append(_refuse(f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]",
                                     f"Unsupported value: {flavor!r}: supported values: {sorted(names)}"))
    return found


def cohort(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """pkg/webhooks/cohort_webhook.go validateCohort: lending may exceed nominal in a Cohort."""
    spec = obj.get("spec", {})
    return [*_fair_sharing(spec),
            *_resource_groups(spec.get("resourceGroups", []), bool(spec.get("parentName")), is_cohort=True)]


def resource_flavor(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """pkg/webhooks/resourceflavor_webhook.go ValidateResourceFlavor: node labels, taints unique by
    (key, effect), tolerations."""
    spec = obj.get("spec", {})
    found = [_refuse("spec.nodeLabels", f"Invalid value: {key!r}: {problem}")
             for key, value in spec.get("nodeLabels", {}).items()
             for problem in qualified_name(key) + label_value(str(value))]
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(spec.get("nodeTaints", [])):
        found += [_refuse(f"spec.nodeTaints[{i}].key", p) for p in qualified_name(str(taint.get("key", "")))]
        found += [_refuse(f"spec.nodeTaints[{i}].value", p) for p in label_value(str(taint.get("value", "")))]
        pair = (str(taint.get("key")), str(taint.get("effect")))
        if pair in seen:
            found.append(_refuse(f"spec.nodeTaints[{i}]", "taints must be unique by key and effect pair"))
        seen.add(pair)
    for i, toleration in enumerate(spec.get("tolerations", [])):
        if toleration.get("key"):
            found += [_refuse(f"spec.tolerations[{i}].key", p) for p in qualified_name(str(toleration["key"]))]
    return found


# pkg/controller/jobframework/validation.go ValidateQueueName: the queue-name label names a LocalQueue
def queue_name(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    value = obj.get("metadata", {}).get("labels", {}).get(QUEUE_LABEL)
    if value is None:
        return []
    return [_refuse(f"metadata.labels[{QUEUE_LABEL}]", f"Invalid value: {value!r}: {p}")
            for p in dns1123_subdomain(str(value))]


def pod_set_request(path: str, annotations: dict[str, str]) -> list[Refusal]:
    """pkg/controller/jobframework/tas_validation.go ValidateTASPodSetRequest (topology annotations of one
    pod template)."""
    found = []
    where = f"{path}.annotations"
    if sum(key in annotations for key in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        found.append(_refuse(where, f"must not contain more than one topology annotation: "
                             f"[{REQUIRED!r}, {PREFERRED!r}, {UNCONSTRAINED!r}]"))
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in annotations:
            found += [_refuse(f"{where}[{key}]", p) for p in qualified_name(annotations[key])]
    if GROUP_NAME in annotations:
        if annotations[GROUP_NAME].isdigit():
            found.append(_refuse(f"{where}[{GROUP_NAME}]", "must not be a number"))
        if SLICE_SIZE in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when '{SLICE_SIZE}' is specified"))
        if SLICE_REQUIRED in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when '{SLICE_REQUIRED}' is specified"))
        if PREFERRED not in annotations and REQUIRED not in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when neither '{PREFERRED}' nor "
                                 f"'{REQUIRED}' is specified"))
    if UNCONSTRAINED in annotations and annotations[UNCONSTRAINED].lower() not in (
            "1", "t", "true", "0", "f", "false"):
        found.append(_refuse(f"{where}[{UNCONSTRAINED}]", "must be a boolean value"))
    if SLICE_REQUIRED in annotations and SLICE_SIZE not in annotations:
        found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"must be set when '{SLICE_REQUIRED}' is specified"))
    if SLICE_SIZE in annotations and SLICE_REQUIRED not in annotations:
        found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"may not be set when '{SLICE_REQUIRED}' is not specified"))
    return found


def pod_set_groups(pod_sets: list[tuple[str, int, dict[str, str]]]) -> list[Refusal]:
    """tas_validation.go ValidatePodSetGroupingTopology: a group is exactly two pod sets, one of them with a
    single pod, both asking the same topology level the same way. `pod_sets`: (path, count, annotations)."""
    groups: dict[str, list[tuple[str, int, dict[str, str]]]] = {}
    for pod_set in pod_sets:
        if GROUP_NAME in pod_set[2]:
            groups.setdefault(pod_set[2][GROUP_NAME], []).append(pod_set)
    found = []
    for name, members in groups.items():
        if len(members) != 2:
            found += [_refuse(f"{path}.annotations[{GROUP_NAME}]", f"can only define groups of exactly 2 pod sets, "
                              f"got: {len(members)} pod set(s)") for path, _, _ in members]
            continue
        (path1, count1, a1), (path2, count2, a2) = members
        if count1 != 1 and count2 != 1:
            found += [_refuse(f"{path}.annotations[{GROUP_NAME}]", "can only define groups where at least one pod "
                              f"set has only 1 replica, got: {count1} replica(s) and {count2} replica(s) in the group")
                      for path in (path1, path2)]
        requests = [(a.get(REQUIRED), a.get(PREFERRED)) for a in (a1, a2)]
        if any(r == (None, None) for r in requests) or requests[0] != requests[1]:
            found += [_refuse(f"{path}.annotations", f"must specify '{REQUIRED}' or '{PREFERRED}' topology "
                              f"consistent with '{other}.annotations' in group '{name}'")
                      for path, other in ((path1, path2), (path2, path1))]
    return found


def jobset_topology(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """pkg/controller/jobs/jobset/jobset_webhook.go validateTopologyRequest (TopologyAwareScheduling is on by
    default in 0.19): each replicated job's pod template, then the pod-set groups."""
    pod_sets = jobset_pod_sets(obj.get("spec", {}))
    found = [r for p in pod_sets for r in pod_set_request(p.path, p.annotations)]
    return found + pod_set_groups([(p.path, p.count, p.annotations) for p in pod_sets])


def trainjob_topology(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """pkg/controller/jobs/trainjob/trainjob_webhook.go validateTopologyRequest: the pod sets the TrainJob gets
    from its runtime (runtime patches are not applied here). A missing runtime is the Trainer webhook's refusal."""
    spec = obj.get("spec", {})
    ref = spec.get("runtimeRef", {})
    runtime = cluster.runtime(str(ref.get("kind", "ClusterTrainingRuntime")), str(ref.get("name", "")),
                              str(obj.get("metadata", {}).get("namespace", "")))
    if runtime is None:
        return []
    pod_sets = trainjob_pod_sets(obj, runtime)
    hint = ('. Adjust either the "TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" annotations for '
            "the corresponding Job")
    found = [r for p in pod_sets for r in pod_set_request(f"job[{p.name}]", p.annotations)]
    found += pod_set_groups([(f"job[{p.name}]", p.count, p.annotations) for p in pod_sets])
    return [Refusal(r.family, r.field, r.message + hint, r.reason) for r in found]
