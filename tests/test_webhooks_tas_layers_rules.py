"""Kueue 0.19.2's topology rules at their edges, from the upstream source (kubernetes-sigs/kueue v0.19.2
`pkg/controller/jobframework/tas_validation.go`): slice-constraint layers whose fields are absent (encoding/json
leaves Go's zero value: topology "", size 0) in the per-layer, uniqueness, divisibility and upper-bound rules;
ValidatePodSetGroupingTopology over several groups (each group's refusals add to the others'); and
`pkg/controller/jobs/trainjob/trainjob_webhook.go` validateTopologyRequest, whose hint is added to field errors only,
not to the error of a pod set that cannot be built."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.kueue_v0_19_tas import (
    jobset_topology,
    pod_set_groups,
    slice_upper_bound,
    trainjob_topology,
)
from infra.spec import runtimes as rt
from tests.test_webhooks_tas_rules import (
    GROUP,
    LAYERS,
    PREFERRED,
    REQUIRED,
    STATE,
    UNCONSTRAINED,
    A,
    _jobset,
    layers,
    lines,
    request,
)

EMPTY_NAME = "name part must be non-empty"


def test_a_slice_layer_without_a_topology_has_the_empty_level() -> None:
    """validateSliceRequiredTopologyConstraintsAnnotation: ValidateLabelName(c.Topology) on Go's zero value ""."""
    assert request(layers({"size": 2})) == [f'{A}[{LAYERS}][0].topology: Invalid value: "": {EMPTY_NAME}']


def test_two_slice_layers_without_a_topology_repeat_the_empty_level() -> None:
    """The uniqueness pass compares the zero values: field.Duplicate names "" and the first index."""
    assert request(layers({"size": 4}, {"size": 2})) == [
        f'{A}[{LAYERS}][0].topology: Invalid value: "": {EMPTY_NAME}',
        f'{A}[{LAYERS}][1].topology: Invalid value: "": {EMPTY_NAME}',
        f'{A}[{LAYERS}][1].topology: Duplicate value: " (also at index 0)"']


@pytest.mark.parametrize(("entries", "refused"), [
    # a parent without a size is 0, which every child divides: only the size rule answers
    (({"topology": "rack"}, {"topology": "host", "size": 2}), [f"{A}[{LAYERS}][0].size: Invalid value: 0: must be "
                                                               "greater than or equal to 1"]),
    # a child without a size is 0: the size rule answers, the division rule skips it (no division by zero)
    (({"topology": "rack", "size": 4}, {"topology": "host"}), [f"{A}[{LAYERS}][1].size: Invalid value: 0: must be "
                                                               "greater than or equal to 1"]),
    # one past the edge: a parent of 3 is not divided by 2
    (({"topology": "rack", "size": 3}, {"topology": "host", "size": 2}),
     [f"{A}[{LAYERS}][1].size: Invalid value: 2: must evenly divide the parent layer size 3"]),
])
def test_slice_layers_without_a_size_divide_as_zero(entries: tuple[dict[str, Any], ...], refused: list[str]) -> None:
    """The divisibility pass: constraints[i+1].Size > 0 && constraints[i].Size % constraints[i+1].Size != 0."""
    assert request(layers(*entries)) == refused


@pytest.mark.parametrize(("entry", "count", "refused"), [
    ({"topology": "rack"}, 0, None), ({"topology": "rack"}, -1, 0), ({"topology": "rack", "size": 1}, 0, 1),
    ({"topology": "rack", "size": 1}, 1, None), ({"topology": "rack", "size": 2}, 1, 2)])
def test_the_first_slice_layer_is_bounded_by_the_count_with_an_absent_size_zero(entry: dict[str, Any], count: int,
                                                                                refused: int | None) -> None:
    """ValidateSliceSizeAnnotationUpperBound: constraints[0].Size > podSet.Count, the size (0 when absent) named."""
    found = lines(slice_upper_bound("p", layers(entry), count))
    assert found == ([] if refused is None else [
        f"{A}[{LAYERS}]: Invalid value: {refused}: must not be greater than pod set count {count}"])


def test_every_group_refusal_adds_to_the_earlier_groups() -> None:
    """Each group answers for itself, in the order its first member appears: a group of three on each member, then
    a pair with no single-pod side and requests that differ gets both of its refusals."""
    trio = {GROUP: "g", REQUIRED: "rack"}
    found = lines(pod_set_groups([("a", 1, trio), ("b", 1, trio), ("c", 1, trio),
                                  ("d", 2, {GROUP: "h", REQUIRED: "rack"}), ("e", 2, {GROUP: "h", PREFERRED: "rack"})]))
    sizes = "can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) and 2 replica(s)"
    consistent = f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with"
    assert found == [
        *(f"{p}.annotations[{GROUP}]: can only define groups of exactly 2 pod sets, got: 3 pod set(s)" for p in "abc"),
        f"d.annotations[{GROUP}]: {sizes} in the group", f"e.annotations[{GROUP}]: {sizes} in the group",
        f"d.annotations: {consistent} 'e.annotations' in group 'h'",
        f"e.annotations: {consistent} 'd.annotations' in group 'h'"]


def test_a_trainjob_pod_set_that_cannot_be_built_answers_without_the_patch_hint() -> None:
    """trainjob_webhook.go validateTopologyRequest: the hint is appended to field errors; when podSets fails (an
    unconstrained value that is no Go boolean, tas.go Build) there are none, and its error answers alone."""
    runtime = rt.read("torch-distributed")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    node.setdefault("metadata", {})["annotations"] = {UNCONSTRAINED: "maybe"}
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "t", "namespace": "v"}, "spec": {"runtimeRef": {"name": "torch-distributed"}}}
    assert lines(trainjob_topology(job, ClusterState([runtime]))) == [': strconv.ParseBool: parsing "maybe": invalid '
                                                                      "syntax"]


@pytest.mark.parametrize("layer", [
    '{"topology": "rack", "size": "2"}', '{"topology": "rack", "size": 2.5}', '{"topology": "rack", "size": 2.0}',
    '{"topology": "rack", "size": true}', '{"topology": "rack", "size": 2147483648}', '{"topology": 5, "size": 1}',
    '{"topology": ["rack"], "size": 1}', '{"topology": "rack", "SIZE": "2"}', '"rack"'])
def test_a_slice_layer_value_of_another_go_type_does_not_decode(layer: str) -> None:
    """json.Unmarshal into PodsetSliceRequiredTopologyConstraint (topology string, size int32) fails: the builder's
    error answers for a JobSet (tas.go Build), the annotation rule refuses it for a batch Job."""
    value = f"[{layer}]"
    found = request({LAYERS: value})
    assert len(found) == 1 and found[0].startswith(f"{A}[{LAYERS}]: Invalid value: {json.dumps(value)}: must be a "
                                                   "valid JSON array: ")
    assert lines(jobset_topology(_jobset(("w", 1, {LAYERS: value})), STATE))[0].startswith(
        ": failed to parse multi-layer topology constraints annotation: ")
    assert slice_upper_bound("p", {LAYERS: value}, 0) == []  # a layer that does not decode is not bounded


@pytest.mark.parametrize(("layer", "size"), [
    ('{"topology": "rack", "size": 2147483647}', 2147483647), ('{"Topology": "rack", "SIZE": 2}', 2),
    ('{"topology": "rack", "size": 1, "Size": 2}', 2), ('{"topology": "rack", "size": 2, "size": null}', 2),
    ('{"topology": "rack", "size": -2147483648}', None), ('{"weight": "x", "topology": "rack", "size": 2}', 2)])
def test_a_slice_layer_decodes_as_go_reads_it(layer: str, size: int | None) -> None:
    """encoding/json: keys match their field without regard to case (the last one wins), null leaves the field as
    it was, unknown keys are ignored; int32 holds -2^31 to 2^31-1."""
    found = request({LAYERS: f"[{layer}]"})
    assert found == ([] if size is not None else [
        f"{A}[{LAYERS}][0].size: Invalid value: -2147483648: must be greater than or equal to 1"])
    assert lines(slice_upper_bound("p", {LAYERS: f"[{layer}]"}, 1)) == ([] if size in (None, 1) else [
        f"{A}[{LAYERS}]: Invalid value: {size}: must not be greater than pod set count 1"])


def test_a_null_slice_layer_is_a_layer_of_zero_values() -> None:
    """json.Unmarshal of null into a struct leaves it unchanged: a layer with topology "" and size 0."""
    assert request({LAYERS: "[null]"}) == [
        f'{A}[{LAYERS}][0].topology: Invalid value: "": {EMPTY_NAME}',
        f"{A}[{LAYERS}][0].size: Invalid value: 0: must be greater than or equal to 1"]


def test_null_slice_layers_are_no_layers() -> None:
    """null decodes to a nil slice: fewer than 1 layer, for the annotation rule and for the builder alike."""
    assert request({LAYERS: "null"}) == [f'{A}[{LAYERS}]: Invalid value: "null": topology constraints must contain '
                                         "between 1 and 3 entries"]
    assert lines(jobset_topology(_jobset(("w", 1, {LAYERS: "null"})), STATE)) == [
        ": topology constraints must contain between 1 and 3 entries: got 0"]
    assert slice_upper_bound("p", {LAYERS: "null"}, 0) == []
