"""The pod sets a TrainJob or JobSet becomes, as the webhooks that look at pod templates see them: one per
replicated job, with its pod template's annotations and its pod count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def jobset_pod_sets(jobset_spec: dict[str, Any], path: str = "spec") -> list[PodSet]:
    sets = []
    for i, job in enumerate(jobset_spec.get("replicatedJobs", [])):
        parallelism = int(job.get("template", {}).get("spec", {}).get("parallelism", 1))
        sets.append(_job_pod_set(job, f"{path}.replicatedJobs[{i}]", int(job.get("replicas", 1)) * parallelism))
    return sets


def trainjob_pod_sets(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[PodSet]:
    """The runtime's replicated jobs with the TrainJob's numNodes on the trainer (an MPI launcher that runs as
    a node takes one of them)."""
    policy = runtime.get("spec", {}).get("mlPolicy", {})
    nodes = int(trainjob.get("spec", {}).get("trainer", {}).get("numNodes", policy.get("numNodes", 1)))
    launcher_is_node = bool(policy.get("mpi", {}).get("runLauncherAsNode"))
    sets = []
    for pod_set in jobset_pod_sets(runtime.get("spec", {}).get("template", {}).get("spec", {}),
                                   "spec.template.spec"):
        if pod_set.name == "node" or (pod_set.ancestor == "trainer" and pod_set.name != "launcher"):
            count = max(nodes - 1, 1) if launcher_is_node else nodes
            pod_set = PodSet(pod_set.name, pod_set.path, count, pod_set.annotations, pod_set.ancestor,
                             pod_set.containers, pod_set.init_containers)
        sets.append(pod_set)
    return sets
