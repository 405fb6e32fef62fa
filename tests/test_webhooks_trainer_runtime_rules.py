"""Trainer 2.2.1's runtime and TrainJob webhooks on the edges the schema leaves open, from the upstream source
(kubeflow/trainer v2.2.1): `pkg/webhooks/trainingruntime_webhook.go` validateReplicatedJobs (every replicated job
looked at, whatever comes before it), `pkg/runtime/runtime.go` ExtractResourcePerNodeFromRuntime and
`plugins/torch/torchtune.go` getRecipeAndConfig (every config suffix), and `plugins/jobset/jobset.go` Validate
(both initializers, every job of a runtime patch). The CRDs (trainer/v2.2) leave a runtime's `spec`, a replicated
job's job spec, a pod template's spec and a runtime patch's templates optional: where one is left out, the zero
value decides, as in Go, and the webhook never fails on it."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.apiserver.webhooks.trainer_v2_2 import runtime, torchtune_config, trainjob
from infra.spec import runtimes as rt

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
STATE = ClusterState([])
TUNE = "torchtune-llama3.2-1b"
QLORA_REFUSED = [
    "spec.trainer.numProcPerNode: must be auto or 1 for llama3_2/1B model when using QLoRA",
    "spec.trainer.resourcesPerNode: must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"]


def lines(found: list[Refusal]) -> list[str]:
    return [f"{r.field}: {r.message}" for r in found]


def _runtime(*jobs: dict[str, Any], name: str = "rt", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name}, "spec": {**spec, "template": {"spec": {"replicatedJobs": list(jobs)}}}}


def _labelled(name: str, ancestor: str | None, template: dict[str, Any]) -> dict[str, Any]:
    labels = {} if ancestor is None else {"metadata": {"labels": {ANCESTOR: ancestor}}}
    return {"name": name, "replicas": 1, "template": {**labels, **template}}


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


def _trainjob(runtime_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimeRef": {"name": runtime_name}, **spec}}


# --- the runtime webhook --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("before", [
    _labelled("a", None, _pod({"name": "c"})), _labelled("a", "launcher", _pod({"name": "c"})),
    {"name": "a", "replicas": 3, "template": {"metadata": {"labels": {"other": "x"}}}}])
def test_every_ancestor_job_is_checked_after_a_job_of_no_known_ancestor(before: dict[str, Any]) -> None:
    """validateReplicatedJobs goes on to the next job (`continue`) past one without labels or of another ancestor."""
    bad = _labelled("trainer", "trainer", _pod({"name": "sidecar"}))
    assert lines(runtime(_runtime(before, bad), STATE)) == [
        "spec.template.spec.replicatedJobs[1].template.spec.template.spec.containers: must contain the required "
        "container for the ancestor: trainer"]
    assert runtime(_runtime(before, _labelled("trainer", "trainer", _pod({"name": "node"}))), STATE) == []


@pytest.mark.parametrize("ancestor", ["trainer", "model-initializer", "dataset-initializer"])
@pytest.mark.parametrize("template", [{}, {"spec": {"template": {}}}, {"spec": {"template": {"metadata": {}}}}])
def test_an_ancestor_job_without_a_job_or_pod_spec_has_no_container(ancestor: str,
                                                                    template: dict[str, Any]) -> None:
    """A job spec and a pod template's spec are optional in the runtime CRD; left out, the job has no containers,
    so it lacks the one its ancestor needs (and its replicas still default to 1)."""
    assert lines(runtime(_runtime(_labelled("j", ancestor, template)), STATE)) == [
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: must contain the required "
        f"container for the ancestor: {ancestor}"]


# --- torchtune: the GPUs of the runtime's node container, the config suffixes -----------------------------------------

def _one_gpu_trainer() -> dict[str, Any]:
    return _labelled("trainer", "trainer", _pod({"name": "node", "resources": {"limits": {"nvidia.com/gpu": 1}}}))


@pytest.mark.parametrize("sparse", [
    {"name": "node", "template": {}}, {"name": "node", "template": {"metadata": {}}},
    {"name": "launcher", "template": {"metadata": {}}},
    {"name": "node", "template": {"metadata": {"labels": {}}, "spec": {"template": {}}}},
    {"name": "node", "template": {"spec": {"template": {"metadata": {}}}}},
    {"name": "node", "template": _pod({"name": "node"})}])
def test_a_job_without_metadata_a_job_pod_or_resources_gives_no_gpus(sparse: dict[str, Any]) -> None:
    """ExtractResourcePerNodeFromRuntime reads every job's labels (metadata and labels optional: Go reads a nil
    map) and, of a job named `node` or labelled as the trainer, the first `node` container with resources (job spec
    and pod spec optional). A job without one is passed over: alone, no GPU is found (QLoRA on Llama 3.2 1B then
    needs one process or one GPU and is refused); before a trainer job with one GPU, that GPU selects the
    single-device recipe."""
    job = _trainjob(TUNE, trainer={"command": ["tune", "run"], "args": ["model.quantize_base=True"]})
    torch: dict[str, Any] = {"mlPolicy": {"torch": {}}}
    assert lines(trainjob(job, ClusterState([_runtime(sparse, name=TUNE, **torch)]))) == QLORA_REFUSED
    assert trainjob(job, ClusterState([_runtime(sparse, _one_gpu_trainer(), name=TUNE, **torch)])) == []


QLORA, LORA, DORA = "model.quantize_base=True", "model.lora_attn_modules=[q_proj,v_proj]", "model.use_dora=True"


@pytest.mark.parametrize(("trainer", "gpus", "suffix"), [
    ({"numProcPerNode": 1}, 0, "_full_single_device"), ({}, 1, "_full_single_device"),
    ({"args": [LORA]}, 1, "_lora_single_device"), ({"args": [LORA], "numProcPerNode": 1}, 4, "_lora_single_device"),
    ({"args": [QLORA, LORA]}, 1, "_qlora_single_device"), ({"args": [DORA, QLORA, LORA]}, 1, "_lora_single_device"),
    ({"args": [DORA, QLORA]}, 1, "_full_single_device"),
    ({}, 2, "_full"), ({"args": [LORA]}, 2, "_lora"), ({"args": [QLORA]}, 0, "_qlora"),
    ({"args": [QLORA, DORA, LORA]}, 2, "_lora"), ({"args": None}, 2, "_full"),
    ({"numNodes": 2, "args": [QLORA]}, 1, "_full_multinode"), ({"numNodes": 2, "numProcPerNode": 1}, 1,
                                                              "_full_multinode")])
def test_the_torchtune_config_suffix(trainer: dict[str, Any], gpus: int, suffix: str) -> None:
    """getRecipeAndConfig: one node with one process or one GPU runs a single-device recipe, QLoRA before LoRA
    before full; one node otherwise the distributed one; several nodes the full multi-node config. QLoRA is
    `model.quantize_base` without `model.use_dora`; LoRA is `model.lora_attn_modules`."""
    assert torchtune_config("llama3_2/1B", trainer, gpus) == "llama3_2/1B" + suffix


# --- the JobSet plugin ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("initializer", "expected"), [
    ({"dataset": {}}, ["dataset"]), ({"model": {}}, ["model"]), ({"dataset": {}, "model": {}}, ["dataset", "model"]),
    ({}, [])])
def test_each_initializer_needs_its_job_even_on_a_runtime_without_spec(initializer: dict[str, Any],
                                                                       expected: list[str]) -> None:
    """jobset.go Validate: a dataset, then a model, initializer needs a job of its name in the runtime. A runtime's
    spec is optional in its CRD: one without has no jobs, and no ML policy for the other plugins to check."""
    bare = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "rt"}}
    job = _trainjob("rt", initializer=initializer, trainer={"command": ["tune", "run"], "numNodes": 3})
    assert lines(trainjob(job, ClusterState([bare]))) == [
        f"spec.runtimeRef: must have {part}-initializer job when trainJob is configured with input {part}Config"
        for part in expected]


def _patched(*patches: list[dict[str, Any]]) -> dict[str, Any]:
    """A TrainJob on the torchtune runtime with one runtime patch (of its own manager) per list of job patches."""
    return _trainjob(TUNE, runtimePatches=[
        {"manager": f"example.com/m{i}", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        for i, jobs in enumerate(patches)])


ENV_ON_NODE = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
    {"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}
NO_JOB = "spec.runtimePatches: must not have replicated job that doesn't exist in the runtime job template"
NO_ENV = "spec.runtimePatches: must not have envs for the dataset-initializer, model-initializer, node containers"


def test_every_job_of_a_patch_is_checked_after_one_the_runtime_lacks() -> None:
    """jobset.go Validate goes on to the patch's next job (`continue`) after refusing one the runtime lacks."""
    assert lines(trainjob(_patched([{"name": "launcher"}, ENV_ON_NODE]), ClusterState([rt.read(TUNE)]))) == [
        NO_JOB, NO_ENV]
    assert lines(trainjob(_patched([{"name": "launcher"}], [ENV_ON_NODE]), ClusterState([rt.read(TUNE)]))) == [
        NO_JOB, NO_ENV]


@pytest.mark.parametrize("job_patch", [
    {"name": "node"}, {"name": "node", "template": {}}, {"name": "node", "template": {"metadata": {"labels": {}}}},
    {"name": "node", "template": {"spec": {}}}, {"name": "node", "template": {"spec": {"template": {}}}},
    {"name": "node", "template": {"spec": {"template": {"metadata": {}}}}}])
def test_a_patch_without_a_job_or_pod_template_names_no_container(job_patch: dict[str, Any]) -> None:
    """A patch's job template, job spec, pod template and pod spec are all optional in the TrainJob CRD; where one is
    left out the patch names no container (jobset.go skips it), so there is nothing to refuse; the patch's other
    jobs are still checked."""
    tune = ClusterState([rt.read(TUNE)])
    assert trainjob(_patched([job_patch]), tune) == []
    env_on_model = {"name": "model-initializer", "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "model-initializer", "env": [{"name": "A", "value": "1"}]}]}}}}}
    assert lines(trainjob(_patched([job_patch, env_on_model]), tune)) == [NO_ENV]
