"""Kueue 0.19 Workload webhook, re-written from kubernetes-sigs/kueue v0.19.2 `pkg/webhooks/workload_webhook.go`
(ValidateWorkload, as ValidateCreate calls it). Kueue creates the Workloads of its job integrations itself; this
judges one that a user or the platform writes directly.

On CREATE the API server drops `status` (the Workload CRD has a status subresource) before validating webhooks see
the object, so the status rules (admission, reclaimable pods, admission checks' pod-set updates, conditions) and the
update-only rules (immutable pod sets, clusterName) never apply to a created Workload and are not written here.
ElasticJobsViaWorkloadSlices and AdmissionGatedBy are the cluster's (infra.apiserver.kueue_config); the other gates
at their 0.19 defaults (`pkg/features/kube_features.go`): PartialAdmission, WorkloadValidateResourcesAreNonNegative,
TASValidateWorkloadSliceSize and WorkloadValidationForPodSetMetadata on; PriorityBoost off (its annotation is not
checked)."""

from __future__ import annotations

from typing import Any

from infra.apiserver import quantity
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.apiserver.webhooks.kueue_v0_19 import labels
from infra.apiserver.webhooks.kueue_v0_19_jobs import elastic, gated_by
from infra.spec.names import qualified_name

FAMILY = "webhook:kueue"
ANNOTATIONS_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


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
    found = labels(meta.get("labels", {}), f"{path}.template.metadata.labels")
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


def workload(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """ValidateWorkload on CREATE (status dropped; see the module docstring)."""
    pod_sets = obj.get("spec", {}).get("podSets", [])
    found = [r for i, pod_set in enumerate(pod_sets) for r in _pod_set(pod_set, f"spec.podSets[{i}]")]
    variable = sum(pod_set.get("minCount") is not None for pod_set in pod_sets)
    if variable > 1:
        found.append(_refuse("spec.podSets", f"Invalid value: {variable}: at most one podSet can use minCount"))
    if variable and elastic(obj, cluster):
        found.append(_refuse("spec.podSets", f"Invalid value: {variable}: partial admission and elastic job cannot "
                             "be used together"))
    if cluster.kueue.gate("AdmissionGatedBy"):
        found += gated_by(obj.get("metadata", {}).get("annotations", {}))
    return found
