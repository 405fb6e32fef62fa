"""Pipeline objects as Argo and Kubeflow Pipelines 2.16 write them, for the admission tests: Workflows (a plain one,
and one shaped as KFP's compiler emits it: a task's container spec as a JSON argument), a step pod as the Argo
controller creates it, and the TrainJob a step submits. The Argo and KFP CRDs come from the vendored Kubeflow
Platform 26.03 when a stack does not render them."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import tarfile
from types import ModuleType
from typing import Any

import yaml

from infra.offline.manifestcache import vendored
from infra.platform.admission_steps import STEP_ACCOUNT
from infra.spec import Platform
from infra.spec.versions import KUBEFLOW_MANIFESTS
from tests.conftest import ROOT

ARGO = "argoproj.io/v1alpha1"
QUEUE = "kueue.x-k8s.io/queue-name"
ARGO_CRDS = "localized-files/github.com/argoproj/argo-workflows/v3.7.3/manifests/base/crds/minimal/"
SCHEDULED_CRD = "applications/pipeline/upstream/base/pipeline/cluster-scoped/scheduled-workflow-crd.yaml"
ARGO_CONTROLLER = "system:serviceaccount:kubeflow:argo"  # the workflow-controller Deployment's ServiceAccount
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
EXAMPLE = ROOT / "examples" / "pipelines"


@functools.cache
def example_module(file: str) -> ModuleType:
    """A program of the example pipeline (steps.py, register.py): standard library only, so the test environment
    imports it."""
    spec = importlib.util.spec_from_file_location(f"pipeline_{file.removesuffix('.py')}", EXAMPLE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _vendored_crds() -> tuple[str, ...]:
    top = KUBEFLOW_MANIFESTS.top
    with tarfile.open(vendored() / KUBEFLOW_MANIFESTS.archive, "r:gz") as tar:
        return tuple(tar.extractfile(m).read().decode("utf-8")  # type: ignore[union-attr]
                     for m in tar if m.isfile() and (m.name.startswith(f"{top}/{ARGO_CRDS}argoproj.io_")
                                                     or m.name == f"{top}/{SCHEDULED_CRD}"))


def vendored_crds() -> list[dict[str, Any]]:
    """Argo's CRDs (the minimal ones KFP installs) and KFP's ScheduledWorkflow CRD, as the archive ships them."""
    return [yaml.safe_load(text) for text in _vendored_crds()]


def image(platform: Platform) -> str:
    """An image the stack's registry policy allows: its first runtime's."""
    return str(next(c["image"] for runtime in platform.runtimes for job in runtime["spec"]["template"]["spec"][
        "replicatedJobs"] for c in job["template"]["spec"]["template"]["spec"]["containers"]))


def container(picture: str, gpus: int | str | None = None, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    if gpus is not None:
        resources["limits"][resource] = gpus
    return {"name": "main", "image": picture, "command": ["python3", "step.py"], "resources": resources}


def workflow(namespace: str, *templates: dict[str, Any], name: str = "prepare", kind: str = "Workflow",
             **spec: Any) -> dict[str, Any]:
    body = {"entrypoint": templates[0]["name"] if templates else "main", "templates": list(templates), **spec}
    return {"apiVersion": ARGO, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": body}


def cron_workflow(namespace: str, *templates: dict[str, Any]) -> dict[str, Any]:
    inner = workflow(namespace, *templates)["spec"]
    return {"apiVersion": ARGO, "kind": "CronWorkflow", "metadata": {"name": "nightly", "namespace": namespace},
            "spec": {"schedule": "0 3 * * *", "workflowSpec": inner}}


def scheduled_workflow(namespace: str, inner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "ScheduledWorkflow",
            "metadata": {"name": "nightly", "namespace": namespace},
            "spec": {"enabled": True, "maxConcurrency": 1, "trigger": {"cronSchedule": {"cron": "0 0 3 * * *"}},
                     "workflow": {"spec": copy.deepcopy(inner["spec"])}},
            "status": {}}  # required by the CRD, which has no status subresource


def kfp_run(namespace: str, accelerator: dict[str, str] | None = None) -> dict[str, Any]:
    """A run's Workflow as KFP 2.16's compiler writes it (kubeflow/pipelines backend/src/v2/compiler/argocompiler
    testdata/hello_world.yaml, shortened): the task's container spec, `resources.accelerator` included when the task
    sets one, is the JSON of a workflow parameter that a DAG task passes to the driver; the executor's pod gets the
    driver's podSpecPatch at run time."""
    implementation: dict[str, Any] = {"command": ["python3", "-c", "print('hi')"], "image": "python:3.12"}
    if accelerator is not None:
        implementation["resources"] = {"accelerator": accelerator}
    driver = {"name": "system-container-driver", "inputs": {"parameters": [{"name": "container"}]},
              "container": {"image": "ghcr.io/kubeflow/kfp-driver:2.16.0", "command": ["driver"],
                            "args": ["--container", "{{inputs.parameters.container}}"],
                            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}}}}
    executor = {"name": "system-container-impl", "inputs": {"parameters": [{"name": "pod-spec-patch"}]},
                "podSpecPatch": "{{inputs.parameters.pod-spec-patch}}",
                "container": {"image": "gcr.io/ml-pipeline/should-be-overridden-during-runtime",
                              "command": ["should-be-overridden-during-runtime"], "resources": {}}}
    root = {"name": "root", "dag": {"tasks": [
        {"name": "train-driver", "template": "system-container-driver", "arguments": {"parameters": [
            {"name": "container", "value": "{{workflow.parameters.implementations-train}}"}]}},
        {"name": "train", "template": "system-container-impl", "depends": "train-driver.Succeeded",
         "arguments": {"parameters": [
             {"name": "pod-spec-patch", "value": "{{tasks.train-driver.outputs.parameters.pod-spec-patch}}"}]}}]}}
    run = workflow(namespace, root, driver, executor, name="train-pipeline", serviceAccountName=STEP_ACCOUNT,
                   arguments={"parameters": [{"name": "implementations-train", "value": json.dumps(
                       implementation, separators=(",", ":"), sort_keys=True)}]})
    run["metadata"].pop("name")
    run["metadata"]["generateName"] = "train-pipeline-"
    run["metadata"]["name"] = "train-pipeline-x7k2p"  # what generateName yields; admit needs a name
    return run


GPU_ACCELERATOR = {"count": "1", "resourceCount": "1", "resourceType": "nvidia.com/gpu", "type": "nvidia.com/gpu"}


def step_pod(namespace: str, picture: str, gpus: int | None = None) -> dict[str, Any]:
    """A step pod as the Argo controller creates it: owned by its Workflow, labelled with it, non-root."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "prepare-main-1234", "namespace": namespace,
        "labels": {"workflows.argoproj.io/workflow": "prepare", "workflows.argoproj.io/completed": "false"},
        "ownerReferences": [{"apiVersion": ARGO, "kind": "Workflow", "name": "prepare", "uid": "wf-uid",
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"restartPolicy": "Never", "serviceAccountName": STEP_ACCOUNT,
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                     "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{**container(picture, gpus), "securityContext": {
                     "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}


def step_trainjob(namespace: str, queue: str) -> dict[str, Any]:
    """The TrainJob a step submits: one CPU node of the cpu-batch runtime, on `queue`."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "train-step", "namespace": namespace, "labels": {QUEUE: queue}},
            "spec": {"runtimeRef": {"name": "cpu-batch"},
                     "trainer": {"numNodes": 1, "command": ["python3", "/opt/project/train.py"],
                                 "resourcesPerNode": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                      "limits": {"cpu": "1", "memory": "1Gi"}}}}}
