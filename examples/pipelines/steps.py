"""The steps of the train-eval pipeline, standard library only.

Every step runs this file with `python3 -c` in the step image (the Python image the cpu-batch runtime already pins),
so the pipeline needs no image of its own and installs nothing when it runs: team namespaces reach no package index.
`python3 steps.py trainjob` prints the TrainJob the train step submits, with the example's values: that is
`trainjob.yaml` beside this file, which `trainyard admit` judges and tests/test_example_pipeline.py keeps current.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import pathlib
import random
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

DATASETS_CLAIM, DATASETS_MOUNT = "datasets", "/mnt/datasets"  # the team's dataset volume (storage layer)
WORK_CLAIM, WORK_MOUNT = "checkpoints", "/mnt/checkpoints"  # the team's checkpoint volume: the TrainJob's exchange
PROJECT = "train-eval"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
API_SERVER = "https://kubernetes.default.svc"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"


# ---- dataset identity -----------------------------------------------------------------------------------------------

def dataset_files(root: pathlib.Path) -> list[pathlib.Path]:
    files = sorted(p for p in root.rglob("*.csv") if p.is_file())
    if not files:
        raise SystemExit(f"no *.csv under {root}: put the dataset in the team's `{DATASETS_CLAIM}` volume")
    return files


def dataset_version(root: pathlib.Path) -> str:
    """The dataset's content hash: sha256 over every file's path (relative to the dataset) and content, in path order.
    The same bytes give the same version on every stack, whatever the volume or bucket behind it."""
    digest = hashlib.sha256()
    for path in dataset_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return "sha256:" + digest.hexdigest()


def marker(pipeline: str, dataset: str) -> pathlib.Path:
    """Where the last released run of this pipeline on this dataset left the dataset version it trained on."""
    return pathlib.Path(WORK_MOUNT) / "pipelines" / pipeline / f"{dataset.strip('/').replace('/', '_')}.released"


def write(path: str, text: str) -> None:
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text, encoding="utf-8")


def executor_output(path: str, metadata: dict[str, dict[str, Any]]) -> None:
    """Metadata of output artifacts, as the KFP launcher reads it from the executor output file after the step."""
    artifacts = {name: {"artifacts": [{"metadata": meta}]} for name, meta in metadata.items()}
    write(path, json.dumps({"artifacts": artifacts}))


def check_dataset(args: argparse.Namespace) -> None:
    """The sensor: the dataset's version, and whether it changed since the last released run (always "true" unless
    the run asks to train only on new data)."""
    version = dataset_version(pathlib.Path(DATASETS_MOUNT) / args.dataset)
    last = marker(args.pipeline, args.dataset)
    released = last.read_text(encoding="utf-8").strip() if last.exists() else ""
    changed = args.only_if_new_data != "true" or version != released
    print(f"dataset {args.dataset}: {version}; last released: {released or 'none'}; train: {changed}")
    write(args.version_out, version)
    write(args.changed_out, "true" if changed else "false")


def prepare(args: argparse.Namespace) -> None:
    """Read the dataset (CSV files with a `label` column), shuffle with the run's seed, split into train and test."""
    root = pathlib.Path(DATASETS_MOUNT) / args.dataset
    version = dataset_version(root)
    header: list[str] | None = None
    rows: list[list[str]] = []
    for path in dataset_files(root):
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            first = next(reader)
            if header is not None and first != header:
                raise SystemExit(f"{path}: columns {first} differ from {header}")
            header = first
            rows += list(reader)
    assert header is not None
    if "label" not in header:
        raise SystemExit(f"{root}: no `label` column in {header}")
    random.Random(args.seed).shuffle(rows)
    cut = len(rows) - max(1, round(len(rows) * args.test_fraction))
    for name, part in (("train", rows[:cut]), ("test", rows[cut:])):
        with open(getattr(args, f"{name}_out"), "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header, *part])
    common = {"dataset": args.dataset, "dataset_version": version, "seed": args.seed}
    executor_output(args.executor_output,
                    {"train": {**common, "rows": cut}, "test": {**common, "rows": len(rows) - cut}})
    write(args.version_out, version)
    print(f"{len(rows)} rows of {version}: {cut} train, {len(rows) - cut} test")


# ---- the TrainJob ---------------------------------------------------------------------------------------------------

def trainjob(name: str, namespace: str, queue: str, priority: str, runtime: str, nodes: int, gpus: int, cpu: str,
             memory: str, workdir: str, script_args: list[str], run_id: str) -> dict[str, Any]:
    """The TrainJob the train step submits: queued by Kueue in the team's LocalQueue, on a runtime of the stack, its
    pods restricted as the runtime makes them (the patch adds only the team's checkpoint volume)."""
    per_node = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: priority, "app.kubernetes.io/part-of": PROJECT,
                                "app.kubernetes.io/instance": run_id}},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": nodes,
                "command": ["torchrun", f"{workdir}/train.py", *script_args],
                "resourcesPerNode": {"requests": dict(per_node),
                                     "limits": {"memory": memory, "nvidia.com/gpu": str(gpus)}},
            },
            "runtimePatches": [{
                "manager": "trainyard.io/project",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {"spec": {"template": {"spec": {
                        "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": WORK_CLAIM}}],
                        "containers": [{"name": "node", "volumeMounts": [{"name": "work", "mountPath": WORK_MOUNT}]}],
                    }}}},
                }]}}},
            }],
        },
    }


def script_args(data: str, model_dir: str, args: argparse.Namespace) -> list[str]:
    """The existing script's own command line: the wrapper passes the pipeline's parameters through it unchanged."""
    return ["--data", data, "--model-dir", model_dir, "--epochs", str(args.epochs),
            "--learning-rate", str(args.learning_rate), "--batch-size", str(args.batch_size), "--seed", str(args.seed)]


def example_trainjob() -> dict[str, Any]:
    """trainjob.yaml: the TrainJob of a run of the example with its default parameters, for team `vision`."""
    example = argparse.Namespace(epochs=20, learning_rate=0.05, batch_size=256, seed=42)
    workdir = f"{WORK_MOUNT}/pipelines/{PROJECT}/runs/example"
    return trainjob("train-eval-example", "vision", "vision", "research", "torch-distributed", 1, 1, "2", "6Gi",
                    workdir, script_args(f"{workdir}/train.csv", f"{workdir}/model", example), "example")


def api(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """The Kubernetes API as the run's ServiceAccount (the team's datasets account), with the token the pod mounts."""
    token = pathlib.Path(SERVICE_ACCOUNT, "token").read_text(encoding="utf-8").strip()
    request = urllib.request.Request(API_SERVER + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                                              "Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=f"{SERVICE_ACCOUNT}/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in job.get("status", {}).get("conditions", [])
                 if c.get("type") == kind and c.get("status") == "True"), None)


def image_digests(namespace: str, query: str) -> list[str]:
    """The image digests the kubelet pulled for the pods the query names (a pod, or `?labelSelector=`): the code that
    ran, whatever tag named it. Best effort: a run without them still has the image references of its spec."""
    status, found = api("GET", f"/api/v1/namespaces/{namespace}/pods{query}")
    pods = found.get("items", [found]) if status == 200 else []
    return sorted({c["imageID"] for p in pods for c in p.get("status", {}).get("containerStatuses", [])
                   if c.get("imageID")})


def train(args: argparse.Namespace) -> None:
    """Wrap the existing training script: stage it with the train split on the team's checkpoint volume, submit a
    TrainJob that runs it unchanged, wait for it, and hand its model to KFP as the run's Model artifact. A retried step
    finds its TrainJob (same name) and waits for it again instead of training twice."""
    namespace = pathlib.Path(SERVICE_ACCOUNT, "namespace").read_text(encoding="utf-8").strip()
    name = f"{PROJECT}-{args.run_id.replace('-', '')[:12]}"
    workdir = pathlib.Path(WORK_MOUNT) / "pipelines" / PROJECT / "runs" / args.run_id
    (workdir / "model").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.train_data, workdir / "train.csv")
    (workdir / "train.py").write_text(args.script, encoding="utf-8")
    job = trainjob(name, namespace, args.queue, args.priority, args.runtime, args.nodes, args.gpus, args.cpu,
                   args.memory, str(workdir), script_args(str(workdir / "train.csv"), str(workdir / "model"), args),
                   args.run_id)
    status, answer = api("POST", TRAINJOBS.format(namespace=namespace), job)
    if status not in (201, 409):
        raise SystemExit(f"TrainJob {name} refused ({status}): {answer.get('message', answer)}")
    print(f"TrainJob {namespace}/{name} {'created' if status == 201 else 'exists, waiting for it'}; "
          f"Kueue queues it in {args.queue}: kubectl get workloads -n {namespace}")
    deadline = time.monotonic() + args.timeout_hours * 3600
    while True:
        status, current = api("GET", f"{TRAINJOBS.format(namespace=namespace)}/{name}")
        if status == 200 and (done := condition(current, "Complete") or condition(current, "Failed")):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"TrainJob {name} not finished after {args.timeout_hours} h (it stays for inspection)")
        time.sleep(30)
    if done["type"] == "Failed":
        raise SystemExit(f"TrainJob {name} failed: {done.get('reason')}: {done.get('message')}")
    shutil.copytree(workdir / "model", args.model_out, dirs_exist_ok=True)
    trained = image_digests(namespace, f"?labelSelector=jobset.sigs.k8s.io/jobset-name={name}")
    step = image_digests(namespace, f"/{os.environ.get('HOSTNAME', '')}")  # this step's own pod
    executor_output(args.executor_output, {"model": {
        "dataset_version": args.dataset_version, "git_commit": args.git_commit, "source_sha256": args.source_sha256,
        "trainjob": f"{namespace}/{name}", "runtime": args.runtime, "training_images": trained, "step_images": step,
        "epochs": args.epochs, "learning_rate": args.learning_rate, "batch_size": args.batch_size, "seed": args.seed}})
    shutil.rmtree(workdir)  # the model is in the run's artifact store now; the volume keeps no per-run copy


# ---- evaluation and release -----------------------------------------------------------------------------------------

def evaluate(args: argparse.Namespace) -> None:
    """Accuracy and log-loss of the model (model.json: the linear classifier the script writes) on the test split."""
    model = json.loads(pathlib.Path(args.model, "model.json").read_text(encoding="utf-8"))
    with open(args.test_data, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    features = model["features"]
    correct, loss = 0, 0.0
    for row in rows:
        x = [(float(row[f]) - m) / s for f, m, s in zip(features, model["mean"], model["std"], strict=True)]
        logits = [b + sum(w * v for w, v in zip(ws, x, strict=True)) for ws, b in zip(model["weight"], model["bias"],
                                                                                          strict=True)]
        top = max(logits)
        log_total = top + math.log(sum(math.exp(v - top) for v in logits))
        truth = model["classes"].index(row["label"])
        correct += logits.index(top) == truth
        loss += log_total - logits[truth]
    accuracy, log_loss = correct / len(rows), loss / len(rows)
    passed = accuracy >= args.min_accuracy
    executor_output(args.executor_output, {"metrics": {"accuracy": accuracy, "log_loss": log_loss,
                                                       "test_rows": len(rows), "min_accuracy": args.min_accuracy}})
    write(args.passed_out, "true" if passed else "false")
    print(f"accuracy {accuracy:.4f} (gate {args.min_accuracy}), log-loss {log_loss:.4f}: "
          f"{'released' if passed else 'not released'}")


def release(args: argparse.Namespace) -> None:
    """The run's lineage record, and the dataset version the sensor compares new data with from now on."""
    record = {"dataset": args.dataset, "dataset_version": args.dataset_version, "git_commit": args.git_commit,
              "source_sha256": args.source_sha256, "model": args.model_uri, "run_id": args.run_id}
    write(args.lineage_out, json.dumps(record, indent=2, sort_keys=True))
    executor_output(args.executor_output, {"lineage": record})
    write(str(marker(args.pipeline, args.dataset)), args.dataset_version)
    print(json.dumps(record, sort_keys=True))


# ---- command line ---------------------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="steps")
    steps = top.add_subparsers(dest="step", required=True)

    def step(name: str, *options: str, **typed: type) -> argparse.ArgumentParser:
        sub = steps.add_parser(name)
        for option in options:
            sub.add_argument(f"--{option}", required=True)
        for option, kind in typed.items():
            sub.add_argument(f"--{option.replace('_', '-')}", type=kind, required=True)
        return sub

    step("check-dataset", "dataset", "pipeline", "only-if-new-data", "version-out", "changed-out")
    step("prepare", "dataset", "train-out", "test-out", "version-out", "executor-output", seed=int, test_fraction=float)
    step("train", "train-data", "script", "runtime", "queue", "priority", "cpu", "memory", "run-id",
         "dataset-version", "git-commit", "source-sha256", "model-out", "executor-output",
         nodes=int, gpus=int, epochs=int, learning_rate=float, batch_size=int, seed=int, timeout_hours=float)
    step("evaluate", "model", "test-data", "passed-out", "executor-output", min_accuracy=float)
    step("release", "dataset", "pipeline", "dataset-version", "git-commit", "source-sha256", "model-uri", "run-id",
         "lineage-out", "executor-output")
    steps.add_parser("trainjob")
    return top


def main(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    if args.step == "trainjob":
        json.dump(example_trainjob(), sys.stdout, indent=2)
        return
    {"check-dataset": check_dataset, "prepare": prepare, "train": train, "evaluate": evaluate,
     "release": release}[args.step](args)


if __name__ == "__main__":
    main(sys.argv[1:])
