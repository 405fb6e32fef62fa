"""A TrainJob's Jobs as Trainer 2.2.1 and the JobSet controller create them (kubeflow/trainer v2.2.1
pkg/runtime/framework/plugins/jobset/builder.go, trainingruntime.go mergeRuntimePatches), judged by the API
server's Job rules: refused at the TrainJob field that brings the refusal, admitted when the Jobs are valid, on
every shipped runtime; and through `trainyard admit`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.core_rules import template_problems
from infra.apiserver.core_rules.trainjobs import trainjob_problems
from infra.commands import main
from infra.spec import runtimes as rt
from tests.conftest import CRDS, ROOT

RUNTIMES = {name: rt.read(name) for name in rt.available()}
GPU_LIMIT = "spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non " \
    "overcommitable resources"


def lookup(kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    return RUNTIMES.get(name) if kind == "ClusterTrainingRuntime" else None


def trainjob(runtime: str = "torch-distributed", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimeRef": {"name": runtime}, **spec}}


def gpus(requests: str | None, limits: str | None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    resources |= {"requests": {"cpu": "8", "nvidia.com/gpu": requests}} if requests else {}
    resources |= {"limits": {"nvidia.com/gpu": limits}} if limits else {}
    return {"resourcesPerNode": resources}


def node_patch(**pod: Any) -> list[dict[str, Any]]:
    job = {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}
    return [{"manager": "someone", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}]


@pytest.mark.parametrize(("requests", "limits"), [("8", "8"), (None, "8"), ("1", "1")])
def test_gpu_requests_equal_to_limits_or_limits_alone_are_admitted(requests: str | None, limits: str | None) -> None:
    assert trainjob_problems(trainjob(trainer=gpus(requests, limits)), lookup) == []


def test_gpu_requests_without_limits_are_refused_at_resources_per_node() -> None:
    assert trainjob_problems(trainjob(trainer=gpus("8", None)), lookup) == [
        "spec.trainer.resourcesPerNode: the 'node' Jobs the JobSet controller creates for this TrainJob would be "
        f"refused: {GPU_LIMIT}"]


@pytest.mark.parametrize(("requests", "limits"), [("8", "7"), ("7", "8")])
def test_gpu_requests_unequal_to_limits_are_refused(requests: str, limits: str) -> None:
    assert trainjob_problems(trainjob(trainer=gpus(requests, limits)), lookup) == [
        "spec.trainer.resourcesPerNode: the 'node' Jobs the JobSet controller creates for this TrainJob would be "
        f'refused: spec.template.spec.containers[0].resources.requests: Invalid value: "{requests}": must be equal to '
        f"nvidia.com/gpu limit of {limits}"]


def test_resources_per_node_replace_the_runtimes_resources_whole() -> None:
    """The runtime's GPU limit does not pair with the TrainJob's request: Trainer replaces the resources."""
    runtime = copy.deepcopy(RUNTIMES["torch-distributed"])
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    found = trainjob_problems(trainjob(trainer=gpus("8", None)), lambda *_: runtime)
    assert [p.rpartition(" refused: ")[2] for p in found] == [GPU_LIMIT]


def test_a_patch_adding_a_container_with_a_long_port_name_and_a_mount_of_no_volume_is_refused() -> None:
    sidecar: dict[str, Any] = {"name": "metrics", "image": "nvcr.io/nvidia/dcgm:4", "ports": [
        {"name": "a" * 16, "containerPort": 9400}], "volumeMounts": [{"name": "nothing", "mountPath": "/x"}]}
    job = trainjob(runtimePatches=node_patch(containers=[sidecar]))
    found = trainjob_problems(job, lookup)
    prefix = "spec.runtimePatches: the 'node' Jobs the JobSet controller creates for this TrainJob would be refused: "
    assert [p.removeprefix(prefix) for p in found] == [
        'spec.template.spec.containers[1].ports[0].name: Invalid value: "aaaaaaaaaaaaaaaa": must be no more than '
        "15 characters",
        'spec.template.spec.containers[1].volumeMounts[0].name: Not found: "nothing"'], found
    sidecar["ports"][0]["name"] = "a" * 15  # at the limit
    sidecar["volumeMounts"] = []
    assert trainjob_problems(job, lookup) == []


def test_an_empty_image_override_is_refused_at_the_image() -> None:
    assert trainjob_problems(trainjob(trainer={"image": ""}), lookup) == [
        "spec.trainer.image: the 'node' Jobs the JobSet controller creates for this TrainJob would be refused: "
        "spec.template.spec.containers[0].image: Required value"]


def _valid(runtime: str) -> dict[str, Any]:
    """What a user sets on the runtime: every override that reaches the pods, valid."""
    gpu = not rt.cpu_only(RUNTIMES[runtime])
    resources: dict[str, dict[str, str]] = {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"memory": "64Gi"}}
    if gpu:
        resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = "2"
    trainer = {"image": "nvcr.io/nvidia/pytorch:25.08-py3", "args": ["--epochs", "3"], "env": [{"name": "X",
               "value": "1"}], "resourcesPerNode": resources}
    spec: dict[str, Any] = {"trainer": trainer, "runtimePatches": node_patch(
        volumes=[{"name": "data", "emptyDir": {}}], containers=[{"name": "node", "volumeMounts": [
            {"name": "data", "mountPath": "/data"}]}])}
    if runtime.startswith("torchtune"):
        spec["initializer"] = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "Y", "value": "2"}]},
                               "model": {"storageUri": "hf://meta-llama/x", "secretRef": {"name": "hf-token"}}}
    return trainjob(runtime, **spec)


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_a_valid_trainjob_on_each_shipped_runtime_is_admitted(runtime: str) -> None:
    assert trainjob_problems(_valid(runtime), lookup) == []
    broken = _valid(runtime)
    broken["spec"]["trainer"]["resourcesPerNode"]["requests"]["example.com/fpga"] = "1"  # an extended one, no limit
    found = trainjob_problems(broken, lookup)  # an MPI launcher that runs as a node gets the resources too
    assert found and {p.partition(":")[0] for p in found} == {"spec.trainer.resourcesPerNode"}, found


def test_a_trainjob_whose_runtime_is_unknown_or_foreign_is_left_to_the_trainer_webhook() -> None:
    assert trainjob_problems(trainjob("nowhere", trainer=gpus("8", None)), lookup) == []
    job = trainjob(trainer=gpus("8", None))
    job["spec"]["runtimeRef"] |= {"apiGroup": "example.com"}
    assert trainjob_problems(job, lookup) == []
    assert template_problems(trainjob(trainer=gpus("8", None))) == []  # no cluster state: nothing known


@pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run
def test_admit_refuses_a_trainjob_whose_jobs_would_be_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    example = yaml.safe_load((ROOT / "examples" / "torch-distributed" / "trainjob.yaml").read_text(encoding="utf-8"))
    del example["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"]
    path = tmp_path / "trainjob.yaml"
    path.write_text(yaml.safe_dump(example), encoding="utf-8")
    assert main(["admit", "onprem-lab", str(path), "--crds", str(CRDS)]) != 0
    out = capsys.readouterr().out
    assert "refused TrainJob/vision/resnet-imagenet: schema: spec.trainer.resourcesPerNode: the 'node' Jobs the " \
        f"JobSet controller creates for this TrainJob would be refused: {GPU_LIMIT}" in out, out


@pytest.mark.usefixtures("repo_runs")
def test_a_trainjob_whose_jobs_would_be_refused_still_gets_its_own_verdicts(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The API server admits or refuses the TrainJob itself whatever its Jobs will be: its own refusals (here: no
    LocalQueue named) are given beside those of its Jobs, not hidden behind them."""
    example = yaml.safe_load((ROOT / "examples" / "torch-distributed" / "trainjob.yaml").read_text(encoding="utf-8"))
    del example["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"]
    del example["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    path = tmp_path / "trainjob.yaml"
    path.write_text(yaml.safe_dump(example), encoding="utf-8")
    assert main(["admit", "onprem-lab", str(path), "--crds", str(CRDS)]) != 0
    refused = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("refused TrainJob/vision/resnet-imagenet: ")]
    assert any("resourcesPerNode" in line for line in refused), refused
    assert any("schema:" not in line and "queue" in line for line in refused), refused
