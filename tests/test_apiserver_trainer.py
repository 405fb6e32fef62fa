"""The Trainer 2.2.1 webhook rules offline, one test per rule, and the proof that every runtime a stack renders
(generic and per-pool variants) admits a TrainJob, torchtune runtimes one that runs `tune run`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import review, rules_for
from infra.apiserver.webhooks.trainer_v2_2 import torchtune_model
from infra.spec import runtimes as rt
from infra.spec.versions import Versions
from tests.conftest import STACKS, capture_of, kube_objects, platform_of
from tests.kueue_cluster import MANAGED

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
TRAINER = "trainer.kubeflow.org/v1alpha1"


def refusals(obj: dict[str, Any], *cluster: dict[str, Any]) -> list[str]:
    return [r.line() for r in review(obj, ClusterState([*MANAGED, *cluster, obj]), RULES)]


def trainjob(runtime: str, **trainer: Any) -> dict[str, Any]:
    return {"apiVersion": TRAINER, "kind": "TrainJob",
            "metadata": {"name": "job", "namespace": "vision", "labels": {"kueue.x-k8s.io/queue-name": "vision"}},
            "spec": {"runtimeRef": {"name": runtime}, **({"trainer": trainer} if trainer else {})}}


def runtime_named(name: str, source: str = "torch-distributed") -> dict[str, Any]:
    runtime = rt.read(source)
    runtime["metadata"]["name"] = name
    return runtime


def tune_run(runtime: dict[str, Any]) -> dict[str, Any]:
    """A TrainJob running the runtime's torchtune recipe (`tune run`), else the runtime's own command."""
    torchtune = runtime["metadata"].get("labels", {}).get(rt.FRAMEWORK_LABEL) == "torchtune"
    return trainjob(runtime["metadata"]["name"], **({"command": ["tune", "run"]} if torchtune else {}))


@pytest.mark.parametrize(("name", "model"), [("torchtune-llama3.2-1b", "llama3_2/1B"),
                                             ("torchtune.h100-llama3.2-1b", "llama3_2/1B"),
                                             ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
                                             ("torchtune-llama3.2-1b-h100", "")])
def test_torchtune_model_comes_from_a_three_part_runtime_name(name: str, model: str) -> None:
    assert torchtune_model(name) == model


def test_the_old_variant_name_is_refused_and_the_new_one_admitted() -> None:
    old = runtime_named("torchtune-llama3.2-1b-h100", "torchtune-llama3.2-1b")
    assert refusals(tune_run(old), old) == [
        "webhook:trainer: spec.runtimeRef.name: must have a supported pretrained model, invalid model configured: "]
    new = runtime_named(rt.variant_name(rt.read("torchtune-llama3.2-1b"), "h100"), "torchtune-llama3.2-1b")
    assert refusals(tune_run(new), new) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_runtime_of_every_stack_admits_a_trainjob(stack: str) -> None:
    runtimes = kube_objects(capture_of(stack), "ClusterTrainingRuntime")
    assert runtimes
    for runtime in runtimes:
        assert refusals(runtime, *runtimes) == [], runtime["metadata"]["name"]
        assert refusals(tune_run(runtime), *runtimes) == [], runtime["metadata"]["name"]
    assert platform_of(stack).runtimes  # the rendered set is the stack's


def test_a_trainjob_needs_an_existing_runtime_of_a_registered_kind() -> None:
    runtime = rt.read("torch-distributed")
    assert refusals(trainjob("torch-distributed"), runtime) == []
    assert refusals(trainjob("torch-distributd"), runtime) == [
        "webhook:trainer: spec.runtimeRef: ClusterTrainingRuntime 'torch-distributd' not found: specified "
        "clusterTrainingRuntime must be created before the TrainJob is created"]
    other = trainjob("torch-distributed")
    other["spec"]["runtimeRef"]["kind"] = "Deployment"
    assert refusals(other, runtime) == ["webhook:trainer: unsupported runtime: Deployment.trainer.kubeflow.org"]


def test_torch_reserved_env_and_torchtune_single_node() -> None:
    runtime = rt.read("torch-distributed")
    assert refusals(trainjob("torch-distributed", env=[{"name": "PET_NNODES", "value": "2"}]), runtime) == [
        "webhook:trainer: spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_NNODES]"]
    tune = rt.read("torchtune-llama3.2-1b")
    assert refusals(trainjob("torchtune-llama3.2-1b", command=["tune", "run"], numNodes=1), tune) == []
    assert refusals(trainjob("torchtune-llama3.2-1b", command=["tune", "run"], numNodes=2), tune) == [
        "webhook:trainer: spec.trainer.numNodes: must be 1 for llama3_2/1B model"]


def test_xgboost_reserved_env() -> None:
    runtime = rt.read("xgboost-distributed")
    assert refusals(trainjob("xgboost-distributed", env=[{"name": "DMLC_TASK_ID", "value": "0"}]), runtime) == [
        "webhook:trainer: spec.trainer.env[0]: DMLC_TASK_ID is reserved for the XGBoost runtime"]
    assert refusals(trainjob("xgboost-distributed", env=[{"name": "OTHER", "value": "0"}]), runtime) == []


def test_mpi_launcher_as_node_needs_launcher_and_node_jobs() -> None:
    runtime = rt.read("deepspeed-distributed")
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = True
    assert refusals(trainjob("deepspeed-distributed", numNodes=2), runtime) == []
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = [j for j in jobs if j["name"] != "launcher"]
    assert refusals(trainjob("deepspeed-distributed", numNodes=2), runtime) == [
        "webhook:trainer: spec.trainer.numNodes: must have 1 when MPI trainingRuntime with enabled runLauncherAsNode "
        "does not have either launcher and node"]
    assert refusals(trainjob("deepspeed-distributed", numNodes=1), runtime) == []


def test_runtime_ancestor_jobs_have_one_replica_and_their_container() -> None:
    runtime = rt.read("torchtune-llama3.2-1b")
    assert refusals(runtime) == []
    broken = copy.deepcopy(runtime)
    jobs = broken["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["replicas"] = 2
    jobs[1]["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "init"
    assert refusals(broken) == [
        "webhook:trainer: spec.template.spec.replicatedJobs[0].replicas: always must be 1",
        "webhook:trainer: spec.template.spec.replicatedJobs[1].template.spec.template.spec.containers: must contain "
        "the required container for the ancestor: model-initializer"]


def test_initializers_and_runtime_patches_name_what_the_runtime_has() -> None:
    torch, tune = rt.read("torch-distributed"), rt.read("torchtune-llama3.2-1b")
    job = trainjob("torch-distributed")
    job["spec"]["initializer"] = {"model": {"storageUri": "hf://m"}}
    assert refusals(job, torch) == ["webhook:trainer: spec.runtimeRef: must have model-initializer job when trainJob "
                                    "is configured with input modelConfig"]
    job["spec"]["runtimeRef"]["name"] = "torchtune-llama3.2-1b"
    assert refusals(job, tune) == []
    node = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}
    patch: dict[str, Any] = {"manager": "example.com/team",
                             "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}
    patched = trainjob("torch-distributed")
    patched["spec"]["runtimePatches"] = [patch]
    assert refusals(patched, torch) == []
    node["name"] = "workers"
    patch["manager"] = "team"
    assert len(refusals(patched, torch)) == 2
