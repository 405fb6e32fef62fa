"""Kueue 0.19 topology-aware-scheduling rules of the job webhooks, re-written from kubernetes-sigs/kueue v0.19.2
`pkg/controller/jobframework/tas_validation.go` (the pod template's topology annotations and the slice size against
the pod set's count) as `pkg/controller/jobs/{jobset,trainjob}/*_webhook.go` validateTopologyRequest call it, with
the pod sets built as `pkg/controller/jobframework/tas.go` builds their topology requests, and as
`pkg/controller/jobs/job/job_webhook.go` calls it for a batch Job. Feature gates are the cluster's
(infra.apiserver.kueue_config; at 0.19 TopologyAwareScheduling, TASMultiLayerTopology and
ElasticJobsViaWorkloadSlices are on)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.apiserver.webhooks.kueue_v0_19_jobs import elastic
from infra.apiserver.webhooks.podsets import PodSet, jobset_pod_sets, trainjob_pod_sets
from infra.spec.names import qualified_name

FAMILY = "webhook:kueue"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
GO_BOOLS = frozenset({"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"})
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
INT32 = (-(2**31), 2**31 - 1)
MULTI_LAYER = "TASMultiLayerTopology"  # the gate of the slice-constraints annotation


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def _invalid(value: Any) -> str:
    """apimachinery field.Invalid's rendering of the value: strings quoted, numbers bare."""
    return f"Invalid value: {json.dumps(value)}: "


def _int32(value: str) -> int | None:
    """strconv.ParseInt(value, 10, 32); None where Go returns an error."""
    if not _GO_INT.match(value) or not INT32[0] <= int(value) <= INT32[1]:
        return None
    return int(value)


@dataclass(frozen=True)
class _Object:
    """A JSON object's (key, value) pairs in document order, a repeated key kept: encoding/json sets a field from
    each in turn."""
    pairs: list[tuple[str, Any]]


def _layer(layer: Any) -> dict[str, Any] | None:
    """One layer as encoding/json reads it into PodsetSliceRequiredTopologyConstraint (topology string, size int32):
    keys matched without regard to case (the last wins), other keys and null values ignored (a null layer is all
    zero values); None when a value does not fit its Go type."""
    if layer is None:
        return {}
    if not isinstance(layer, _Object):
        return None
    fields: dict[str, Any] = {}
    for key, value in layer.pairs:
        name = key.lower()
        if value is None or name not in ("topology", "size"):
            continue
        fits = isinstance(value, str) if name == "topology" else (
            type(value) is int and INT32[0] <= value <= INT32[1])  # bool is no JSON number; 2.0 is no int32
        if not fits:
            return None
        fields[name] = value
    return fields


def _constraints(value: str) -> list[dict[str, Any]] | str:
    """The slice-constraint layers as encoding/json reads them into []PodsetSliceRequiredTopologyConstraint, each
    with the fields it sets, or why it cannot (the Go decoder's wording is not reproduced)."""
    try:
        layers = json.loads(value, object_pairs_hook=_Object)
    except json.JSONDecodeError as error:
        return str(error)
    if layers is None:
        return []
    decoded = [_layer(layer) for layer in layers] if isinstance(layers, list) else [None]
    read = [layer for layer in decoded if layer is not None]
    return read if len(read) == len(decoded) else "cannot unmarshal into a list of {topology, size} objects"


def _slice_constraints(where: str, annotations: dict[str, str], multi_layer: bool) -> list[Refusal]:
    """validateSliceRequiredTopologyConstraintsAnnotation: refused alone while its gate is off; else exclusive with
    the two-level slice annotations and the pod-set group, 1 to 3 layers, each a label name with a size of at least
    1, no level twice, and each layer's size a multiple of the next one's."""
    if CONSTRAINTS not in annotations:
        return []
    path = f"{where}[{CONSTRAINTS}]"
    if not multi_layer:
        return [_refuse(path, f"the {MULTI_LAYER} feature gate must be enabled to use this annotation")]
    found = [_refuse(path, f"may not be set when '{key}' is specified")
             for key in (SLICE_REQUIRED, SLICE_SIZE) if key in annotations]
    if GROUP_NAME in annotations:
        found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when '{CONSTRAINTS}' is specified"))
    layers = _constraints(annotations[CONSTRAINTS])
    if isinstance(layers, str):
        return [*found, _refuse(path, f"{_invalid(annotations[CONSTRAINTS])}must be a valid JSON array: {layers}")]
    if not 1 <= len(layers) <= 3:
        return [*found, _refuse(path, f"{_invalid(annotations[CONSTRAINTS])}topology constraints must contain "
                                      "between 1 and 3 entries")]
    for i, layer in enumerate(layers):
        topology, size = str(layer.get("topology", "")), int(layer.get("size", 0))
        found += [_refuse(f"{path}[{i}].topology", f"{_invalid(topology)}{p}") for p in qualified_name(topology)]
        if size < 1:
            found.append(_refuse(f"{path}[{i}].size", f"{_invalid(size)}must be greater than or equal to 1"))
    seen: dict[str, int] = {}  # upstream checks uniqueness in a second pass, after every layer's own rules
    for i, layer in enumerate(layers):
        topology = str(layer.get("topology", ""))
        if topology in seen:
            found.append(_refuse(f"{path}[{i}].topology", f"Duplicate value: \"{topology} (also at index "
                                 f"{seen[topology]})\""))
        seen.setdefault(topology, i)
    for i in range(len(layers) - 1):
        parent, child = int(layers[i].get("size", 0)), int(layers[i + 1].get("size", 0))
        if child > 0 and parent % child:
            found.append(_refuse(f"{path}[{i + 1}].size", f"{_invalid(child)}must evenly divide the parent layer "
                                 f"size {parent}"))
    return found


def pod_set_request(path: str, annotations: dict[str, str], multi_layer: bool) -> list[Refusal]:
    """ValidateTASPodSetRequest (the topology annotations of one pod template); `multi_layer`: the
    TASMultiLayerTopology gate."""
    found = []
    where = f"{path}.annotations"
    if sum(key in annotations for key in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        found.append(_refuse(where, f"must not contain more than one topology annotation: "
                             f"[{REQUIRED!r}, {PREFERRED!r}, {UNCONSTRAINED!r}]"))
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in annotations:
            found += [_refuse(f"{where}[{key}]", f"{_invalid(annotations[key])}{p}")
                      for p in qualified_name(annotations[key])]
    if GROUP_NAME in annotations:
        if re.fullmatch("[0-9]+", annotations[GROUP_NAME]) and int(annotations[GROUP_NAME]) < 2**64:  # ParseUint
            found.append(_refuse(f"{where}[{GROUP_NAME}]", "must not be a number"))
        if SLICE_SIZE in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when '{SLICE_SIZE}' is specified"))
        if SLICE_REQUIRED in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when '{SLICE_REQUIRED}' is specified"))
        if PREFERRED not in annotations and REQUIRED not in annotations:
            found.append(_refuse(f"{where}[{GROUP_NAME}]", f"may not be set when neither '{PREFERRED}' nor "
                                 f"'{REQUIRED}' is specified"))
    if UNCONSTRAINED in annotations and annotations[UNCONSTRAINED] not in GO_BOOLS:
        found.append(_refuse(f"{where}[{UNCONSTRAINED}]", "must be a boolean value"))
    if SLICE_SIZE in annotations:  # validateSliceSizeAnnotation
        size = _int32(annotations[SLICE_SIZE])
        if size is None:
            found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"{_invalid(annotations[SLICE_SIZE])}must be a numeric "
                                 "value"))
        elif size < 1:
            found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"{_invalid(annotations[SLICE_SIZE])}must be greater "
                                 "than or equal to 1"))
    if SLICE_REQUIRED in annotations and SLICE_SIZE not in annotations:
        found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"must be set when '{SLICE_REQUIRED}' is specified"))
    if SLICE_SIZE in annotations and SLICE_REQUIRED not in annotations:
        found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"may not be set when '{SLICE_REQUIRED}' is not specified"))
    return found + _slice_constraints(where, annotations, multi_layer)


def slice_upper_bound(path: str, annotations: dict[str, str], count: int) -> list[Refusal]:
    """ValidateSliceSizeAnnotationUpperBound: a slice (or the first, widest constraint layer) holds at most the
    pod set's pods."""
    where = f"{path}.annotations"
    found = []
    if SLICE_SIZE in annotations:
        size = _int32(annotations[SLICE_SIZE])
        if size is None:
            return [_refuse(f"{where}[{SLICE_SIZE}]", f"{_invalid(annotations[SLICE_SIZE])}must be a numeric value")]
        if size > count:
            found.append(_refuse(f"{where}[{SLICE_SIZE}]", f"{_invalid(annotations[SLICE_SIZE])}must not be greater "
                                 f"than pod set count {count}"))
    layers = _constraints(annotations.get(CONSTRAINTS, "null"))
    if not isinstance(layers, str) and layers and int(layers[0].get("size", 0)) > count:
        found.append(_refuse(f"{where}[{CONSTRAINTS}]", f"{_invalid(int(layers[0].get('size', 0)))}must not be "
                             f"greater than pod set count {count}"))
    return found


def topology_request_error(annotations: dict[str, str], multi_layer: bool) -> str | None:
    """tas.go podSetTopologyRequestBuilder.Build's error, which makes the webhook answer with that error alone
    (the pod sets cannot be built, so none is validated). The constraints annotation is read only while
    TASMultiLayerTopology (`multi_layer`) is on."""
    if (REQUIRED not in annotations and PREFERRED not in annotations and UNCONSTRAINED in annotations
            and annotations[UNCONSTRAINED] not in GO_BOOLS):
        return f'strconv.ParseBool: parsing "{annotations[UNCONSTRAINED]}": invalid syntax'
    if CONSTRAINTS in annotations and multi_layer:
        layers = _constraints(annotations[CONSTRAINTS])
        if isinstance(layers, str):
            return f"failed to parse multi-layer topology constraints annotation: {layers}"
        if not 1 <= len(layers) <= 3:
            return f"topology constraints must contain between 1 and 3 entries: got {len(layers)}"
    elif SLICE_REQUIRED in annotations and SLICE_SIZE in annotations and _int32(annotations[SLICE_SIZE]) is None:
        size = annotations[SLICE_SIZE]
        why = "value out of range" if _GO_INT.match(size) else "invalid syntax"
        return f'strconv.ParseInt: parsing "{size}": {why}'
    return None


def _pod_set_rules(pod_sets: list[PodSet], paths: list[str], cluster: ClusterState) -> list[Refusal]:
    """The webhook's answer for these pod sets: the first pod set that cannot be built answers alone (its error),
    else every pod set's request and upper-bound rules."""
    multi_layer = cluster.kueue.gate(MULTI_LAYER)
    errors = [e for p in pod_sets if (e := topology_request_error(p.annotations, multi_layer)) is not None]
    if errors:
        return [_refuse("", errors[0])]
    return [r for p, path in zip(pod_sets, paths, strict=True)
            for r in pod_set_request(path, p.annotations, multi_layer) + slice_upper_bound(path, p.annotations,
                                                                                          p.count)]


def pod_set_groups(pod_sets: list[tuple[str, int, dict[str, str]]]) -> list[Refusal]:
    """ValidatePodSetGroupingTopology: a group is exactly two pod sets, one of them with a single pod, both asking
    the same topology level the same way. `pod_sets`: (path, count, annotations)."""
    groups: dict[str, list[tuple[str, int, dict[str, str]]]] = {}
    for pod_set in pod_sets:
        if GROUP_NAME in pod_set[2] and (REQUIRED in pod_set[2] or PREFERRED in pod_set[2]):
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


def jobset_topology(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """pkg/controller/jobs/jobset/jobset_webhook.go validateTopologyRequest: each replicated job's pod template
    (request and slice upper bound), then the pod-set groups."""
    pod_sets = jobset_pod_sets(obj.get("spec", {}))
    found = _pod_set_rules(pod_sets, [p.path for p in pod_sets], cluster)
    if any(r.field == "" for r in found):
        return found
    return found + pod_set_groups([(p.path, p.count, p.annotations) for p in pod_sets])


def trainjob_topology(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """pkg/controller/jobs/trainjob/trainjob_webhook.go validateTopologyRequest: the request and slice upper bound
    of each pod set the TrainJob gets from its runtime after its runtime patches (no pod-set-group rule there). A
    missing runtime is the Trainer webhook's refusal."""
    spec = obj.get("spec", {})
    ref = spec.get("runtimeRef", {})
    runtime = cluster.runtime(str(ref.get("kind", "ClusterTrainingRuntime")), str(ref.get("name", "")),
                              str(obj.get("metadata", {}).get("namespace", "")))
    if runtime is None:
        return []
    pod_sets = trainjob_pod_sets(obj, runtime)
    found = _pod_set_rules(pod_sets, [f"job[{p.name}]" for p in pod_sets], cluster)
    if any(r.field == "" for r in found):
        return found  # a pod set that cannot be built: Kueue answers with that error, without the hint
    hint = ('. Adjust either the "TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" annotations for '
            "the corresponding Job")
    return [Refusal(r.family, r.field, r.message + hint, r.reason) for r in found]


def job_topology(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """pkg/controller/jobs/job/job_webhook.go validateTopologyRequest: the pod template's request answers alone
    when refused; an elastic Job (`kueue.x-k8s.io/elastic-job: "true"`, ElasticJobsViaWorkloadSlices on) may ask
    only an unconstrained topology; then the pod set is built and its slice size bounded by
    min(parallelism, completions) (job_controller.go podsCount)."""
    spec = obj.get("spec", {})
    path = "spec.template.metadata"
    annotations = dict(spec.get("template", {}).get("metadata", {}).get("annotations", {}))
    found = pod_set_request(path, annotations, cluster.kueue.gate(MULTI_LAYER))
    if found:
        return found
    if elastic(obj, cluster):
        for key, word in ((REQUIRED, "required"), (PREFERRED, "preferred")):
            if key in annotations:
                return [_refuse(f"{path}.annotations.{key}", f"{word} topology is not supported with elastic jobs")]
    # The pod set is built here (JobPodSets); every annotation its builder cannot read (topology_request_error) is
    # refused above by pod_set_request, so building it cannot fail.
    parallelism = int(spec.get("parallelism", 1))
    return slice_upper_bound(path, annotations, min(parallelism, int(spec.get("completions", parallelism))))
