"""examples/pipelines/: the KFP pipeline that trains through a TrainJob.

- The committed train_pipeline.yaml is what the source compiles to now (the KFP SDK 2.16.0 of the pipeline's own
  environment recompiles it), and a changed source is noticed.
- The compiled pipeline keeps its promises: its step pods ask for no GPU and run non-root; the GPU work goes through
  the TrainJob; the dataset version, the parameters and the code identity reach the run's record.
- The TrainJob the train step submits (trainjob.yaml, the step's own builder) is admitted by `trainyard admit` on every
  stack in its team's queue, and refused without a queue label, in another team's queue and for a resource its
  queue has no quota for.
- The steps themselves (standard library): the dataset version, the sensor that skips unchanged data, the split,
  the quality gate at its edge.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

from infra.apiserver.admit import answer
from infra.apiserver.schema import CrdIndex, check_custom
from infra.spec import runtimes as rt
from tests.conftest import ALL_STACKS, ROOT, capture_of, kube_objects, platform_of
from tests.pipelines import example_module
from tests.test_runtimes import restricted_problems

HERE = ROOT / "examples" / "pipelines"
COMPILED = HERE / "train_pipeline.yaml"
SOURCES = ("train_pipeline.py", "steps.py", "train.py", "register.py")  # what the compiled pipeline is made of
STACK = "onprem-lab"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def sdk_python() -> Path:
    """The KFP SDK environment .venv-pipelines (examples/pipelines/pyproject.toml, synced by `make install`): this
    tree's, else the one beside the interpreter running the tests (a worktree tested with another checkout's .venv)."""
    for root in (ROOT, Path(sys.prefix).parent):
        python = root / ".venv-pipelines" / "bin" / "python"
        if python.exists():
            return python
    pytest.fail("no KFP SDK environment .venv-pipelines: run `make install`")


def compile_source(source_dir: Path, out: Path) -> str:
    done = subprocess.run([str(sdk_python()), str(source_dir / "train_pipeline.py"), str(out)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_text(encoding="utf-8")


def steps() -> ModuleType:
    return example_module("steps.py")


@cache
def compiled() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pipeline spec, platform spec) of the committed YAML."""
    spec, platform = yaml.safe_load_all(COMPILED.read_text(encoding="utf-8"))
    return spec, platform


def executors() -> dict[str, dict[str, Any]]:
    return {name: e["container"] for name, e in compiled()[0]["deploymentSpec"]["executors"].items()}


def argument(container: dict[str, Any], flag: str) -> str:
    args = container["args"]
    return str(args[args.index(flag) + 1])


# ---- the compiled YAML is current -----------------------------------------------------------------------------------

def test_the_committed_yaml_is_what_the_source_compiles_to(tmp_path: Path) -> None:
    fresh = compile_source(HERE, tmp_path / "fresh.yaml")
    committed = COMPILED.read_text(encoding="utf-8")
    diff = list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "committed", "compiled", lineterm=""))
    assert not diff, ("examples/pipelines/train_pipeline.yaml is stale: run .venv-pipelines/bin/python "
                      "examples/pipelines/train_pipeline.py\n" + "\n".join(diff[:40]))


def test_a_changed_source_makes_the_committed_yaml_stale(tmp_path: Path) -> None:
    """The comparison above sees a one-character change of a default (and so of the source hash)."""
    for name in SOURCES:
        (tmp_path / name).write_text((HERE / name).read_text(encoding="utf-8"), encoding="utf-8")
    source = tmp_path / "train_pipeline.py"
    source.write_text(source.read_text(encoding="utf-8").replace("min_accuracy: float = 0.8",
                                                                  "min_accuracy: float = 0.9"), encoding="utf-8")
    fresh = yaml.safe_load_all(compile_source(tmp_path, tmp_path / "mutant.yaml"))
    spec = next(iter(fresh))
    assert spec["root"]["inputDefinitions"]["parameters"]["min_accuracy"]["defaultValue"] == 0.9
    assert spec != compiled()[0]


# ---- what the compiled pipeline promises ----------------------------------------------------------------------------

def test_the_graph_is_sensor_then_prepare_train_evaluate_then_the_gated_release() -> None:
    spec = compiled()[0]
    root = spec["root"]["dag"]["tasks"]
    assert set(root) == {"check-dataset", "condition-1"}
    assert root["condition-1"]["triggerPolicy"]["condition"] == \
        "inputs.parameter_values['pipelinechannel--check-dataset-changed'] == 'true'"
    inner = spec["components"]["comp-condition-1"]["dag"]["tasks"]
    assert set(inner) == {"prepare", "train", "evaluate", "condition-2"}
    assert inner["train"]["dependentTasks"] == ["prepare"]
    assert inner["train"]["inputs"]["artifacts"]["train_data"]["taskOutputArtifact"]["producerTask"] == "prepare"
    assert inner["condition-2"]["triggerPolicy"]["condition"] == \
        "inputs.parameter_values['pipelinechannel--evaluate-passed'] == 'true'"
    assert set(spec["components"]["comp-condition-2"]["dag"]["tasks"]) == {"release", "register"}
    assert {t: inner[t].get("retryPolicy", {}).get("maxRetryCount") for t in ("prepare", "train")} == \
        {"prepare": 2, "train": 2}
    # what reads mutable storage is never served from KFP's cache
    assert root["check-dataset"]["cachingOptions"] == {} and inner["prepare"]["cachingOptions"] == {} \
        and inner["train"]["cachingOptions"] == {}


def test_no_step_pod_asks_for_a_gpu_and_every_one_is_restricted_with_quota_requests() -> None:
    """Kueue's pod integration is off: a GPU in a step's own pod would bypass the queue. The GPU goes in the
    TrainJob. PSA restricted needs runAsNonRoot from us (KFP's compiler adds seccomp and drops capabilities)."""
    platform = compiled()[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(platform) == set(executors()) and len(executors()) == 6
    for name, container in executors().items():
        resources = container["resources"]
        assert "accelerator" not in resources and "gpu" not in json.dumps(resources).lower(), name
        assert {"resourceCpuRequest", "resourceCpuLimit", "resourceMemoryRequest", "resourceMemoryLimit"} <= \
            set(resources), name
        assert platform[name]["securityContext"] == {"runAsNonRoot": True, "runAsUser": "1000", "runAsGroup": "1000"}
    assert "sidecar.istio.io" not in COMPILED.read_text(encoding="utf-8")


def test_every_step_runs_the_committed_steps_program_in_the_pinned_python_image() -> None:
    cpu_batch = yaml.safe_load((ROOT / "runtimes" / "cpu-batch.yaml").read_text(encoding="utf-8"))
    runtime_image = next(c["image"] for pod in rt.pod_specs(cpu_batch) for c in pod["containers"])
    program = (HERE / "steps.py").read_text(encoding="utf-8")
    for name, container in executors().items():
        assert container["image"] == runtime_image, name  # an image every stack already pins and mirrors
        source = "register.py" if name == "exec-register" else "steps.py"
        assert container["command"] == ["python3", "-c", (HERE / source).read_text(encoding="utf-8")], name
    assert executors()["exec-train"]["command"][2] == program
    assert argument(executors()["exec-train"], "--script") == (HERE / "train.py").read_text(encoding="utf-8")


def test_the_team_volumes_the_steps_mount_are_the_stacks() -> None:
    claims = {m["constant"] for e in compiled()[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
              for m in e.get("pvcMount", [])}
    assert claims == {steps().DATASETS_CLAIM, steps().WORK_CLAIM}
    for stack in ALL_STACKS:
        platform = platform_of(stack)
        rendered = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
                    for o in kube_objects(capture_of(stack))}
        for team in platform.teams:
            for claim in claims:
                assert ("PersistentVolumeClaim", team.namespaces[0], claim) in rendered, (stack, team.name, claim)


def test_the_run_records_dataset_version_parameters_and_code_identity() -> None:
    spec = compiled()[0]
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    assert "defaultValue" not in inputs["git_commit"] and "defaultValue" not in inputs["queue"]  # the submitter's
    train, release = executors()["exec-train"], executors()["exec-release"]
    sources = b"".join((HERE / n).read_bytes() for n in SOURCES)
    for container in (train, release):
        assert argument(container, "--source-sha256") == hashlib.sha256(sources).hexdigest()
        assert argument(container, "--git-commit") == "{{$.inputs.parameters['git_commit']}}"
        assert argument(container, "--dataset-version") == "{{$.inputs.parameters['dataset_version']}}"
        assert argument(container, "--executor-output") == "{{$.outputs.output_file}}"  # artifact metadata
    inner = spec["components"]["comp-condition-1"]["dag"]["tasks"]
    assert inner["train"]["inputs"]["parameters"]["dataset_version"]["taskOutputParameter"] == \
        {"outputParameterKey": "dataset_version", "producerTask": "prepare"}
    outputs = {name: set(c.get("outputDefinitions", {}).get("artifacts", {}))
               for name, c in spec["components"].items() if name.startswith("comp-") and "executorLabel" in c}
    assert outputs["comp-train"] == {"model"} and outputs["comp-evaluate"] == {"metrics"} and \
        outputs["comp-release"] == {"lineage"} and outputs["comp-register"] == {"registration"}
    assert spec["components"]["comp-evaluate"]["outputDefinitions"]["artifacts"]["metrics"]["artifactType"][
        "schemaTitle"] == "system.Metrics"


def test_the_pipeline_defaults_are_the_rendered_trainjobs() -> None:
    defaults = {k: v.get("defaultValue") for k, v in compiled()[0]["root"]["inputDefinitions"]["parameters"].items()}
    job = steps().example_trainjob()
    trainer, command = job["spec"]["trainer"], job["spec"]["trainer"]["command"]
    assert job["spec"]["runtimeRef"]["name"] == defaults["runtime"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == defaults["priority"]
    assert trainer["numNodes"] == defaults["nodes"]
    assert trainer["resourcesPerNode"]["requests"] == {"cpu": defaults["cpu_per_node"],
                                                       "memory": defaults["memory_per_node"],
                                                       "nvidia.com/gpu": str(int(defaults["gpus_per_node"]))}
    for flag, name in (("--epochs", "epochs"), ("--learning-rate", "learning_rate"), ("--batch-size", "batch_size"),
                       ("--seed", "seed")):
        assert float(command[command.index(flag) + 1]) == defaults[name], flag


# ---- the TrainJob the train step submits ----------------------------------------------------------------------------

def committed_trainjob() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((HERE / "trainjob.yaml").read_text(encoding="utf-8"))
    return found


def test_trainjob_yaml_is_what_the_step_builds() -> None:
    assert committed_trainjob() == steps().example_trainjob()
    shown = subprocess.run([sys.executable, str(HERE / "steps.py"), "trainjob"], capture_output=True, text=True,
                           check=True).stdout
    assert json.loads(shown) == committed_trainjob()


def test_the_trainjob_is_valid_and_its_pods_are_restricted(crds_dir: Path) -> None:
    job = committed_trainjob()
    index = CrdIndex(crds_dir, platform_of(STACK).spec.versions.crd_dirs())
    assert check_custom(job, index) == []
    assert TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job
    runtime = next(o for o in kube_objects(capture_of(STACK)) if o["kind"] == "ClusterTrainingRuntime"
                   and o["metadata"]["name"] == job["spec"]["runtimeRef"]["name"])
    pod = copy.deepcopy(next(iter(rt.pod_specs(runtime))))
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    patched = patch["template"]["spec"]["template"]["spec"]
    assert set(patched) == {"volumes", "containers"}  # no service account, security context or image of its own
    pod["volumes"] = [*pod.get("volumes", []), *patched["volumes"]]
    assert restricted_problems(pod) == []
    assert pod["serviceAccountName"] == "datasets"  # the team data account the runtime names, kept


def on_stack(stack: str, job: dict[str, Any], queue: str | None = None) -> tuple[dict[str, Any], str]:
    """The TrainJob as the team of the stack's train step submits it: `vision` where the stack has it, else its
    first team, in the team's first namespace and LocalQueue (or `queue`)."""
    platform = platform_of(stack)
    team = next((t for t in platform.teams if t.name == "vision"), platform.teams[0])
    job = copy.deepcopy(job)
    job["metadata"]["namespace"] = team.namespaces[0]
    job["metadata"]["labels"][QUEUE_LABEL] = queue if queue is not None else team.local_queues[0]
    return job, team.name


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_admit_admits_the_trainjob_in_its_teams_queue_on_every_stack(stack: str, crds_dir: Path) -> None:
    index = CrdIndex(crds_dir, platform_of(stack).spec.versions.crd_dirs())
    job, _ = on_stack(stack, committed_trainjob())
    lines, refused = answer(platform_of(stack), capture_of(stack), [job], index)
    assert refused == 0 and f"admitted TrainJob/{job['metadata']['namespace']}/train-eval-example" in lines, lines


def _refusals(job: dict[str, Any], crds_dir: Path, stack: str = STACK) -> list[str]:
    index = CrdIndex(crds_dir, platform_of(stack).spec.versions.crd_dirs())
    lines, _ = answer(platform_of(stack), capture_of(stack), [job], index)
    return [line for line in lines if line.startswith("refused")]


def test_without_a_queue_label_it_is_refused(crds_dir: Path) -> None:
    job = committed_trainjob()
    del job["metadata"]["labels"][QUEUE_LABEL]
    refused = _refusals(job, crds_dir)
    assert len(refused) == 1 and \
        "admission-policy: ValidatingAdmissionPolicy 'trainyard-queue-required' denied" in refused[0], refused


@pytest.mark.parametrize("stack", ["onprem-lab", "aws-prod"])
def test_in_another_teams_queue_it_is_refused(stack: str, crds_dir: Path) -> None:
    other = next(t for t in platform_of(stack).teams if t.name != "vision")
    job, _ = on_stack(stack, committed_trainjob(), queue=other.local_queues[0])
    refused = _refusals(job, crds_dir, stack)
    # both the platform's policy (a team's jobs name its own queue) and Kueue's side refuse it
    assert "ValidatingAdmissionPolicy 'trainyard-queue-required' denied" in refused[0], refused
    assert f"LocalQueue '{other.local_queues[0]}' does not exist in namespace vision" in refused[-1], refused


def test_a_resource_its_queue_has_no_quota_for_is_refused(crds_dir: Path) -> None:
    """What `admit` answers of quota: an extended resource the team's ClusterQueue has no quota for (amounts above
    the quota are Kueue's to hold pending, which `trainyard simulate` models, not `admit`)."""
    job = committed_trainjob()
    for amounts in job["spec"]["trainer"]["resourcesPerNode"].values():
        amounts["nvidia.com/mig-1g.10gb"] = amounts.pop("nvidia.com/gpu")
    refused = _refusals(job, crds_dir)
    assert any("has no quota for nvidia.com/mig-1g.10gb and cannot borrow it" in line for line in refused), refused


# ---- recurring runs -------------------------------------------------------------------------------------------------

RECURRING = sorted((HERE / "recurring-runs").glob("*.json"))
CRON_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\d+(-\d+)?)(/\d+)?)*$|^\?$")


@pytest.mark.parametrize("path", RECURRING, ids=[p.stem for p in RECURRING])
def test_a_recurring_run_names_the_pipelines_parameters_and_a_six_field_cron(path: Path) -> None:
    run = json.loads(path.read_text(encoding="utf-8"))
    inputs = compiled()[0]["root"]["inputDefinitions"]["parameters"]
    params = run["runtime_config"]["parameters"]
    assert set(params) <= set(inputs) and "git_commit" not in params  # submit.py sets the commit it uploads
    required = {name for name, p in inputs.items() if "defaultValue" not in p}
    assert required - {"git_commit"} <= set(params)
    fields = run["trigger"]["cron_schedule"]["cron"].split()
    assert len(fields) == 6 and all(CRON_FIELD.match(f) for f in fields), fields  # KFP: seconds first (robfig/cron)
    assert run["max_concurrency"] == "1" and run["no_catchup"] is True and run["mode"] == "ENABLE"
    assert ("LocalQueue", "vision", params["queue"]) in {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in kube_objects(capture_of(STACK))}


def test_one_recurring_run_retrains_and_one_is_the_new_data_sensor() -> None:
    modes = sorted(json.loads(p.read_text(encoding="utf-8"))["runtime_config"]["parameters"]["only_if_new_data"]
                   for p in RECURRING)
    assert modes == [False, True]


# ---- the steps ------------------------------------------------------------------------------------------------------

@pytest.fixture
def volumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The team's two volumes as directories, with a three-class dataset `digits` that a line separates."""
    monkeypatch.setattr(steps(), "DATASETS_MOUNT", str(tmp_path / "datasets"))
    monkeypatch.setattr(steps(), "WORK_MOUNT", str(tmp_path / "checkpoints"))
    data = tmp_path / "datasets" / "digits"
    data.mkdir(parents=True)
    rows = ["x,y,label", *(f"{i},{i % 3},{'abc'[i % 3]}" for i in range(30))]
    (data / "part-0.csv").write_text("\n".join(rows[:16]) + "\n", encoding="utf-8")
    (data / "part-1.csv").write_text("\n".join([rows[0], *rows[16:]]) + "\n", encoding="utf-8")
    return tmp_path


def run_step(*argv: str) -> None:
    steps().main(list(argv))


def sensor(tmp: Path, only_if_new: bool) -> tuple[str, str]:
    run_step("check-dataset", "--dataset", "digits", "--pipeline", "train-eval", "--only-if-new-data",
             "true" if only_if_new else "false", "--version-out", str(tmp / "v"), "--changed-out", str(tmp / "c"))
    return (tmp / "v").read_text(encoding="utf-8"), (tmp / "c").read_text(encoding="utf-8")


def test_the_dataset_version_is_the_content_and_changes_with_one_byte(volumes: Path) -> None:
    root = volumes / "datasets" / "digits"
    first = steps().dataset_version(root)
    assert first == steps().dataset_version(root) and first.startswith("sha256:")
    (root / "part-1.csv").write_text((root / "part-1.csv").read_text(encoding="utf-8").replace("29", "28"),
                                     encoding="utf-8")
    second = steps().dataset_version(root)
    assert second != first
    (root / "part-1.csv").rename(root / "part-2.csv")  # the same bytes under another name: another dataset
    assert steps().dataset_version(root) not in (first, second)


def test_the_sensor_trains_on_new_data_only_until_a_release_records_it(volumes: Path) -> None:
    version, changed = sensor(volumes, only_if_new=True)
    assert changed == "true"  # nothing released yet
    run_step("release", "--dataset", "digits", "--pipeline", "train-eval", "--dataset-version", version,
             "--git-commit", "abc", "--source-sha256", "0" * 64, "--model-uri", "s3://bucket/model", "--run-id", "r1",
             "--lineage-out", str(volumes / "lineage.json"), "--executor-output", str(volumes / "out.json"))
    assert sensor(volumes, only_if_new=True) == (version, "false")  # unchanged data: the run stops here
    assert sensor(volumes, only_if_new=False) == (version, "true")  # the nightly retrain trains anyway
    with (volumes / "datasets" / "digits" / "part-0.csv").open("a", encoding="utf-8") as handle:
        handle.write("31,1,b\n")
    new_version, changed = sensor(volumes, only_if_new=True)
    assert changed == "true" and new_version != version
    lineage = json.loads((volumes / "lineage.json").read_text(encoding="utf-8"))
    assert lineage["dataset_version"] == version and lineage["git_commit"] == "abc"
    metadata = json.loads((volumes / "out.json").read_text(encoding="utf-8"))
    assert metadata["artifacts"]["lineage"]["artifacts"][0]["metadata"] == lineage


def test_prepare_splits_reproducibly_and_records_the_version(volumes: Path) -> None:
    def prepare(seed: str) -> tuple[str, str, dict[str, Any]]:
        run_step("prepare", "--dataset", "digits", "--seed", seed, "--test-fraction", "0.2",
                 "--train-out", str(volumes / "train.csv"), "--test-out", str(volumes / "test.csv"),
                 "--version-out", str(volumes / "version"), "--executor-output", str(volumes / "out.json"))
        return ((volumes / "train.csv").read_text(encoding="utf-8"), (volumes / "test.csv").read_text(encoding="utf-8"),
                json.loads((volumes / "out.json").read_text(encoding="utf-8")))
    train, test, out = prepare("42")
    assert (train, test) == prepare("42")[:2] != prepare("7")[:2]
    assert len(train.splitlines()) == 1 + 24 and len(test.splitlines()) == 1 + 6
    version = (volumes / "version").read_text(encoding="utf-8")
    assert version == steps().dataset_version(volumes / "datasets" / "digits")
    assert out["artifacts"]["train"]["artifacts"][0]["metadata"] == {"dataset": "digits", "dataset_version": version,
                                                                      "seed": 42, "rows": 24}


@pytest.mark.parametrize(("gate", "passed"), [(0.75, "true"), (0.76, "false")])
def test_the_quality_gate_passes_at_the_accuracy_and_fails_above_it(tmp_path: Path, gate: float, passed: str) -> None:
    """A model that classifies 3 of 4 rows right: accuracy 0.75 passes a 0.75 gate, not a 0.76 one."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.json").write_text(json.dumps({
        "features": ["x"], "classes": ["neg", "pos"], "mean": [0.0], "std": [1.0],
        "weight": [[-1.0], [1.0]], "bias": [0.0, 0.0]}), encoding="utf-8")
    (tmp_path / "test.csv").write_text("x,label\n-2,neg\n-1,neg\n1,pos\n2,neg\n", encoding="utf-8")
    run_step("evaluate", "--model", str(model), "--test-data", str(tmp_path / "test.csv"), "--min-accuracy", str(gate),
             "--passed-out", str(tmp_path / "passed"), "--executor-output", str(tmp_path / "out.json"))
    assert (tmp_path / "passed").read_text(encoding="utf-8") == passed
    metrics = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["artifacts"]["metrics"]["artifacts"][0]
    assert metrics["metadata"]["accuracy"] == 0.75 and metrics["metadata"]["test_rows"] == 4
