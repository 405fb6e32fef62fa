"""Kueue 0.19.2's topology rules of the job webhooks, annotation by annotation, from the upstream source
(kubernetes-sigs/kueue v0.19.2): `pkg/controller/jobframework/tas_validation.go` (ValidateTASPodSetRequest,
validateTASUnconstrained, validateSliceSizeAnnotation, validatePodSetGroupNameAnnotation,
validateSliceRequiredTopologyConstraintsAnnotation, ValidateSliceSizeAnnotationUpperBound,
ValidatePodSetGroupingTopology), `pkg/controller/jobframework/tas.go` (podSetTopologyRequestBuilder.Build, whose
error is the webhook's whole answer), `pkg/controller/jobs/jobset/jobset_webhook.go` validateTopologyRequest and
`pkg/controller/jobs/job/job_webhook.go` validateTopologyRequest (an elastic Job: workloadslicing.Enabled, which
needs the ElasticJobsViaWorkloadSlices gate). Each annotation: a valid value admitted, the nearest invalid one
refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.kueue_v0_19_tas import (
    job_topology,
    jobset_topology,
    pod_set_groups,
    pod_set_request,
    trainjob_topology,
)
from infra.apiserver.webhooks.podsets import jobset_pod_sets, patched_runtime, trainjob_pod_sets
from infra.spec import runtimes as rt
from tests.kueue_cluster import MANAGED, kueue_config, namespace

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
A = "p.annotations"
STATE = ClusterState(MANAGED)


def request(annotations: dict[str, str], multi_layer: bool = True) -> list[str]:
    return [f"{r.field}: {r.message}" for r in pod_set_request("p", annotations, multi_layer)]


@pytest.mark.parametrize("pair", [(REQUIRED, PREFERRED), (REQUIRED, UNCONSTRAINED), (PREFERRED, UNCONSTRAINED)])
def test_at_most_one_of_the_three_topology_annotations(pair: tuple[str, str]) -> None:
    values = {REQUIRED: "rack", PREFERRED: "rack", UNCONSTRAINED: "true"}
    for key in pair:
        assert request({key: values[key]}) == []
    assert request({key: values[key] for key in pair}) == [
        f"{A}: must not contain more than one topology annotation: ['{REQUIRED}', '{PREFERRED}', '{UNCONSTRAINED}']"]


@pytest.mark.parametrize("key", [REQUIRED, PREFERRED, SLICE])
def test_topology_levels_are_label_names(key: str) -> None:
    extra = {SIZE: "1"} if key == SLICE else {}
    assert request({key: "cloud.provider.com/topology-rack", **extra}) == []
    lines = request({key: "not a label", **extra})
    assert lines and all(line.startswith(f"{A}[{key}]: Invalid value: \"not a label\": ") for line in lines)


@pytest.mark.parametrize(("value", "refused"), [("true", False), ("F", False), ("0", False), ("yes", True),
                                                ("", True)])
def test_unconstrained_is_a_go_boolean(value: str, refused: bool) -> None:
    assert request({UNCONSTRAINED: value}) == ([f"{A}[{UNCONSTRAINED}]: must be a boolean value"] if refused else [])


@pytest.mark.parametrize(("size", "problem"), [
    ("1", ""), ("+1", ""), ("2147483647", ""), ("0", "must be greater than or equal to 1"),
    ("-1", "must be greater than or equal to 1"), ("2147483648", "must be a numeric value"),
    ("1.5", "must be a numeric value"), ("", "must be a numeric value")])
def test_the_slice_size_is_an_int32_of_at_least_one(size: str, problem: str) -> None:
    """validateSliceSizeAnnotation: strconv.ParseInt(value, 10, 32), then at least 1."""
    found = request({SLICE: "rack", SIZE: size})
    assert found == ([f"{A}[{SIZE}]: Invalid value: {json.dumps(size)}: {problem}"] if problem else [])


def test_slice_topology_and_slice_size_need_each_other() -> None:
    assert request({SLICE: "rack"}) == [f"{A}[{SIZE}]: must be set when '{SLICE}' is specified"]
    assert request({SIZE: "2"}) == [f"{A}[{SIZE}]: may not be set when '{SLICE}' is not specified"]


@pytest.mark.parametrize(("name", "number"), [("1", True), ("18446744073709551615", True),
                                              ("18446744073709551616", False), ("-1", False), ("g1", False)])
def test_a_pod_set_group_name_is_not_a_number(name: str, number: bool) -> None:
    """validatePodSetGroupNameAnnotation: strconv.ParseUint(name, 10, 64) must fail."""
    found = request({REQUIRED: "rack", GROUP: name})
    assert found == ([f"{A}[{GROUP}]: must not be a number"] if number else [])


def test_a_pod_set_group_needs_a_required_or_preferred_topology_and_no_slice() -> None:
    assert request({PREFERRED: "rack", GROUP: "g"}) == []
    assert request({UNCONSTRAINED: "true", GROUP: "g"}) == [
        f"{A}[{GROUP}]: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified"]
    assert request({REQUIRED: "rack", GROUP: "g", SLICE: "host", SIZE: "2"}) == [
        f"{A}[{GROUP}]: may not be set when '{SIZE}' is specified",
        f"{A}[{GROUP}]: may not be set when '{SLICE}' is specified"]


def layers(*entries: Any) -> dict[str, str]:
    return {LAYERS: json.dumps(list(entries))}


def test_slice_layers_one_to_three_valid_label_names() -> None:
    three = layers({"topology": "block", "size": 8}, {"topology": "rack", "size": 4}, {"topology": "host", "size": 2})
    assert request(three) == []
    assert request(layers({"topology": "block", "size": 1})) == []
    too_many = layers(*[{"topology": f"l{i}", "size": 1} for i in range(4)])
    assert request(too_many) == [f"{A}[{LAYERS}]: Invalid value: {json.dumps(too_many[LAYERS])}: topology "
                                 "constraints must contain between 1 and 3 entries"]
    assert request(layers()) == [f"{A}[{LAYERS}]: Invalid value: \"[]\": topology constraints must contain between 1 "
                                 "and 3 entries"]
    bad_level = request(layers({"topology": "not a label", "size": 1}))
    assert bad_level and all(line.startswith(f"{A}[{LAYERS}][0].topology: Invalid value: \"not a label\": ")
                             for line in bad_level)


def test_slice_layers_sizes_divide_their_parent_and_levels_appear_once() -> None:
    assert request(layers({"topology": "rack", "size": 6}, {"topology": "host", "size": 3})) == []
    assert request(layers({"topology": "rack", "size": 6}, {"topology": "host", "size": 4})) == [
        f"{A}[{LAYERS}][1].size: Invalid value: 4: must evenly divide the parent layer size 6"]
    # a size below 1 is refused by its own rule, not by the division rule; uniqueness is checked after every layer
    assert request(layers({"topology": "rack", "size": 6}, {"topology": "rack", "size": 0})) == [
        f"{A}[{LAYERS}][1].size: Invalid value: 0: must be greater than or equal to 1",
        f'{A}[{LAYERS}][1].topology: Duplicate value: "rack (also at index 0)"']


@pytest.mark.parametrize("value", ["{", '{"topology": "rack"}', "[1]"])
def test_slice_layers_are_a_json_array_of_objects(value: str) -> None:
    found = request({LAYERS: value})
    assert len(found) == 1 and found[0].startswith(f"{A}[{LAYERS}]: Invalid value: {json.dumps(value)}: must be a "
                                                   "valid JSON array: ")


def test_slice_layers_are_refused_alone_while_their_gate_is_off() -> None:
    """validateSliceRequiredTopologyConstraintsAnnotation: TASMultiLayerTopology off answers alone; the builder
    then does not read the layers (tas.go Build), so unreadable layers do not stop the JobSet's other rules."""
    gated = f"{A}[{LAYERS}]: the TASMultiLayerTopology feature gate must be enabled to use this annotation"
    assert request({GROUP: "g", REQUIRED: "rack", **layers({"topology": "host", "size": 1})}, False) == [gated]
    assert request({LAYERS: "{"}, False) == [gated]
    off = ClusterState([kueue_config(gates={"TASMultiLayerTopology": False}), namespace("v")])
    where = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
    assert lines(jobset_topology(_jobset(("w", 1, {LAYERS: "{"})), off)) == [
        f"{where}[{LAYERS}]: the TASMultiLayerTopology feature gate must be enabled to use this annotation"]
    assert lines(jobset_topology(_jobset(("w", 1, {LAYERS: "{"})), STATE))[0].startswith(
        ": failed to parse multi-layer topology constraints annotation: ")
    assert lines(job_topology(batch_job({LAYERS: "[]"}), off)) == [
        f"spec.template.metadata.annotations[{LAYERS}]: the TASMultiLayerTopology feature gate must be enabled to "
        "use this annotation"]


def test_slice_layers_exclude_the_group_name() -> None:
    assert request({REQUIRED: "rack", GROUP: "g", **layers({"topology": "host", "size": 1})}) == [
        f"{A}[{GROUP}]: may not be set when '{LAYERS}' is specified"]


# --- whole webhooks: JobSet and batch Job ------------------------------------------------------------------------

def _jobset(*jobs: tuple[str, int, dict[str, str]]) -> dict[str, Any]:
    """Replicated jobs (name, replicas, pod-template annotations), each of 2 pods per replica."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "v"},
            "spec": {"replicatedJobs": [{"name": name, "replicas": replicas, "template": {"spec": {
                "parallelism": 2, "template": {"metadata": {"annotations": annotations}}}}}
                for name, replicas, annotations in jobs]}}


def lines(found: list[Any]) -> list[str]:
    return [f"{r.field}: {r.message}" for r in found]


def test_a_jobset_pod_set_that_cannot_be_built_hides_every_other_refusal() -> None:
    """jobset_webhook.go validateTopologyRequest: with JobPodSets failing, only its error answers."""
    bad_group = (("a", 1, {GROUP: "g", REQUIRED: "rack"}))
    assert lines(jobset_topology(_jobset(bad_group, ("b", 1, {UNCONSTRAINED: "maybe"})), STATE)) == [
        ': strconv.ParseBool: parsing "maybe": invalid syntax']
    assert lines(jobset_topology(_jobset(bad_group, ("b", 1, {UNCONSTRAINED: "true"})), STATE)) == [
        f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{GROUP}]: can only define groups of "
        "exactly 2 pod sets, got: 1 pod set(s)"]


def test_a_jobset_slice_layer_holds_at_most_the_pod_sets_pods() -> None:
    where = f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{LAYERS}]"
    at_limit = layers({"topology": "rack", "size": 6}, {"topology": "host", "size": 2})
    assert jobset_topology(_jobset(("w", 3, at_limit)), STATE) == []  # 3 replicas x 2 pods
    over = layers({"topology": "rack", "size": 8}, {"topology": "host", "size": 2})
    assert lines(jobset_topology(_jobset(("w", 3, over)), STATE)) == [
        f"{where}: Invalid value: 8: must not be greater than pod set count 6"]


@pytest.mark.parametrize(("first", "second", "consistent"), [
    ({REQUIRED: "rack"}, {REQUIRED: "rack"}, True), ({PREFERRED: "rack"}, {PREFERRED: "rack"}, True),
    ({REQUIRED: "rack"}, {REQUIRED: "block"}, False), ({REQUIRED: "rack"}, {PREFERRED: "rack"}, False),
    ({PREFERRED: "rack"}, {PREFERRED: "host"}, False), ({REQUIRED: "rack"}, {}, False),
    ({}, {PREFERRED: "rack"}, False)])
def test_a_pod_set_group_asks_one_topology_the_same_way(first: dict[str, str], second: dict[str, str],
                                                         consistent: bool) -> None:
    """ValidatePodSetGroupingTopology / topologyRequestsValid, called with the group's two pod sets (a pod set
    without a required or preferred topology has no group name in its request, tas.go Build)."""
    found = lines(pod_set_groups([("a", 1, {GROUP: "g", **first}), ("b", 4, {GROUP: "g", **second})]))
    both_asked = bool(first) and bool(second)
    if consistent:
        assert found == []
    elif both_asked:
        assert found == [f"a.annotations: must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with "
                         "'b.annotations' in group 'g'",
                         f"b.annotations: must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with "
                         "'a.annotations' in group 'g'"]
    else:
        assert found == [f"{'a' if first else 'b'}.annotations[{GROUP}]: can only define groups of exactly 2 pod sets, "
                         "got: 1 pod set(s)"]


@pytest.mark.parametrize(("counts", "refused"), [((1, 4), False), ((4, 1), False), ((1, 1), False), ((2, 4), True)])
def test_a_pod_set_group_has_a_single_pod_side(counts: tuple[int, int], refused: bool) -> None:
    grouped = {GROUP: "g", REQUIRED: "rack"}
    found = lines(pod_set_groups([("a", counts[0], grouped), ("b", counts[1], grouped)]))
    message = (f"can only define groups where at least one pod set has only 1 replica, got: {counts[0]} replica(s) "
               f"and {counts[1]} replica(s) in the group")
    assert found == ([f"a.annotations[{GROUP}]: {message}", f"b.annotations[{GROUP}]: {message}"] if refused else [])


def test_groups_of_three_are_refused_on_each_member_and_other_groups_stand() -> None:
    grouped = {GROUP: "g", REQUIRED: "rack"}
    pair = {GROUP: "h", PREFERRED: "rack"}
    found = lines(pod_set_groups([("a", 1, grouped), ("b", 1, grouped), ("c", 1, grouped), ("d", 1, pair),
                                  ("e", 3, pair)]))
    assert found == [f"{p}.annotations[{GROUP}]: can only define groups of exactly 2 pod sets, got: 3 pod set(s)"
                     for p in "abc"]


def batch_job(template: dict[str, str], elastic: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "v"}
    if elastic is not None:
        meta["annotations"] = {"kueue.x-k8s.io/elastic-job": elastic}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {**spec, "template": {"metadata": {"annotations": template}}}}


@pytest.mark.parametrize("key", [REQUIRED, PREFERRED])
def test_an_elastic_batch_job_may_not_ask_required_or_preferred_topology(key: str) -> None:
    word = "required" if key == REQUIRED else "preferred"
    assert lines(job_topology(batch_job({key: "rack"}, elastic="true"), STATE)) == [
        f"spec.template.metadata.annotations.{key}: {word} topology is not supported with elastic jobs"]
    assert job_topology(batch_job({key: "rack"}, elastic="True"), STATE) == []  # only "true" enables slicing
    assert job_topology(batch_job({UNCONSTRAINED: "true"}, elastic="true"), STATE) == []
    gate_off = ClusterState([kueue_config(gates={"ElasticJobsViaWorkloadSlices": False}), namespace("v")])
    assert job_topology(batch_job({key: "rack"}, elastic="true"), gate_off) == []


def test_a_batch_jobs_request_is_refused_before_its_pod_set_is_built_then_bounded() -> None:
    """job_webhook.go validateTopologyRequest: ValidateTASPodSetRequest answers alone when it refuses (an annotation
    the builder could not read is always refused there), then the slice is bounded by podsCount."""
    assert lines(job_topology(batch_job({SLICE: "rack", SIZE: "99999999999"}), STATE)) == [
        f'spec.template.metadata.annotations[{SIZE}]: Invalid value: "99999999999": must be a numeric value']
    assert lines(job_topology(batch_job({UNCONSTRAINED: "true", **layers({"topology": "rack", "size": 1})},
                                        parallelism=1), STATE)) == []
    assert lines(job_topology(batch_job({SLICE: "rack", SIZE: "3"}, parallelism=4), STATE)) == []
    assert lines(job_topology(batch_job({SLICE: "rack", SIZE: "3"}, parallelism=4, completions=2), STATE)) == [
        f'spec.template.metadata.annotations[{SIZE}]: Invalid value: "3": must not be greater than pod set count 2']


# --- the pod sets the rules count (podsets.py) ---------------------------------------------------------------------

@pytest.mark.parametrize(("job", "count"), [
    ({"name": "w"}, 1), ({"name": "w", "replicas": 3}, 3), ({"name": "w", "template": {"spec": {"parallelism": 4}}}, 4),
    ({"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 3}}}, 6),
    ({"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 5}}}, 8),
    ({"name": "w", "template": {"spec": {"completions": 5}}}, 1)])
def test_a_replicated_job_counts_replicas_times_pods_per_replica(job: dict[str, Any], count: int) -> None:
    """kueue jobset_controller.go podsCount: replicas x PodsCountPerReplica (parallelism defaulted to 1, or fewer
    completions)."""
    assert [(p.name, p.count, p.path) for p in jobset_pod_sets({"replicatedJobs": [job]})] == [
        ("w", count, "spec.replicatedJobs[0].template.spec.template.metadata")]


def _mpi_runtime(launcher_is_node: bool) -> dict[str, Any]:
    runtime = rt.read("deepspeed-distributed")
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = launcher_is_node
    return runtime


@pytest.mark.parametrize(("nodes", "launcher_is_node", "counts"), [
    (4, True, {"launcher": 1, "node": 3}), (1, True, {"launcher": 1, "node": 1}), (2, True, {"launcher": 1, "node": 1}),
    (4, False, {"launcher": 1, "node": 4}), (None, False, {"launcher": 1, "node": 1})])
def test_a_trainjobs_node_pod_set_takes_its_node_count_less_a_launcher_that_runs_as_a_node(
        nodes: int | None, launcher_is_node: bool, counts: dict[str, int]) -> None:
    trainer = {} if nodes is None else {"numNodes": nodes}  # None: the runtime's mlPolicy.numNodes (1)
    sets = trainjob_pod_sets({"spec": {"trainer": trainer}}, _mpi_runtime(launcher_is_node))
    assert {p.name: p.count for p in sets} == counts


def test_a_trainer_ancestor_job_of_another_name_takes_the_node_count_too() -> None:
    runtime = rt.read("torch-distributed")
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    job["name"] = "trainer"
    job["replicas"] = 2
    runtime["spec"]["mlPolicy"]["numNodes"] = 3
    assert job["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert [(p.name, p.count) for p in trainjob_pod_sets({"spec": {}}, runtime)] == [("trainer", 6)]


def test_runtime_patches_merge_only_into_named_jobs_with_a_template() -> None:
    runtime = rt.read("torch-distributed")
    def patch(name: str, template: Any) -> dict[str, Any]:
        job = {"name": name, "template": template}
        return {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    annotated = {"spec": {"template": {"metadata": {"annotations": {"a": "1"}}}}}
    job = {"spec": {"runtimePatches": [patch("other", annotated), patch("node", None), {"trainingRuntimeSpec": None},
                                       {"manager": "example.com/m"}]}}
    assert patched_runtime(job, runtime) == runtime
    job["spec"]["runtimePatches"].append(patch("node", annotated))
    assert [p.annotations for p in trainjob_pod_sets(job, runtime)] == [{"a": "1"}]


def test_a_trainjob_without_a_node_count_on_a_policy_without_one_runs_one_node() -> None:
    """numNodes: the TrainJob's, else the runtime's mlPolicy.numNodes, else 1 (the API default)."""
    runtime = _mpi_runtime(False)
    del runtime["spec"]["mlPolicy"]["numNodes"]
    assert {p.name: p.count for p in trainjob_pod_sets({"spec": {}}, runtime)} == {"launcher": 1, "node": 1}
    runtime["spec"]["mlPolicy"]["numNodes"] = 3
    assert {p.name: p.count for p in trainjob_pod_sets({"spec": {}}, runtime)} == {"launcher": 1, "node": 3}


def test_a_trainjobs_namespaced_runtime_is_read_in_its_namespace_for_the_topology_rules() -> None:
    runtime = rt.read("torch-distributed")
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = "v"
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    node.setdefault("metadata", {})["annotations"] = {UNCONSTRAINED: "true", GROUP: "g"}
    job: dict[str, Any] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                           "metadata": {"name": "t", "namespace": "v"},
                           "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "TrainingRuntime"}}}
    assert lines(trainjob_topology(job, ClusterState([runtime]))) == [
        f"job[node].annotations[{GROUP}]: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified. "
        'Adjust either the "TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" annotations for the '
        "corresponding Job"]
    job["metadata"]["namespace"] = "other"
    assert trainjob_topology(job, ClusterState([runtime])) == []


def test_the_slice_size_parses_down_to_the_least_int32() -> None:
    assert request({SLICE: "rack", SIZE: "-2147483648"}) == [
        f'{A}[{SIZE}]: Invalid value: "-2147483648": must be greater than or equal to 1']
    assert request({SLICE: "rack", SIZE: "-2147483649"}) == [
        f'{A}[{SIZE}]: Invalid value: "-2147483649": must be a numeric value']


def test_a_jobset_reports_pod_set_requests_and_every_group_together() -> None:
    """Requests and upper bounds of each pod set, then ValidatePodSetGroupingTopology over every group."""
    pair = {GROUP: "g", REQUIRED: "rack"}
    trio = {GROUP: "h", PREFERRED: "rack"}
    where = "spec.replicatedJobs[{}].template.spec.template.metadata.annotations"
    found = lines(jobset_topology(_jobset(("a", 2, pair), ("b", 2, {**pair, UNCONSTRAINED: "true"}), ("c", 1, trio),
                                          ("d", 1, trio), ("e", 1, trio)), STATE))
    assert found == [
        f"{where.format(1)}: must not contain more than one topology annotation: ['{REQUIRED}', '{PREFERRED}', "
        f"'{UNCONSTRAINED}']",
        *(f"{where.format(i)}[{GROUP}]: can only define groups where at least one pod set has only 1 replica, got: 4 "
          "replica(s) and 4 replica(s) in the group" for i in (0, 1)),
        *(f"{where.format(i)}[{GROUP}]: can only define groups of exactly 2 pod sets, got: 3 pod set(s)"
          for i in (2, 3, 4))]


def test_a_slice_layer_without_a_size_has_size_zero() -> None:
    """encoding/json leaves an absent size 0: refused by the layer rule, and never above the pod count."""
    where = f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{LAYERS}]"
    assert lines(jobset_topology(_jobset(("w", 1, layers({"topology": "rack"}))), STATE)) == [
        f"{where}[0].size: Invalid value: 0: must be greater than or equal to 1"]
