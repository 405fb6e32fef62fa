"""Kueue 0.19.2's topology rules for JobSets and TrainJobs offline (jobframework/tas_validation.go): the slice size
against the pod set's count, the slice-size syntax, the multi-layer slice constraints, the answer when a pod set
cannot be built, and the TrainJob's pod sets taken after its runtime patches, as Kueue builds them through
Trainer 2.2.1 (strategic merge of each patch into the runtime's replicated jobs)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.strategic_merge import merge
from infra.apiserver.webhooks import review, rules_for
from infra.apiserver.webhooks.podsets import trainjob_pod_sets
from infra.spec import runtimes as rt
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
WHERE = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
HINT = ('. Adjust either the "TrainJob.spec.runtimePatches" or the "TrainingRuntime.Template" annotations for the '
        "corresponding Job")


def refusals(obj: dict[str, Any], *cluster: dict[str, Any]) -> list[str]:
    state = ClusterState([*MANAGED, *cluster, obj])
    return [r.line() for r in review(obj, state, RULES) if r.family == "webhook:kueue"]


def jobset(annotations: dict[str, str], replicas: int = 2, **job: Any) -> dict[str, Any]:
    """One replicated job of `replicas` x 4 pods unless `job` says otherwise."""
    spec = {"parallelism": 4, **job, "template": {"metadata": {"annotations": annotations},
                                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "v"},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": spec}}]}}


def sliced(size: str) -> dict[str, str]:
    return {SLICE: "rack", SIZE: size}


def test_a_slice_holds_at_most_the_pod_sets_pods() -> None:
    assert refusals(jobset(sliced("8"))) == []  # 2 replicas x 4 pods
    assert refusals(jobset(sliced("9"))) == [
        f'webhook:kueue: {WHERE}[{SIZE}]: Invalid value: "9": must not be greater than pod set count 8']


def test_the_pod_set_count_takes_fewer_completions_than_parallelism() -> None:
    assert refusals(jobset(sliced("6"), completions=3)) == []  # 2 replicas x min(4, 3)
    assert refusals(jobset(sliced("7"), completions=3)) == [
        f'webhook:kueue: {WHERE}[{SIZE}]: Invalid value: "7": must not be greater than pod set count 6']


def test_the_slice_size_is_a_positive_number() -> None:
    assert refusals(jobset(sliced("1"))) == []
    assert refusals(jobset(sliced("0"))) == [
        f'webhook:kueue: {WHERE}[{SIZE}]: Invalid value: "0": must be greater than or equal to 1']
    # without the slice topology the size is not parsed when the pod set is built, so every rule answers
    assert refusals(jobset({SIZE: "two"})) == [
        f'webhook:kueue: {WHERE}[{SIZE}]: Invalid value: "two": must be a numeric value',
        f"webhook:kueue: {WHERE}[{SIZE}]: may not be set when '{SLICE}' is not specified",
        f'webhook:kueue: {WHERE}[{SIZE}]: Invalid value: "two": must be a numeric value']


@pytest.mark.parametrize(("annotations", "error"), [
    (sliced("two"), 'strconv.ParseInt: parsing "two": invalid syntax'),
    (sliced("2147483648"), 'strconv.ParseInt: parsing "2147483648": value out of range'),
    ({UNCONSTRAINED: "yes"}, 'strconv.ParseBool: parsing "yes": invalid syntax'),
    ({LAYERS: json.dumps([{"topology": "t", "size": 1}] * 4)},
     "topology constraints must contain between 1 and 3 entries: got 4"),
])
def test_a_pod_set_that_cannot_be_built_answers_alone(annotations: dict[str, str], error: str) -> None:
    assert refusals(jobset({**annotations, GROUP: "1"})) == [f"webhook:kueue: {error}"]


def test_go_booleans_are_accepted_as_go_parses_them() -> None:
    assert refusals(jobset({UNCONSTRAINED: "TRUE"})) == []
    assert refusals(jobset({UNCONSTRAINED: "tRuE"})) == [
        'webhook:kueue: strconv.ParseBool: parsing "tRuE": invalid syntax']


def layers(*sizes: int, levels: tuple[str, ...] = ("block", "rack", "host")) -> dict[str, str]:
    return {LAYERS: json.dumps([{"topology": level, "size": size}
                                for level, size in zip(levels[:len(sizes)], sizes, strict=True)])}


def test_slice_constraint_layers() -> None:
    assert refusals(jobset(layers(8, 4, 2))) == []
    assert refusals(jobset(layers(16, 4))) == [
        f"webhook:kueue: {WHERE}[{LAYERS}]: Invalid value: 16: must not be greater than pod set count 8"]
    assert refusals(jobset(layers(8, 3))) == [
        f"webhook:kueue: {WHERE}[{LAYERS}][1].size: Invalid value: 3: must evenly divide the parent layer size 8"]
    assert refusals(jobset(layers(8, 0))) == [
        f"webhook:kueue: {WHERE}[{LAYERS}][1].size: Invalid value: 0: must be greater than or equal to 1"]
    assert refusals(jobset(layers(8, 4, levels=("rack", "rack")))) == [
        f'webhook:kueue: {WHERE}[{LAYERS}][1].topology: Duplicate value: "rack (also at index 0)"']
    assert refusals(jobset({**layers(8), SLICE: "rack", SIZE: "4"})) == [
        f"webhook:kueue: {WHERE}[{LAYERS}]: may not be set when '{SLICE}' is specified",
        f"webhook:kueue: {WHERE}[{LAYERS}]: may not be set when '{SIZE}' is specified"]


def node_patch(annotations: dict[str, Any]) -> dict[str, Any]:
    return {"manager": "example.com/team", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"metadata": {"annotations": annotations}}}}}]}}}}


def trainjob(nodes: int, *patches: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "vision"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": nodes},
                     "runtimePatches": list(patches)}}


def test_trainjob_pod_sets_follow_its_runtime_patches_and_node_count() -> None:
    runtime = rt.read("torch-distributed")
    assert refusals(trainjob(4), runtime) == []
    assert refusals(trainjob(4, node_patch(sliced("4"))), runtime) == []
    assert refusals(trainjob(4, node_patch(sliced("5"))), runtime) == [
        f'webhook:kueue: job[node].annotations[{SIZE}]: Invalid value: "5": must not be greater than pod set count '
        f"4{HINT}"]
    # a later patch wins, and a null removes what an earlier one set
    assert refusals(trainjob(4, node_patch(sliced("5")), node_patch({SIZE: "2"})), runtime) == []
    assert refusals(trainjob(4, node_patch(sliced("2")), node_patch({SIZE: None})), runtime) == [
        f"webhook:kueue: job[node].annotations[{SIZE}]: must be set when '{SLICE}' is specified{HINT}"]


def test_trainjob_pod_sets_are_not_checked_as_groups() -> None:
    """Kueue's TrainJob webhook validates each pod set but not ValidatePodSetGroupingTopology; its JobSet webhook
    does."""
    runtime = rt.read("torch-distributed")
    assert refusals(trainjob(4, node_patch({REQUIRED: "rack", GROUP: "g"})), runtime) == []
    assert any("groups of exactly 2 pod sets" in line for line in refusals(jobset({REQUIRED: "rack", GROUP: "g"})))


def test_trainjob_pod_set_counts() -> None:
    runtime = rt.read("torchtune-llama3.2-1b")
    counts = {p.name: p.count for p in trainjob_pod_sets({"spec": {"trainer": {"numNodes": 1}}}, runtime)}
    assert counts == {"dataset-initializer": 1, "model-initializer": 1, "node": 1}
    job = {"name": "dataset-initializer", "template": {"spec": {"parallelism": 3}}}
    patched: dict[str, Any] = {"spec": {"runtimePatches": [
        {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}]}}
    assert {p.name: p.count for p in trainjob_pod_sets(patched, runtime)}["dataset-initializer"] == 3


def test_strategic_merge_of_a_job_template() -> None:
    original: dict[str, Any] = {"metadata": {"annotations": {"a": "1", "b": "2"}}, "spec": {"template": {"spec": {
        "containers": [{"name": "node", "image": "x", "env": [{"name": "A", "value": "1"}]}],
        "tolerations": [{"key": "gpu"}]}}}}
    patch = {"metadata": {"annotations": {"a": None, "c": "3"}}, "spec": {"template": {"spec": {
        "containers": [{"name": "node", "env": [{"name": "B", "value": "2"}]}, {"name": "side", "image": "y"}],
        "tolerations": [{"key": "spot"}]}}}}
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert merge(original, patch) == {"metadata": {"annotations": {"b": "2", "c": "3"}}, "spec": {"template": {"spec": {
        "containers": [{"name": "node", "image": "x", "env": env}, {"name": "side", "image": "y"}],
        "tolerations": [{"key": "spot"}]}}}}
    assert original["metadata"]["annotations"] == {"a": "1", "b": "2"}  # the runtime is not changed


def batch_job(annotations: dict[str, str], elastic: bool = False, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "v",
                         "annotations": {"kueue.x-k8s.io/elastic-job": "true"} if elastic else {}},
            "spec": {**spec, "template": {"metadata": {"annotations": annotations},
                                          "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def test_a_batch_jobs_slice_holds_at_most_its_pods() -> None:
    where = "spec.template.metadata.annotations"
    assert refusals(batch_job(sliced("3"), parallelism=4, completions=3)) == []
    assert refusals(batch_job(sliced("4"), parallelism=4, completions=3)) == [
        f'webhook:kueue: {where}[{SIZE}]: Invalid value: "4": must not be greater than pod set count 3']
    assert refusals(batch_job(sliced("2"))) == [  # parallelism defaults to 1
        f'webhook:kueue: {where}[{SIZE}]: Invalid value: "2": must not be greater than pod set count 1']
    # a refused request answers alone, before the pod set is built or bounded
    assert refusals(batch_job({SIZE: "9"})) == [
        f"webhook:kueue: {where}[{SIZE}]: may not be set when '{SLICE}' is not specified"]


def test_an_elastic_batch_job_asks_only_an_unconstrained_topology() -> None:
    assert refusals(batch_job({UNCONSTRAINED: "true"}, elastic=True)) == []
    assert refusals(batch_job({REQUIRED: "rack"})) == []
    assert refusals(batch_job({REQUIRED: "rack"}, elastic=True)) == [
        f"webhook:kueue: spec.template.metadata.annotations.{REQUIRED}: required topology is not supported with "
        "elastic jobs"]
