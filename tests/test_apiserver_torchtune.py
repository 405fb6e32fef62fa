"""Trainer 2.2.1's torchtune recipe rules offline (plugins/torch/torchtune.go validateTorchTune): QLoRA is refused
for Qwen2.5 1.5B, and for the Llama 3.2 models it must run on one device (one process or one GPU per node). The
recipe is chosen from the TrainJob's arguments, its numProcPerNode and the GPUs of its resourcesPerNode or, when
unset, of the runtime's node container after the TrainJob's runtime patches."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import review, rules_for
from infra.apiserver.webhooks.trainer_v2_2 import torchtune_config
from infra.spec import runtimes as rt
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
QLORA = ["model.quantize_base=True"]
LORA = ["model.lora_attn_modules=[q_proj,v_proj]"]
QLORA_1B = ["webhook:trainer: spec.trainer.numProcPerNode: must be auto or 1 for llama3_2/1B model when using QLoRA",
            "webhook:trainer: spec.trainer.resourcesPerNode: must have gpu resource with value 1 for llama3_2/1B model "
            "when using QLoRA"]


def tune(runtime: str, **trainer: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tune", "namespace": "vision"},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"command": ["tune", "run"], **trainer}}}


def refusals(job: dict[str, Any]) -> list[str]:
    runtime = rt.read(job["spec"]["runtimeRef"]["name"])
    state = ClusterState([*MANAGED, runtime, job])
    return [r.line() for r in review(job, state, RULES) if r.family == "webhook:trainer"]


def gpus(count: int) -> dict[str, Any]:
    return {"limits": {"nvidia.com/gpu": count}}


@pytest.mark.parametrize(("trainer", "gpu_count", "config"), [
    ({}, 2, "llama3_2/1B_full"),
    ({}, 1, "llama3_2/1B_full_single_device"),
    ({"numProcPerNode": 1}, 8, "llama3_2/1B_full_single_device"),
    ({"args": QLORA}, 2, "llama3_2/1B_qlora"),
    ({"args": QLORA}, 1, "llama3_2/1B_qlora_single_device"),
    ({"args": [*QLORA, "model.use_dora=True"]}, 2, "llama3_2/1B_full"),  # DoRA turns QLoRA off
    ({"args": LORA}, 2, "llama3_2/1B_lora"),
    ({"args": [*LORA, *QLORA]}, 2, "llama3_2/1B_qlora"),
    ({"args": QLORA, "numNodes": 2}, 2, "llama3_2/1B_full_multinode"),
])
def test_the_recipe_config_follows_nodes_processes_gpus_and_arguments(trainer: dict[str, Any], gpu_count: int,
                                                                       config: str) -> None:
    assert torchtune_config("llama3_2/1B", trainer, gpu_count) == config


def test_qlora_on_llama_3_2_needs_a_single_device() -> None:
    # the runtime's node container asks 2 GPUs: distributed QLoRA is refused on both fields
    assert refusals(tune("torchtune-llama3.2-1b", args=QLORA)) == QLORA_1B
    # one process per node, or one GPU from the TrainJob, selects the single-device QLoRA recipe
    assert refusals(tune("torchtune-llama3.2-1b", args=QLORA, numProcPerNode=1)) == []
    assert refusals(tune("torchtune-llama3.2-1b", args=QLORA, resourcesPerNode=gpus(1))) == []
    assert refusals(tune("torchtune-llama3.2-1b", args=QLORA, resourcesPerNode=gpus(2))) == QLORA_1B
    # without QLoRA, or with DoRA, the same two GPUs are fine
    assert refusals(tune("torchtune-llama3.2-1b")) == []
    assert refusals(tune("torchtune-llama3.2-1b", args=[*QLORA, "model.use_dora=True"])) == []
    assert refusals(tune("torchtune-llama3.2-3b", args=QLORA)) == [line.replace("1B", "3B") for line in QLORA_1B]


def test_qlora_is_refused_for_qwen_2_5() -> None:
    refused = ["webhook:trainer: spec.runtimeRef.name: QLoRA is not supported for qwen2_5/1.5B model"]
    assert refusals(tune("torchtune-qwen2.5-1.5b", args=QLORA)) == refused
    assert refusals(tune("torchtune-qwen2.5-1.5b", args=QLORA, numProcPerNode=1)) == refused
    assert refusals(tune("torchtune-qwen2.5-1.5b", args=LORA)) == []


def test_the_gpus_come_from_the_runtime_after_the_trainjobs_patches() -> None:
    job = tune("torchtune-llama3.2-1b", args=QLORA)
    node: dict[str, Any] = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "node", "resources": gpus(1)}]}}}}}
    job["spec"]["runtimePatches"] = [{"manager": "example.com/team", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [node]}}}}]
    assert refusals(job) == []
    node["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = gpus(4)
    assert refusals(job) == QLORA_1B
