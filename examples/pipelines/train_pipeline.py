"""train-eval: prepare data from the team's dataset volume -> train in a TrainJob on a runtime of the stack -> evaluate
-> release (lineage record) -> register (a version in the team's Model Registry). KFP SDK 2.16 (the backend is
Kubeflow Pipelines 2.16.0), compiled to train_pipeline.yaml beside this file:

    .venv-pipelines/bin/python examples/pipelines/train_pipeline.py    # rewrites train_pipeline.yaml

The steps are container components running steps.py (register.py for the last; standard library only) in the step
image; the GPU work is not
in any step's pod: the train step creates a TrainJob that Kueue queues in the team's LocalQueue (Kueue's pod
integration is off, so a step pod asking for a GPU would bypass the queue). docs/pipelines-guide.md walks through it.
"""

import hashlib
import pathlib
import sys

from kfp import compiler, dsl, kubernetes

HERE = pathlib.Path(__file__).resolve().parent
NAME = "train-eval"
STEPS = (HERE / "steps.py").read_text(encoding="utf-8")
REGISTER = (HERE / "register.py").read_text(encoding="utf-8")
SCRIPT = (HERE / "train.py").read_text(encoding="utf-8")  # the existing training script, run as it is
# The code's identity, fixed at compile time: the sources this compiled pipeline was made from.
SOURCES = ("train_pipeline.py", "steps.py", "train.py", "register.py")
SOURCE_SHA256 = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in SOURCES)).hexdigest()
# The image of every step: the Python image the platform already pins for the cpu-batch runtime (mirrored with the
# runtimes, allowed on every stack). By tag, as runtimes/ pin theirs: a digest cannot be resolved offline here, and the
# train step records the digest each pod actually ran (containerStatuses[].imageID) in the model's metadata.
STEP_IMAGE = "docker.io/library/python:3.12.12-slim-bookworm"
EXECUTOR_OUTPUT = dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER  # where a step leaves its artifacts' metadata
# The run id: the driver resolves {{$.pipeline_job_uuid}} only as a task's input value (backend 2.16.0
# driver/resolve.go), not inside a container's args, so every step that needs it takes it as the input `run_id`.
RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
# Where the example's team, vision, registers its models: its TeamModels.registry_url (infra/spec/models/model.py:
# the registry Service in the team's models namespace). Another team passes its own.
REGISTRY_URL = "http://model-registry-service.vision-models.svc.cluster.local:8080"


def steps(step: str, *args: object) -> dsl.ContainerSpec:
    return dsl.ContainerSpec(image=STEP_IMAGE, command=["python3", "-c", STEPS], args=[step, *args])


@dsl.container_component
def check_dataset(dataset: str, only_if_new_data: bool, dataset_version: dsl.OutputPath(str),
                  changed: dsl.OutputPath(str)):
    """The sensor: the dataset's content hash, and whether it differs from the last released run's."""
    return steps("check-dataset", "--dataset", dataset, "--pipeline", NAME, "--only-if-new-data", only_if_new_data,
                 "--version-out", dataset_version, "--changed-out", changed)


@dsl.container_component
def prepare(dataset: str, seed: int, test_fraction: float, train: dsl.Output[dsl.Dataset],
            test: dsl.Output[dsl.Dataset], dataset_version: dsl.OutputPath(str)):
    """Split the dataset into train and test artifacts (in the team's pipeline root), recording its version."""
    return steps("prepare", "--dataset", dataset, "--seed", seed, "--test-fraction", test_fraction,
                 "--train-out", train.path, "--test-out", test.path, "--version-out", dataset_version,
                 "--executor-output", EXECUTOR_OUTPUT)


@dsl.container_component
def train(train_data: dsl.Input[dsl.Dataset], dataset_version: str, git_commit: str, runtime: str, queue: str,
          priority: str, nodes: int, gpus_per_node: int, cpu_per_node: str, memory_per_node: str, epochs: int,
          learning_rate: float, batch_size: int, seed: int, timeout_hours: float, run_id: str,
          model: dsl.Output[dsl.Model]):
    """Run train.py unchanged in a TrainJob (queued by Kueue), wait for it, keep its model as the run's Model."""
    return steps("train", "--train-data", train_data.path, "--script", SCRIPT, "--runtime", runtime,
                 "--queue", queue, "--priority", priority, "--nodes", nodes, "--gpus", gpus_per_node,
                 "--cpu", cpu_per_node, "--memory", memory_per_node, "--epochs", epochs,
                 "--learning-rate", learning_rate, "--batch-size", batch_size, "--seed", seed,
                 "--timeout-hours", timeout_hours, "--run-id", run_id,
                 "--dataset-version", dataset_version, "--git-commit", git_commit, "--source-sha256", SOURCE_SHA256,
                 "--model-out", model.path, "--executor-output", EXECUTOR_OUTPUT)


@dsl.container_component
def evaluate(model: dsl.Input[dsl.Model], test_data: dsl.Input[dsl.Dataset], min_accuracy: float,
             metrics: dsl.Output[dsl.Metrics], passed: dsl.OutputPath(str)):
    """Accuracy and log-loss on the test split, as the run's Metrics; `passed` is the quality gate."""
    return steps("evaluate", "--model", model.path, "--test-data", test_data.path, "--min-accuracy", min_accuracy,
                 "--passed-out", passed, "--executor-output", EXECUTOR_OUTPUT)


@dsl.container_component
def release(dataset: str, dataset_version: str, git_commit: str, run_id: str, model: dsl.Input[dsl.Model],
            lineage: dsl.Output[dsl.Artifact]):
    """The lineage record of a model that passed the gate; the sensor compares new data with its dataset version."""
    return steps("release", "--dataset", dataset, "--pipeline", NAME, "--dataset-version", dataset_version,
                 "--git-commit", git_commit, "--source-sha256", SOURCE_SHA256, "--model-uri", model.uri,
                 "--run-id", run_id, "--lineage-out", lineage.path,
                 "--executor-output", EXECUTOR_OUTPUT)


@dsl.container_component
def register(model: dsl.Input[dsl.Model], metrics: dsl.Input[dsl.Metrics], run_id: str, dataset_version: str,
             registry_url: str, model_name: str, queue: str, git_commit: str, dataset: str,
             only_if_new_data: bool, test_fraction: float, seed: int, epochs: int, learning_rate: float,
             batch_size: int, runtime: str, priority: str, nodes: int, gpus_per_node: int, cpu_per_node: str,
             memory_per_node: str, min_accuracy: float, train_timeout_hours: float,
             registration: dsl.Output[dsl.Artifact]):
    """The model version of this run in the team's Model Registry, with its lineage: register.py reads every input
    (the pipeline's parameters, the run id, the dataset version, the model's and the metrics' metadata) from the
    executor input, so each pipeline parameter is an input here."""
    return dsl.ContainerSpec(image=STEP_IMAGE, command=["python3", "-c", REGISTER],
                             args=["--executor-input", dsl.PIPELINE_TASK_EXECUTOR_INPUT_PLACEHOLDER])


def restricted(task: dsl.PipelineTask, *claims: tuple[str, str], cache: bool = False,
               retries: int = 0) -> dsl.PipelineTask:
    """A step pod that Pod Security "restricted" admits (KFP adds seccomp and drops capabilities; the non-root user
    is ours), with the requests the namespace quota needs, the team volumes it reads, no GPU."""
    kubernetes.set_security_context(task, run_as_user=1000, run_as_group=1000, run_as_non_root=True)
    task.set_cpu_request("250m").set_cpu_limit("1").set_memory_request("256Mi").set_memory_limit("1Gi")
    for claim, mount in claims:
        kubernetes.mount_pvc(task, pvc_name=claim, mount_path=mount)
    task.set_caching_options(cache)
    if retries:
        task.set_retry(num_retries=retries, backoff_duration="60s")
    return task


DATASETS = ("datasets", "/mnt/datasets")  # steps.DATASETS_CLAIM, DATASETS_MOUNT
WORK = ("checkpoints", "/mnt/checkpoints")  # steps.WORK_CLAIM, WORK_MOUNT


@dsl.pipeline(name=NAME, description="Prepare, train in a TrainJob, evaluate, release and register in the team's "
              "Model Registry, with the dataset version, parameters and code identity on record.")
def train_eval(queue: str, git_commit: str, dataset: str = "digits", only_if_new_data: bool = False,
               test_fraction: float = 0.2, seed: int = 42, epochs: int = 20, learning_rate: float = 0.05,
               batch_size: int = 256, runtime: str = "torch-distributed", priority: str = "research", nodes: int = 1,
               gpus_per_node: int = 1, cpu_per_node: str = "2", memory_per_node: str = "6Gi",
               min_accuracy: float = 0.8, train_timeout_hours: float = 24.0, registry_url: str = REGISTRY_URL,
               model_name: str = NAME) -> None:
    sensor = restricted(check_dataset(dataset=dataset, only_if_new_data=only_if_new_data), DATASETS, WORK)
    sensor.set_display_name("check dataset")
    with dsl.If(sensor.outputs["changed"] == "true", name="new-data"):
        data = restricted(prepare(dataset=dataset, seed=seed, test_fraction=test_fraction), DATASETS, retries=2)
        trained = restricted(train(
            train_data=data.outputs["train"], dataset_version=data.outputs["dataset_version"], git_commit=git_commit,
            runtime=runtime, queue=queue, priority=priority, nodes=nodes, gpus_per_node=gpus_per_node,
            cpu_per_node=cpu_per_node, memory_per_node=memory_per_node, epochs=epochs, learning_rate=learning_rate,
            batch_size=batch_size, seed=seed, timeout_hours=train_timeout_hours, run_id=RUN_ID), WORK, retries=2)
        quality = restricted(evaluate(model=trained.outputs["model"], test_data=data.outputs["test"],
                                      min_accuracy=min_accuracy), cache=True)
        with dsl.If(quality.outputs["passed"] == "true", name="quality-gate"):
            released = restricted(release(dataset=dataset, dataset_version=data.outputs["dataset_version"],
                                          git_commit=git_commit, run_id=RUN_ID, model=trained.outputs["model"]), WORK)
            # Last: a registry that is down fails the run here, after the lineage record; retrying the run reruns
            # only this step, and the same run id finds the version it registered (register.py).
            restricted(register(
                model=trained.outputs["model"], metrics=quality.outputs["metrics"], run_id=RUN_ID,
                dataset_version=data.outputs["dataset_version"], registry_url=registry_url, model_name=model_name,
                queue=queue, git_commit=git_commit, dataset=dataset,
                only_if_new_data=only_if_new_data, test_fraction=test_fraction, seed=seed, epochs=epochs,
                learning_rate=learning_rate, batch_size=batch_size, runtime=runtime, priority=priority, nodes=nodes,
                gpus_per_node=gpus_per_node, cpu_per_node=cpu_per_node, memory_per_node=memory_per_node,
                min_accuracy=min_accuracy, train_timeout_hours=train_timeout_hours), retries=2).after(released)


def compile_to(path: pathlib.Path) -> None:
    compiler.Compiler().compile(train_eval, str(path))


if __name__ == "__main__":
    compile_to(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "train_pipeline.yaml")
