"""The pod sets a TrainJob or JobSet becomes, as the webhooks that look at pod templates see them: one per
replicated job, with its pod template's annotations and its pod count."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from infra.apiserver.strategic_merge import merge

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"


@dataclass(frozen=True)
class PodSet:
    name: str
    path: str  # where the pod template's metadata sits, for messages
    count: int
    annotations: dict[str, str]
    ancestor: str
    containers: tuple[str, ...]
    init_containers: tuple[str, ...]


def _job_pod_set(job: dict[str, Any], path: str, count: int) -> PodSet:
    template = job.get("template", {})
    pod = template.get("spec", {}).get("template", {})
    spec = pod.get("spec", {})
    return PodSet(str(job.get("name", "")), f"{path}.template.spec.template.metadata", count,
                  dict(pod.get("metadata", {}).get("annotations", {})),
                  str(template.get("metadata", {}).get("labels", {}).get(ANCESTOR_LABEL, "")),
                  tuple(c.get("name", "") for c in spec.get("containers", [])),
                  tuple(c.get("name", "") for c in spec.get("initContainers", [])))


def _pods_per_replica(job: dict[str, Any]) -> int:
    """kueue v0.19.2 pkg/controller/jobs/jobset/jobset_controller.go PodsCountPerReplica: parallelism, or fewer
    completions."""
    spec = job.get("template", {}).get("spec", {})
    parallelism = int(spec.get("parallelism", 1))
    return min(parallelism, int(spec.get("completions", parallelism)))


def jobset_pod_sets(jobset_spec: dict[str, Any], path: str = "spec") -> list[PodSet]:
    """kueue v0.19.2 jobset_controller.go PodSets: one pod set per replicated job, replicas x pods per replica."""
    return [_job_pod_set(job, f"{path}.replicatedJobs[{i}]", int(job.get("replicas", 1)) * _pods_per_replica(job))
            for i, job in enumerate(jobset_spec.get("replicatedJobs", []))]


def patched_runtime(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The runtime as the TrainJob gets it: each runtime patch's replicated-job template merged into the job of
    the same name (kubeflow/trainer v2.2.1 pkg/runtime/core/trainingruntime.go mergeRuntimePatches, a strategic
    merge patch per patch, in order)."""
    template_spec = runtime.get("spec", {}).get("template", {}).get("spec", {})
    jobs = list(template_spec.get("replicatedJobs", []))
    for patch in trainjob.get("spec", {}).get("runtimePatches", []) or []:
        patch_spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job_patch in patch_spec.get("replicatedJobs", []) or []:
            if job_patch.get("template") is None:
                continue
            jobs = [{**job, "template": merge(job.get("template", {}), job_patch["template"])}
                    if job.get("name") == job_patch.get("name") else job for job in jobs]
    spec = runtime.get("spec", {})
    return {**runtime, "spec": {**spec, "template": {**spec.get("template", {}),
                                                      "spec": {**template_spec, "replicatedJobs": jobs}}}}


def trainjob_pod_sets(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[PodSet]:
    """The pod sets Kueue 0.19.2 gives a TrainJob (pkg/controller/jobs/trainjob/trainjob_controller.go
    getChildJobSet, then the JobSet's PodSets): the runtime's replicated jobs after the TrainJob's runtime
    patches, each job's pods its parallelism (Kueue sets completions equal to it) and the trainer's the TrainJob's
    numNodes (an MPI launcher that runs as a node takes one of them), times the job's replicas."""
    policy = runtime.get("spec", {}).get("mlPolicy", {})
    nodes = int(trainjob.get("spec", {}).get("trainer", {}).get("numNodes", policy.get("numNodes", 1)))
    launcher_is_node = bool(policy.get("mpi", {}).get("runLauncherAsNode"))
    jobs = patched_runtime(trainjob, runtime)["spec"]["template"]["spec"]["replicatedJobs"]
    sets = []
    for i, job in enumerate(jobs):
        pod_set = _job_pod_set(job, f"spec.template.spec.replicatedJobs[{i}]", 0)
        pods = int(job.get("template", {}).get("spec", {}).get("parallelism", 1))
        if pod_set.name == "node" or (pod_set.ancestor == "trainer" and pod_set.name != "launcher"):
            pods = max(nodes - 1, 1) if launcher_is_node else nodes
        sets.append(replace(pod_set, count=int(job.get("replicas", 1)) * pods))
    return sets
