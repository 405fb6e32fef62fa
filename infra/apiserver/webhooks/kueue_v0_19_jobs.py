"""Kueue 0.19 job-framework rules on CREATE, re-written from kubernetes-sigs/kueue v0.19.2: the labels and
annotations every integrated job is checked for (`pkg/controller/jobframework/validation.go` ValidateJobOnCreate,
called by the Job, JobSet and TrainJob webhooks' validateCreate) and the batch Job's own annotations
(`pkg/controller/jobs/job/job_webhook.go` validateCreate). Feature gates are the cluster's (infra.apiserver.
kueue_config: the 0.19 defaults unless the stack sets them). Messages are apimachinery field errors:
`<path>: Invalid value: <value>: <detail>` and `<path>: Forbidden: <detail>`."""

from __future__ import annotations

import json
import re
from typing import Any

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.spec.names import dns1123_subdomain, domain_prefixed_path

FAMILY = "webhook:kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants QueueLabel
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"  # PrebuiltWorkloadLabel and PrebuiltWorkloadAnnotation alike
MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"  # MaxExecTimeSecondsLabel
ELASTIC = "kueue.x-k8s.io/elastic-job"  # pkg/constants ElasticJobAnnotation ("true" enables workload slicing)
GATED_BY = "kueue.x-k8s.io/admission-gated-by"  # pkg/constants AdmissionGatedByAnnotation
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"  # pkg/controller/jobs/job JobMinParallelismAnnotation
COMPLETIONS_EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"  # JobCompletionsEqualParallelismAnnotation
LABEL_VALUE_MAX = 63  # validation.LabelValueMaxLength
GATE_NAME_MAX = 63  # pkg/util/webhook MaxGateNameLengthForAdmissionGatedBy
# validation.go supportedElasticJobGVKs and supportedPrebuiltWlJobGVKs, as GroupVersionKind.String() writes them
RAY = ("ray.io/v1, Kind=RayCluster", "ray.io/v1, Kind=RayJob", "ray.io/v1, Kind=RayService")
ELASTIC_KINDS = frozenset({"batch/v1, Kind=Job", *RAY})
PREBUILT_KINDS = frozenset({"batch/v1, Kind=Job", "jobset.x-k8s.io/v1alpha2, Kind=JobSet",
                            "trainer.kubeflow.org/v1alpha1, Kind=TrainJob", "/v1, Kind=Pod",
                            "kubeflow.org/v2beta1, Kind=MPIJob", *RAY,
                            "workload.codeflare.dev/v1beta2, Kind=AppWrapper",
                            *(f"kubeflow.org/v1, Kind={k}" for k in ("TFJob", "PaddleJob", "PyTorchJob",
                                                                     "XGBoostJob"))})
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
GO_TRUE, GO_FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")


def _invalid(path: str, value: Any, detail: str) -> Refusal:
    return Refusal(FAMILY, path, f"Invalid value: {json.dumps(value)}: {detail}")


def _forbidden(path: str, detail: str) -> Refusal:
    return Refusal(FAMILY, path, f"Forbidden: {detail}", "Forbidden")


def gvk(obj: dict[str, Any]) -> str:
    """schema.GroupVersionKind.String(): `group/version, Kind=kind` (`/v1, ...` for the core group)."""
    api_version = str(obj.get("apiVersion", ""))
    return f"{api_version if '/' in api_version else '/' + api_version}, Kind={obj.get('kind', '')}"


def atoi(value: str) -> tuple[int | None, str]:
    """strconv.Atoi: the number, or Go's error text."""
    if not _GO_INT.match(value):
        return None, f'strconv.Atoi: parsing {json.dumps(value)}: invalid syntax'
    if not -(2**63) <= int(value) < 2**63:
        return None, f'strconv.Atoi: parsing {json.dumps(value)}: value out of range'
    return int(value), ""


def _crd_name(path: str, value: str) -> list[Refusal]:
    """ValidateLabelAsCRDName / ValidateAnnotationAsCRDName: a DNS-1123 subdomain, problems joined by ','."""
    problems = dns1123_subdomain(value)
    return [_invalid(path, value, ",".join(problems))] if problems else []


def _prebuilt(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """validation.go validateCreateForPrebuiltWorkload: ValidatePrebuiltWorkloadName, then the kinds that may
    name a prebuilt workload (PrebuiltWorkloadNameFor, GetPrebuiltWorkloadPath)."""
    meta = obj.get("metadata", {})
    labels, annotations = meta.get("labels", {}), meta.get("annotations", {})
    gate = cluster.kueue.gate("WorkloadIdentifierAnnotations")
    annotation = str(annotations.get(PREBUILT, ""))
    from_annotation = bool(annotation) and (gate or len(annotation) > LABEL_VALUE_MAX)
    path = f"metadata.{'annotations' if from_annotation else 'labels'}[{PREBUILT}]"
    found = _crd_name(path, annotation) if from_annotation else (
        _crd_name(path, labels[PREBUILT]) if PREBUILT in labels else [])
    name = (annotation or labels.get(PREBUILT, "")) if gate else (
        labels.get(PREBUILT) or (annotation if len(annotation) > LABEL_VALUE_MAX else ""))
    if name and gvk(obj) not in PREBUILT_KINDS:
        found.append(_forbidden(path, f"Is not supported for {json.dumps(gvk(obj))}"))
    return found


def _max_exec_time(labels: dict[str, str]) -> list[Refusal]:
    """validation.go validateCreateForMaxExecTime: a whole number of seconds above 0."""
    if MAX_EXEC_TIME not in labels:
        return []
    path = f"metadata.labels[{MAX_EXEC_TIME}]"
    seconds, error = atoi(labels[MAX_EXEC_TIME])
    if seconds is None:
        return [_invalid(path, labels[MAX_EXEC_TIME], error)]
    return [_invalid(path, seconds, "should be greater than 0")] if seconds <= 0 else []


def elastic(obj: dict[str, Any], cluster: ClusterState) -> bool:
    """pkg/workloadslicing Enabled: the gate on and the annotation exactly "true"."""
    return bool(cluster.kueue.gate("ElasticJobsViaWorkloadSlices")
                and obj.get("metadata", {}).get("annotations", {}).get(ELASTIC) == "true")


def gated_by(annotations: dict[str, str]) -> list[Refusal]:
    """pkg/util/webhook/validation_admissiongatedby.go validateAdmissionGatedByAnnotationFormat: comma-separated
    gate names (csv.Parse trims each), none empty or twice, each a domain-prefixed path of at most 63 bytes."""
    value = annotations.get(GATED_BY, "")
    if not value.strip():
        return []
    path = f"metadata.annotations[{GATED_BY}]"
    found, seen = [], set()
    for gate in (part.strip() for part in value.split(",")):
        if not gate:
            found.append(_invalid(path, value, "cannot contain empty gate names"))
            continue
        if gate in seen:
            found.append(_invalid(path, value, f"duplicate gate name: {gate}"))
            continue
        seen.add(gate)
        found += [_invalid(path, gate, problem) for problem in domain_prefixed_path(gate)]
        if len(gate) > GATE_NAME_MAX:
            found.append(Refusal(FAMILY, path, f"Too long: may not be more than {GATE_NAME_MAX} bytes", "TooLong"))
    return found


def job_on_create(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """validation.go ValidateJobOnCreate: the queue name and prebuilt workload name are DNS subdomains, the
    prebuilt workload only on kinds that support it, the maximum execution time, the elastic-job annotation only
    on kinds that support it (ValidateElasticJobAnnotation) and, with AdmissionGatedBy on, the admission gates."""
    meta = obj.get("metadata", {})
    labels, annotations = meta.get("labels", {}), meta.get("annotations", {})
    found = _crd_name(f"metadata.labels[{QUEUE_LABEL}]", labels[QUEUE_LABEL]) if QUEUE_LABEL in labels else []
    found += _prebuilt(obj, cluster) + _max_exec_time(labels)
    if elastic(obj, cluster) and gvk(obj) not in ELASTIC_KINDS:
        found.append(_forbidden(f"metadata.annotations[{ELASTIC}]",
                                f"elastic job is not supported for {json.dumps(gvk(obj))}"))
    if cluster.kueue.gate("AdmissionGatedBy"):
        found += gated_by(annotations)
    return found


def _go_bool(value: str) -> tuple[bool | None, str]:
    if value in GO_TRUE or value in GO_FALSE:
        return value in GO_TRUE, ""
    return None, f"strconv.ParseBool: parsing {json.dumps(value)}: invalid syntax"


def job_annotations(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """job_webhook.go validatePartialAdmissionCreate (a minimum parallelism between 1 and the pod count less one,
    not with an elastic job) and validateSyncCompletionCreate (completions kept equal to parallelism only for an
    Indexed job whose completions equal its parallelism)."""
    annotations = obj.get("metadata", {}).get("annotations", {})
    spec = obj.get("spec", {})
    parallelism = int(spec.get("parallelism", 1))
    pods = min(parallelism, int(spec["completions"])) if "completions" in spec else parallelism  # podsCount
    found = []
    if MIN_PARALLELISM in annotations:
        path, text = f"metadata.annotations[{MIN_PARALLELISM}]", annotations[MIN_PARALLELISM]
        minimum, error = atoi(text)
        if minimum is None:
            found.append(_invalid(path, text, error))
        elif minimum >= pods or minimum <= 0:
            found.append(_invalid(path, minimum, f"should be between 0 and {pods - 1}"))
        if elastic(obj, cluster):
            found.append(_invalid(path, text, "partial admission and elastic job cannot be used together"))
    if COMPLETIONS_EQUAL in annotations:
        path, text = f"metadata.annotations[{COMPLETIONS_EQUAL}]", annotations[COMPLETIONS_EQUAL]
        enabled, error = _go_bool(text)
        if enabled is None:
            found.append(_invalid(path, text, error))
        if enabled:
            if spec.get("completionMode", "NonIndexed") == "NonIndexed":
                found.append(_invalid(path, text, "should not be enabled for NonIndexed jobs"))
            if parallelism != int(spec.get("completions", 1)):
                found.append(_invalid("spec.completions", spec.get("completions"), "should be equal to parallelism "
                                      f"when {COMPLETIONS_EQUAL} annotation is true"))
    return found
