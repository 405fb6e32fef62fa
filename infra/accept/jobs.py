"""The acceptance TrainJobs: a tenant's TrainJob on one of the platform's runtimes, submitted to a team's queue at
one of the platform's priorities, running infra/accept/program.py from a ConfigMap with its step counter on a
checkpoint volume."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.spec import Platform
from infra.spec.pools import POOL_LABEL
from infra.spec.runtimes import TRAINER_JOBS, cpu_only, replicated_jobs
from infra.spec.storage.model import CHECKPOINTS, TEAM_DATA_ACCOUNT
from infra.vocabulary import PRIORITY_LABEL, QUEUE_LABEL

FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MANAGER = "trainyard.io/accept"
PROGRAM = "accept-program"
CLAIM = "accept-checkpoints"
PROGRAM_DIR, CHECKPOINT_DIR = "/opt/accept", "/mnt/checkpoints"
# Not run end to end, and why (reported as such).
NOT_RUN = {"torchtune": "its initializers download a model and a dataset from Hugging Face: run "
                        "examples/torchtune-* by hand"}


def program_text() -> str:
    return (Path(__file__).parent / "program.py").read_text(encoding="utf-8")


def support_objects() -> list[dict[str, Any]]:
    """The program, a small checkpoint volume on the platform's checkpoint class (ReadWriteMany, as tenants'
    checkpoint volumes are: every node of a job writes its counter there) and the account the runtimes' pods run
    as (without a bucket identity: the run reads no bucket)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TEAM_DATA_ACCOUNT}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROGRAM},
         "data": {"program.py": program_text()}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": CLAIM},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": CHECKPOINTS,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]


def families(platform: Platform) -> dict[str, Mapping[str, Any]]:
    """Framework -> the first generic runtime of the stack with it (the variants are per pool)."""
    listed = set(platform.spec.trainer.runtimes)
    found: dict[str, Mapping[str, Any]] = {}
    for runtime in platform.runtimes:
        if runtime["metadata"]["name"] in listed:
            found.setdefault(runtime["metadata"].get("labels", {}).get(FRAMEWORK_LABEL, "unknown"), runtime)
    return found


def runtime_on(platform: Platform, runtime: Mapping[str, Any], pool: str) -> tuple[str, bool]:
    """The runtime a tenant uses on a pool: its `<runtime>-<pool>` variant when the stack has one (pinned, with
    the fabric settings), else the generic one, which the TrainJob pins with a node selector. -> (name, pinned)"""
    name = runtime["metadata"]["name"]
    variants = {r["metadata"]["name"] for r in platform.runtimes}
    return (f"{name}-{pool}", True) if f"{name}-{pool}" in variants else (name, False)


def command(runtime: Mapping[str, Any]) -> list[str]:
    program = f"{PROGRAM_DIR}/program.py"
    policy = runtime["spec"].get("mlPolicy", {})
    if "torch" in policy:
        return ["torchrun", program]
    if "mpi" in policy:  # mpirun starts one rank per node over SSH, which does not pass the pod's environment
        forwarded = [a for name in ("CHECKPOINT_DIR", "ACCEPT_STEPS", "ACCEPT_STEP_SECONDS") for a in ("-x", name)]
        return ["mpirun", "--bind-to", "none", *forwarded, "python3", program]
    return ["python3", program]


def resources(platform: Platform, pool: str, gpus: int) -> dict[str, Any]:
    """Per node: a core, 2Gi and `gpus` of the pool's GPU resource, plus the fabric device its pods must request."""
    amounts: dict[str, str] = {"cpu": "1", "memory": "2Gi"}
    flavor = platform.flavor(pool)
    if flavor.gpu_resources and gpus:
        amounts[flavor.gpu_resources[0]] = str(gpus)
    fabric = platform.pool(pool).fabric_request
    if fabric and flavor.gpu_resources:
        amounts[fabric[0]] = str(fabric[1])
    return {"requests": dict(amounts), "limits": {k: v for k, v in amounts.items() if k != "cpu"}}


def per_node_gpus(platform: Platform, pool: str) -> int:
    """What one node of the pool offers of its GPU resource (time-sliced replicas count)."""
    flavor = platform.flavor(pool)
    if not flavor.gpu_resources:
        return 0
    nodes = max(platform.pool(pool).node_count, 1)
    return int(flavor.capacity[flavor.gpu_resources[0]]) // nodes


@dataclass(frozen=True)
class Spec:
    """One acceptance TrainJob."""

    name: str
    runtime: Mapping[str, Any]
    pool: str
    nodes: int = 1
    gpus: int = 1  # per node
    priority: str = ""  # a WorkloadPriorityClass; empty: the lowest the stack declares
    steps: int = 3
    step_seconds: float = 1.0
    allreduce: bool = False
    prefer_node: str | None = None


def lowest_priority(platform: Platform) -> str:
    priorities = platform.queueing.priorities
    return min(priorities, key=lambda name: priorities[name].value)


def highest_priority(platform: Platform) -> str:
    priorities = platform.queueing.priorities
    return max(priorities, key=lambda name: priorities[name].value)


def _patch(job: Spec, names: list[str], pinned: bool) -> dict[str, Any]:
    replicated = []
    for name in names:
        pod: dict[str, Any] = {
            "volumes": [{"name": "accept-program", "configMap": {"name": PROGRAM}},
                        {"name": "accept-checkpoints", "persistentVolumeClaim": {"claimName": CLAIM}}],
            "containers": [{"name": name, "volumeMounts": [
                {"name": "accept-program", "mountPath": PROGRAM_DIR, "readOnly": True},
                {"name": "accept-checkpoints", "mountPath": CHECKPOINT_DIR}]}],
        }
        if not pinned:
            pod["nodeSelector"] = {POOL_LABEL: job.pool}
        affinity: dict[str, Any] = {}
        if name == "node" and job.nodes > 1:  # one pod per node, so a multi-node run crosses the fabric
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {JOBSET_LABEL: job.name, REPLICATED_JOB_LABEL: "node"}},
                "topologyKey": HOSTNAME_LABEL}]}
        if job.prefer_node:
            affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                "preference": {"matchExpressions": [
                    {"key": HOSTNAME_LABEL, "operator": "In", "values": [job.prefer_node]}]}}]}
        if affinity:
            pod["affinity"] = affinity
        replicated.append({"name": name, "template": {"spec": {"template": {"spec": pod}}}})
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}}}


def trainjob(platform: Platform, job: Spec, queue: str) -> dict[str, Any]:
    runtime_name, pinned = runtime_on(platform, job.runtime, job.pool)
    trainers = [r["name"] for r in replicated_jobs(job.runtime) if r["name"] in TRAINER_JOBS]
    env = {"CHECKPOINT_DIR": CHECKPOINT_DIR, "ACCEPT_STEPS": str(job.steps),
           "ACCEPT_STEP_SECONDS": str(job.step_seconds), **({"ACCEPT_ALLREDUCE": "1"} if job.allreduce else {})}
    gpus = 0 if cpu_only(job.runtime) else job.gpus
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": job.name, "labels": {
            QUEUE_LABEL: queue, PRIORITY_LABEL: job.priority or lowest_priority(platform),
            "app.kubernetes.io/part-of": "trainyard-accept"}},
        "spec": {
            "runtimeRef": {"name": runtime_name},
            "trainer": {"numNodes": job.nodes, "command": command(job.runtime),
                        "env": [{"name": k, "value": v} for k, v in env.items()],
                        "resourcesPerNode": resources(platform, job.pool, gpus)},
            "runtimePatches": [_patch(job, trainers, pinned)],
        },
    }
