"""Kueue 0.19 validating webhooks, beyond what its CRDs say, re-written from the upstream source at v0.19.2
(kubernetes-sigs/kueue). Kueue 0.19.2 has webhooks for ClusterQueue, Cohort, ResourceFlavor and Workload
(`pkg/webhooks/`) and for the job integrations (`pkg/controller/jobs/*/…_webhook.go`); LocalQueue,
WorkloadPriorityClass and Topology have none: their CRD schema and CEL rules are all the server checks.
Feature-gated rules are written for the 0.19 defaults (TopologyAwareScheduling on, ConcurrentAdmission off). The
job webhooks' label and annotation rules are in `kueue_v0_19_jobs`, their topology rules in `kueue_v0_19_tas`."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from infra.apiserver import quantity
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.spec.names import label_value, qualified_name

FAMILY = "webhook:kueue"


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def label_name(value: str, path: str) -> list[Refusal]:
    """apimachinery metav1validation.ValidateLabelName (and content.IsLabelKey): one refusal per problem."""
    return [_refuse(path, f"Invalid value: {value!r}: {problem}") for problem in qualified_name(value)]


def labels(values: dict[str, Any], path: str) -> list[Refusal]:
    """apimachinery metav1validation.ValidateLabels: each key a label name, each value a label value (the refusal
    names the value)."""
    return [r for key, value in values.items()
            for r in label_name(str(key), path) + [_refuse(path, f"Invalid value: {str(value)!r}: {problem}")
                                                   for problem in label_value(str(value))]]


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
            yield from label_name(str(name), path)
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
                    # validateFlavorQuotas checks a borrowing limit's cohort before its sign, a lending limit's after
                    unparented = [] if has_parent else [
                        _refuse(f"{where}.{key}", f"must be nil when {parent} is empty")]
                    if key == "borrowingLimit":
                        yield from unparented
                    if amount is not None and amount < 0:
                        yield _refuse(f"{where}.{key}", "must be greater than or equal to 0")
                    if key == "lendingLimit":
                        yield from unparented
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
    """apimachinery ValidateLabelSelector (ValidateLabelSelectorRequirement for each expression): keys are label
    keys; In/NotIn need values, Exists/DoesNotExist none, any other operator is refused; values are label values."""
    if not isinstance(selector, dict):
        return
    yield from labels(selector.get("matchLabels", {}), f"{path}.matchLabels")
    for i, expression in enumerate(selector.get("matchExpressions", [])):
        where = f"{path}.matchExpressions[{i}]"
        operator, values = expression.get("operator"), expression.get("values", [])
        if operator in ("In", "NotIn"):
            if not values:
                yield _refuse(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                yield _refuse(f"{where}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        else:
            yield _refuse(f"{where}.operator", f"Invalid value: {operator!r}: not a valid selector operator")
        yield from label_name(str(expression.get("key", "")), f"{where}.key")
        for j, value in enumerate(values):
            for problem in label_value(str(value)):
                yield _refuse(f"{where}.values[{j}]", f"Invalid value: {value!r}: {problem}")


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
    found = labels(spec.get("nodeLabels", {}), "spec.nodeLabels")
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(spec.get("nodeTaints", [])):
        found += label_name(str(taint.get("key", "")), f"spec.nodeTaints[{i}].key")
        value = str(taint.get("value", ""))
        if problems := label_value(value):  # one refusal, its problems joined by ';'
            found.append(_refuse(f"spec.nodeTaints[{i}].value", f"Invalid value: {value!r}: {';'.join(problems)}"))
        pair = (str(taint.get("key")), str(taint.get("effect")))
        if pair in seen:
            found.append(_refuse(f"spec.nodeTaints[{i}]", "taints must be unique by key and effect pair"))
        seen.add(pair)
    for i, toleration in enumerate(spec.get("tolerations", [])):
        if toleration.get("key"):
            found += label_name(str(toleration["key"]), f"spec.tolerations[{i}].key")
    return found
