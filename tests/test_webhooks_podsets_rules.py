"""The pod sets the webhook rules read from a TrainJob or a JobSet (infra/apiserver/webhooks/podsets.py), with
runtimes built by hand: the runtime as the TrainJob gets it (Trainer v2.2.1 pkg/runtime/core/trainingruntime.go
mergeRuntimePatches: only the named jobs' templates change, every patch entry is read) and the pod sets Kueue
0.19.2 builds from it (pkg/controller/jobs/trainjob/trainjob_controller.go getChildJobSet, then the JobSet's
PodSets: one per replicated job, named after it, where the runtime holds it)."""

from __future__ import annotations

import copy
from typing import Any

from infra.apiserver.webhooks.podsets import ANCESTOR_LABEL, PodSet, jobset_pod_sets, patched_runtime, trainjob_pod_sets

TRAINER = "trainer.kubeflow.org/v1alpha1"
META = "template.spec.template.metadata"


def job(name: str, *containers: str, init: tuple[str, ...] = (), ancestor: str = "", parallelism: int = 1,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": c, "image": "busybox:1.37"} for c in containers]}}
    if init:
        pod["spec"]["initContainers"] = [{"name": c, "image": "busybox:1.37"} for c in init]
    if annotations:
        pod["metadata"] = {"annotations": annotations}
    template: dict[str, Any] = {"spec": {"parallelism": parallelism, "template": pod}}
    if ancestor:
        template["metadata"] = {"labels": {ANCESTOR_LABEL: ancestor}}
    return {"name": name, "template": template}


def runtime(*jobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime", "metadata": {"name": "rt"},
            "spec": {"template": {"spec": {"replicatedJobs": list(jobs)}}, **spec}}


def trainjob(*patches: dict[str, Any], nodes: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "rt"}}
    if nodes is not None:
        spec["trainer"] = {"numNodes": nodes}
    if patches:
        spec["runtimePatches"] = list(patches)
    return {"apiVersion": TRAINER, "kind": "TrainJob", "metadata": {"name": "tj", "namespace": "v"}, "spec": spec}


def patch(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"manager": "trainer.kubeflow.org/kubeflow-sdk",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": list(jobs)}}}}


def annotate(name: str, **annotations: str) -> dict[str, Any]:
    """A patch entry for job `name` whose template gives the job's pods these annotations."""
    return {"name": name, "template": {"spec": {"template": {"metadata": {"annotations": annotations}}}}}


def test_a_runtime_without_spec_gives_a_trainjob_no_pod_sets() -> None:
    """`spec` is optional in the ClusterTrainingRuntime CRD (v2.2.1): Trainer reads the zero value, a template
    with no replicated jobs, so a patch finds no job to merge into and Kueue counts no pod set."""
    bare = {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime", "metadata": {"name": "rt"}}
    job_ = trainjob(patch(annotate("node", a="1")), nodes=2)
    assert patched_runtime(job_, bare) == {**bare, "spec": {"template": {"spec": {"replicatedJobs": []}}}}
    assert trainjob_pod_sets(job_, bare) == []


def test_a_patch_entry_without_a_template_does_not_stop_the_entries_after_it() -> None:
    """mergeRuntimePatches skips (`continue`) a job patch without a template and reads the next one."""
    rt = runtime(job("dataset-initializer", "dataset-initializer"), job("node", "node", ancestor="trainer"))
    merged = patched_runtime(trainjob(patch({"name": "dataset-initializer"}, annotate("node", a="1"))), rt)
    jobs = merged["spec"]["template"]["spec"]["replicatedJobs"]
    assert jobs[0] == rt["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert jobs[1]["template"]["spec"]["template"]["metadata"] == {"annotations": {"a": "1"}}
    assert [p.annotations for p in trainjob_pod_sets(trainjob(patch({"name": "dataset-initializer"},
                                                                     annotate("node", a="1"))), rt)] == [{}, {"a": "1"}]


def test_patching_keeps_the_rest_of_the_runtime() -> None:
    """Only the named jobs' templates change: the runtime's metadata, its ML policy, the JobSet template's own
    metadata (labels and annotations Trainer propagates) and its other spec fields stay as they are."""
    rt = runtime(job("node", "node", ancestor="trainer"), job("launcher", "launcher"),
                 mlPolicy={"numNodes": 2, "torch": {"numProcPerNode": "auto"}})
    rt["spec"]["template"]["metadata"] = {"labels": {"team": "vision"}, "annotations": {"note": "kept"}}
    rt["spec"]["template"]["spec"]["network"] = {"enableDNSHostnames": True}
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    before = copy.deepcopy(rt)
    merged = patched_runtime(trainjob(patch(annotate("node", a="1"))), rt)
    assert rt == before  # the stored runtime is not changed
    assert {k: v for k, v in merged.items() if k != "spec"} == {k: v for k, v in rt.items() if k != "spec"}
    assert merged["spec"]["mlPolicy"] == rt["spec"]["mlPolicy"]
    assert merged["spec"]["podGroupPolicy"] == rt["spec"]["podGroupPolicy"]
    assert merged["spec"]["template"]["metadata"] == {"labels": {"team": "vision"}, "annotations": {"note": "kept"}}
    assert merged["spec"]["template"]["spec"]["network"] == {"enableDNSHostnames": True}
    node, launcher = merged["spec"]["template"]["spec"]["replicatedJobs"]
    assert launcher == rt["spec"]["template"]["spec"]["replicatedJobs"][1]
    assert node["template"]["spec"]["template"]["metadata"] == {"annotations": {"a": "1"}}
    assert node["template"]["metadata"] == {"labels": {ANCESTOR_LABEL: "trainer"}}


def test_a_trainjobs_pod_sets_say_where_each_sits_in_the_runtime() -> None:
    """Each pod set: the job's name, the path of its pod template's metadata in the runtime, its pod count, its
    pods' annotations, its ancestor step (none without the label), its containers and init containers."""
    rt = runtime(job("dataset-initializer", "dataset-initializer", init=("fetch",), ancestor="dataset-initializer"),
                 job("node", "node", "sidecar", ancestor="trainer", annotations={"a": "1"}),
                 job("evaluator", "evaluator", parallelism=2))
    path = "spec.template.spec.replicatedJobs"
    assert trainjob_pod_sets(trainjob(nodes=3), rt) == [
        PodSet("dataset-initializer", f"{path}[0].{META}", 1, {}, "dataset-initializer", ("dataset-initializer",),
               ("fetch",)),
        PodSet("node", f"{path}[1].{META}", 3, {"a": "1"}, "trainer", ("node", "sidecar"), ()),
        PodSet("evaluator", f"{path}[2].{META}", 2, {}, "", ("evaluator",), ())]


def test_a_jobsets_pod_sets_say_where_each_sits_in_the_jobset() -> None:
    spec = {"replicatedJobs": [job("driver", "driver"), job("workers", "w", ancestor="trainer", parallelism=4)]}
    assert jobset_pod_sets(spec) == [
        PodSet("driver", f"spec.replicatedJobs[0].{META}", 1, {}, "", ("driver",), ()),
        PodSet("workers", f"spec.replicatedJobs[1].{META}", 4, {}, "trainer", ("w",), ())]
