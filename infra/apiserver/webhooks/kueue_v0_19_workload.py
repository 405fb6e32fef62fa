"""Kueue 0.19 Workload webhook, re-written from kubernetes-sigs/kueue v0.19.2 `pkg/webhooks/workload_webhook.go`
(ValidateWorkload, as ValidateCreate calls it). Kueue creates the Workloads of its job integrations itself; this
judges one that a user or the platform writes directly.

On CREATE the API server drops `status` (the Workload CRD has a status subresource) before validating webhooks see
the object, so the status rules (admission, reclaimable pods, admission checks' pod-set updates, conditions) and the
update-only rules (immutable pod sets, clusterName) never apply to a created Workload and are not written here.
Feature gates at their 0.19 defaults (`pkg/features/kube_features.go`): PartialAdmission,
ElasticJobsViaWorkloadSlices, AdmissionGatedBy, WorkloadValidateResourcesAreNonNegative,
TASValidateWorkloadSliceSize and WorkloadValidationForPodSetMetadata on; PriorityBoost off (its annotation is not
checked)."""

from __future__ import annotations

from typing import Any

from infra.apiserver import quantity
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.spec.names import domain_prefixed_path, label_value, qualified_name

FAMILY = "webhook:kueue"
ELASTIC = "kueue.x-k8s.io/elastic-job"  # pkg/constants ElasticJobAnnotation; "true" enables workload slicing
GATED_BY = "kueue.x-k8s.io/admission-gated-by"  # pkg/constants AdmissionGatedByAnnotation
MAX_GATE = 63  # pkg/util/webhook MaxGateNameLengthForAdmissionGatedBy
ANNOTATIONS_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def _labels(values: dict[str, Any], path: str) -> list[Refusal]:
    """apimachinery metav1validation.ValidateLabels: keys are qualified names, values label values."""
    return [_refuse(path, f"Invalid value: {key!r}: {problem}")
            for key, value in values.items() for problem in qualified_name(key) + label_value(str(value))]


def _annotations(values: dict[str, Any], path: str) -> list[Refusal]:
    """apimachinery apivalidation.ValidateAnnotations: keys are qualified names in any case; 256 KiB in all."""
    found = [_refuse(path, f"Invalid value: {key!r}: {problem}")
             for key in values for problem in qualified_name(key.lower())]
    if sum(len(key) + len(str(value)) for key, value in values.items()) > ANNOTATIONS_LIMIT:
        found.append(_refuse(path, f"Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"))
    return found


def _resource_list(amounts: Any, path: str) -> list[Refusal]:
    """validateResourceList: `pods` is Kueue's own key; quantities are not negative."""
    found = []
    for name, amount in (amounts or {}).items():
        if name == "pods":
            found.append(_refuse(f"{path}[{name}]", "Invalid value: \"pods\": the key is reserved for internal "
                                 "kueue use"))
        if quantity.valid(amount) and quantity.parse(amount) < 0:
            found.append(_refuse(f"{path}[{name}]", f"Invalid value: {str(amount)!r}: must be greater than or "
                                 "equal to 0"))
    return found


def _slice_size(request: Any, path: str) -> list[Refusal]:
    """validateTASSliceSize: slice topology and slice size come together; sizes are positive."""
    if not isinstance(request, dict):
        return []
    found = []
    size = request.get("podSetSliceSize")
    if "podSetSliceRequiredTopology" in request:
        if size is None:
            found.append(_refuse(f"{path}.podSetSliceSize", "Required value: must be set when "
                                 "podSetSliceRequiredTopology is specified"))
        elif int(size) <= 0:
            found.append(_refuse(f"{path}.podSetSliceSize", f"Invalid value: {size}: must be greater than 0"))
    elif size is not None:
        found.append(_refuse(f"{path}.podSetSliceSize", "Forbidden: may not be set when podSetSliceRequiredTopology "
                             "is not specified"))
    for i, layer in enumerate(request.get("podsetSliceRequiredTopologyConstraints", [])):
        if int(layer.get("size", 0)) <= 0:
            found.append(_refuse(f"{path}.podsetSliceRequiredTopologyConstraints[{i}].size",
                                 f"Invalid value: {layer.get('size', 0)}: must be greater than 0"))
    return found


def _pod_set(pod_set: dict[str, Any], path: str) -> list[Refusal]:
    """validatePodSet."""
    template = pod_set.get("template", {})
    meta, spec = template.get("metadata", {}), template.get("spec", {})
    found = _labels(meta.get("labels", {}), f"{path}.template.metadata.labels")
    found += _annotations(meta.get("annotations", {}), f"{path}.template.metadata.annotations")
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field, [])):
            where = f"{path}.template.spec.{field}[{i}].resources"
            resources = container.get("resources", {})
            found += _resource_list(resources.get("requests"), f"{where}.requests")
            found += _resource_list(resources.get("limits"), f"{where}.limits")
    if isinstance(spec.get("resources"), dict):
        found += _resource_list(spec["resources"].get("requests"), f"{path}.template.spec.resources.requests")
        found += _resource_list(spec["resources"].get("limits"), f"{path}.template.spec.resources.limits")
    return found + _slice_size(pod_set.get("topologyRequest"), f"{path}.topologyRequest")


def _gated_by(value: str) -> list[Refusal]:
    """pkg/util/webhook/validation_admissiongatedby.go: comma-separated gates, each a domain-prefixed path of at
    most 63 characters, none empty or repeated."""
    where = f"metadata.annotations[{GATED_BY}]"
    found: list[Refusal] = []
    seen: set[str] = set()
    for gate in ([part.strip() for part in value.split(",")] if value.strip() else []):
        if not gate:
            found.append(_refuse(where, f"Invalid value: {value!r}: cannot contain empty gate names"))
            continue
        if gate in seen:
            found.append(_refuse(where, f"Invalid value: {value!r}: duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        found += [_refuse(where, f"Invalid value: {gate!r}: {p}") for p in domain_prefixed_path(gate)]
        if len(gate) > MAX_GATE:
            found.append(_refuse(where, f"Too long: may not be more than {MAX_GATE} bytes"))
    return found


def workload(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """ValidateWorkload on CREATE (status dropped; see the module docstring)."""
    pod_sets = obj.get("spec", {}).get("podSets", [])
    found = [r for i, pod_set in enumerate(pod_sets) for r in _pod_set(pod_set, f"spec.podSets[{i}]")]
    variable = sum(pod_set.get("minCount") is not None for pod_set in pod_sets)
    if variable > 1:
        found.append(_refuse("spec.podSets", f"Invalid value: {variable}: at most one podSet can use minCount"))
    meta_annotations = obj.get("metadata", {}).get("annotations", {})
    if variable and meta_annotations.get(ELASTIC) == "true":
        found.append(_refuse("spec.podSets", f"Invalid value: {variable}: partial admission and elastic job cannot "
                             "be used together"))
    return found + _gated_by(str(meta_annotations.get(GATED_BY, "")))
