"""Trainer 2.2.1's webhooks, field by field, from the upstream source: kubeflow/trainer v2.2.1
`pkg/webhooks/trainingruntime_webhook.go` (validateReplicatedJobs: expectedContainerNames per ancestor),
`pkg/webhooks/trainjob_webhook.go` (the runtime registry key), `pkg/runtime/framework/plugins/{torch,flux,jobset}`
Validate and `pkg/runtime/runtime.go` GetNumGPUPerNode. Each field: a valid value admitted, the nearest invalid one
refused."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.trainer_v2_2 import runtime, torchtune_model, trainjob
from infra.spec import runtimes as rt
from tests.kueue_cluster import MANAGED
from tests.test_webhooks_jobset_rules import INVALID_PATH

STATE = ClusterState(MANAGED)


def lines(found: list[Any]) -> list[str]:
    return [f"{r.field}: {r.message}".removeprefix(": ") for r in found]


@pytest.mark.parametrize(("ancestor", "container"), [("trainer", "node"), ("model-initializer", "model-initializer"),
                                                     ("dataset-initializer", "dataset-initializer")])
def test_each_ancestor_job_has_its_own_container_and_one_replica(ancestor: str, container: str) -> None:
    def runtime_with(name: str, replicas: int) -> dict[str, Any]:
        job = {"name": "j", "replicas": replicas, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}},
            "spec": {"template": {"spec": {"containers": [{"name": "sidecar"}, {"name": name}]}}}}}
        return {"kind": "TrainingRuntime", "spec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    assert runtime(runtime_with(container, 1), STATE) == []
    assert lines(runtime(runtime_with("other", 2), STATE)) == [
        "spec.template.spec.replicatedJobs[0].replicas: always must be 1",
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: must contain the required "
        f"container for the ancestor: {ancestor}"]


def test_a_job_of_no_known_ancestor_is_not_checked() -> None:
    job = {"name": "j", "replicas": 3, "template": {"metadata": {"labels": {
        "trainer.kubeflow.org/trainjob-ancestor-step": "launcher"}}}}
    assert runtime({"spec": {"template": {"spec": {"replicatedJobs": [job, {"name": "k", "replicas": 2}]}}}},
                   STATE) == []


@pytest.mark.parametrize(("name", "model"), [("torchtune-llama3.3-70b", "llama3_3/70B"), ("tune-a-b-c", ""),
                                             ("torchtune", ""), ("a-b", "")])
def test_the_torchtune_model_is_read_from_exactly_three_name_parts(name: str, model: str) -> None:
    assert torchtune_model(name) == model


def _trainjob(runtime_name: str, kind: str | None = None, group: str | None = None, **trainer: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": runtime_name}
    ref |= {"kind": kind} if kind else {}
    ref |= {"apiGroup": group} if group else {}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimeRef": ref, "trainer": trainer}}


def test_a_namespaced_runtime_is_found_in_the_trainjobs_namespace_only() -> None:
    namespaced = rt.read("torch-distributed")
    namespaced["kind"] = "TrainingRuntime"
    namespaced["metadata"]["namespace"] = "vision"
    assert trainjob(_trainjob("torch-distributed", "TrainingRuntime"), ClusterState([namespaced])) == []
    namespaced["metadata"]["namespace"] = "nlp"
    assert lines(trainjob(_trainjob("torch-distributed", "TrainingRuntime"), ClusterState([namespaced]))) == [
        "spec.runtimeRef: TrainingRuntime 'torch-distributed' not found: specified trainingRuntime must be created "
        "before the TrainJob is created"]
    assert lines(trainjob(_trainjob("torch-distributed", group="example.com"), ClusterState([namespaced]))) == [
        "unsupported runtime: ClusterTrainingRuntime.example.com"]


def test_every_torch_reserved_env_is_listed_sorted() -> None:
    env = [{"name": n} for n in ("PET_NODE_RANK", "OK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE",
                                 "PET_NNODES")]
    assert lines(trainjob(_trainjob("torch-distributed", env=env), ClusterState([rt.read("torch-distributed")]))) == [
        "spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_MASTER_PORT "
        "PET_NNODES PET_NODE_RANK PET_NPROC_PER_NODE]"]


def _flux_runtime(processes: int | None) -> dict[str, Any]:
    flux = rt.read("torch-distributed")
    flux["metadata"]["name"] = "flux-run"
    flux["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {} if processes is None else {"numProcPerNode": processes}}
    return flux


@pytest.mark.parametrize(("processes", "refused"), [(1, False), (None, False), (0, True), (-1, True)])
def test_flux_runs_at_least_one_process_per_node(processes: int | None, refused: bool) -> None:
    found = lines(trainjob(_trainjob("flux-run"), ClusterState([_flux_runtime(processes)])))
    assert found == ([f"spec.trainer.numProcPerNode: Invalid value: {processes}: must be greater than or equal to 1 "
                      "for Flux TrainJob"] if refused else [])


def test_a_runtime_patch_may_not_set_env_on_the_node_or_initializer_containers() -> None:
    tune = rt.read("torchtune-llama3.2-1b")
    def patched(job: str, container: str, key: str = "containers") -> dict[str, Any]:
        patch = {"manager": "example.com/team", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": job, "template": {"spec": {"template": {"spec": {
                key: [{"name": container, "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}
        obj = _trainjob("torchtune-llama3.2-1b")
        obj["spec"]["runtimePatches"] = [patch]
        return obj
    for job in ("node", "model-initializer", "dataset-initializer"):
        container = job
        assert lines(trainjob(patched(job, container), ClusterState([tune]))) == [
            "spec.runtimePatches: must not have envs for the dataset-initializer, model-initializer, node containers"]
    # the runtime info has the patches merged (trainingruntime.go newRuntimeInfo -> mergeRuntimePatches), so a
    # patch's own new container exists there; a job the runtime lacks does not
    assert trainjob(patched("node", "sidecar", "initContainers"), ClusterState([tune])) == []
    assert lines(trainjob(patched("launcher", "launcher"), ClusterState([tune]))) == [
        "spec.runtimePatches: must not have replicated job that doesn't exist in the runtime job template"]


@pytest.mark.parametrize(("manager", "problem"), [
    ("example.com/team", None), ("", "Required value"),  # apimachinery IsDomainPrefixedPath: field.Required
    ("team", 'must be a domain-prefixed path (such as "acme.io/foo")'),
    ("example.com/my team", INVALID_PATH), ("example.com/team\n", INVALID_PATH)])
def test_a_runtime_patch_manager_is_refused_in_upstreams_words(manager: str, problem: str | None) -> None:
    """jobset.go Validate: IsDomainPrefixedPath on each patch's manager (the CRD's minLength refuses an empty one
    first on a real server; the webhook's own answer is still upstream's)."""
    job = _trainjob("torch-distributed")
    job["spec"]["runtimePatches"] = [{"manager": manager}]
    found = lines(trainjob(job, ClusterState([rt.read("torch-distributed")])))
    assert found == ([f"spec.runtimePatches[0].manager: {problem}"] if problem else [])


@pytest.mark.parametrize(("resources", "single_device"), [
    ({"requests": {"nvidia.com/gpu": 1}}, True), ({"limits": {"nvidia.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": 0}, "limits": {"nvidia.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": "500m"}}, True), ({"requests": {"example.com/Big-GPU": 1}}, True),
    ({"requests": {"cpu": 1}, "limits": {"amd.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 1}}, False),
    ({"requests": {"nvidia.com/gpu": "1001m"}}, False), ({"requests": {"cpu": 1}}, False), ({}, False)])
def test_gpus_per_node_from_requests_else_limits_rounded_up(resources: dict[str, Any], single_device: bool) -> None:
    """runtime.go GetNumGPUPerNode: the first resource whose name contains "gpu" (any case) in the requests, else
    in the limits when the requests give 0, as Quantity.Value() rounds (up). One GPU selects the single-device
    QLoRA recipe (torchtune.go getRecipeAndConfig), which Llama 3.2 needs; none (0) does not."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"],
                    resourcesPerNode=resources)
    found = trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")]))
    assert (found == []) is single_device


def _tune_runtime(*jobs: tuple[str, dict[str, str], list[tuple[str, int | None]]]) -> dict[str, Any]:
    """A torchtune Llama 3.2 1B runtime of the given jobs: (name, labels, [(container, GPUs or None)])."""
    def container(name: str, count: int | None) -> dict[str, Any]:
        return {"name": name} if count is None else {"name": name, "resources": {"limits": {"nvidia.com/gpu": count}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torchtune-llama3.2-1b"}, "spec": {"mlPolicy": {"torch": {}}, "template": {"spec": {
                "replicatedJobs": [{"name": name, "template": {"metadata": {"labels": labels}, "spec": {"template": {
                    "spec": {"containers": [container(*c) for c in containers]}}}}}
                                   for name, labels, containers in jobs]}}}}


TRAINER_LABEL = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


@pytest.mark.parametrize(("jobs", "one_gpu"), [
    ([("node", {}, [("node", 1)])], True), ([("node", {}, [("node", 2)])], False),
    ([("trainer", TRAINER_LABEL, [("node", 1)])], True), ([("other", {}, [("node", 1)])], False),
    ([("node", {}, [("sidecar", 1), ("node", 2)])], False), ([("node", {}, [("node", None), ("node", 1)])], True),
    ([("trainer", TRAINER_LABEL, [("sidecar", 1)]), ("node", {}, [("node", 1)])], True),
    ([("trainer", {"trainer.kubeflow.org/trainjob-ancestor-step": "model-initializer"}, [("node", 1)])], False)])
def test_the_runtimes_gpus_are_its_trainer_jobs_node_container(jobs: list[Any], one_gpu: bool) -> None:
    """runtime.go ExtractResourcePerNodeFromRuntime, read when the TrainJob sets no resourcesPerNode: the first job
    named `node` or labelled as the trainer ancestor whose `node` container has resources. One GPU there selects the
    single-device QLoRA recipe Llama 3.2 needs; otherwise (none found: 0) QLoRA is refused on both fields."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"])
    found = trainjob(job, ClusterState([_tune_runtime(*jobs)]))
    assert lines(found) == ([] if one_gpu else [
        "spec.trainer.numProcPerNode: must be auto or 1 for llama3_2/1B model when using QLoRA",
        "spec.trainer.resourcesPerNode: must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"])


def test_an_initializer_job_needs_its_container_and_patches_add_to_what_was_found() -> None:
    """jobset.go Validate: a configured initializer's job must hold the container of its name; a runtime patch's
    manager is a domain-prefixed path, refused beside the other findings; env on an init container named like an
    ancestor container is not the env rule's business (it reads containers only)."""
    tune = rt.read("torchtune-llama3.2-1b")
    model_job = next(j for j in tune["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "model-initializer")
    model_job["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "fetch"
    job = _trainjob("torchtune-llama3.2-1b")
    job["spec"]["initializer"] = {"model": {"storageUri": "hf://m"}, "dataset": {"storageUri": "hf://d"}}
    job["spec"]["runtimePatches"] = [{"manager": "team", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"initContainers": [
            {"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}]
    assert lines(trainjob(job, ClusterState([tune]))) == [
        "spec.runtimeRef: must have container with name - model-initializer in the model-initializer job",
        "spec.runtimePatches[0].manager: must be a domain-prefixed path (such as \"acme.io/foo\")"]


def test_mpi_launcher_rule_needs_two_nodes_asked_for() -> None:
    """mpi.go Validate: numNodes (default 1) of at least 2 with runLauncherAsNode and no launcher job is refused."""
    runtime_ = rt.read("deepspeed-distributed")
    runtime_["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = True
    jobs = runtime_["spec"]["template"]["spec"]["replicatedJobs"]
    runtime_["spec"]["template"]["spec"]["replicatedJobs"] = [j for j in jobs if j["name"] != "launcher"]
    assert trainjob(_trainjob("deepspeed-distributed"), ClusterState([runtime_])) == []
    assert lines(trainjob(_trainjob("deepspeed-distributed", numNodes=2), ClusterState([runtime_]))) == [
        "spec.trainer.numNodes: must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have "
        "either launcher and node"]


def test_torch_refusals_accumulate() -> None:
    """torch.go Validate then validateTorchTune: the reserved envs, then the node count, then the QLoRA rules."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"], numNodes=2,
                    env=[{"name": "PET_NNODES"}], resourcesPerNode={"limits": {"nvidia.com/gpu": 2}})
    assert [line.split(":")[0] for line in lines(trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")])))] == [
        "spec.trainer.env", "spec.trainer.numNodes"]
    job["spec"]["trainer"]["numNodes"] = 1
    assert [line.split(":")[0] for line in lines(trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")])))] == [
        "spec.trainer.env", "spec.trainer.numProcPerNode", "spec.trainer.resourcesPerNode"]
