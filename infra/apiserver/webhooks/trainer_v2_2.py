"""Kubeflow Trainer 2.2 validating webhooks, re-written from the upstream source at v2.2.1 (kubeflow/trainer):
the runtime webhooks (`pkg/webhooks/{clustertrainingruntime,trainingruntime}_webhook.go`) and the TrainJob
webhook (`pkg/webhooks/trainjob_webhook.go`), which looks the runtime up and runs the ML-policy plugins'
Validate (`pkg/runtime/framework/plugins/{torch,mpi,xgboost,jobset}`)."""

from __future__ import annotations

import math
from typing import Any

from infra.apiserver import quantity
from infra.apiserver.state import TRAINER_GROUP, ClusterState
from infra.apiserver.verdict import Refusal
from infra.apiserver.webhooks.podsets import jobset_pod_sets, patched_runtime, trainjob_pod_sets
from infra.spec.names import domain_prefixed_path

FAMILY = "webhook:trainer"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
# pkg/webhooks/trainingruntime_webhook.go expectedContainerNames: ancestor label -> container it must have
ANCESTOR_CONTAINERS = {"trainer": "node", "model-initializer": "model-initializer",
                       "dataset-initializer": "dataset-initializer"}
# pkg/constants/constants.go
TORCH_RESERVED_ENV = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                                "PET_MASTER_PORT"})
XGBOOST_RESERVED_ENV = frozenset({"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"})
FLUX_INSTALLER = "flux-installer"
TORCHTUNE_ENTRYPOINT = ["tune", "run"]
TORCHTUNE_MODELS = frozenset({"llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B"})
TORCHTUNE_MULTI_NODE_MODEL = "llama3_3/70B"
TORCHTUNE_LORA_ATTN_MODULES, TORCHTUNE_QUANTIZE_BASE, TORCHTUNE_USE_DORA = (
    "model.lora_attn_modules", "model.quantize_base", "model.use_dora")


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def runtime(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    """trainingruntime_webhook.go validateReplicatedJobs (both runtime kinds): a replicated job labelled as a
    trainer or initializer ancestor has 1 replica and the container of its ancestor."""
    found = []
    jobs = obj.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
    for i, job in enumerate(jobs):
        ancestor = job.get("template", {}).get("metadata", {}).get("labels", {}).get(
            "trainer.kubeflow.org/trainjob-ancestor-step")
        if ancestor not in ANCESTOR_CONTAINERS:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        if int(job.get("replicas", 1)) != 1:
            found.append(_refuse(f"{path}.replicas", "always must be 1"))
        containers = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        if not any(c.get("name") == ANCESTOR_CONTAINERS[ancestor] for c in containers):
            found.append(_refuse(f"{path}.template.spec.template.spec.containers",
                                 f"must contain the required container for the ancestor: {ancestor}"))
    return found


def torchtune_model(runtime_name: str) -> str:
    """plugins/torch/torchtune.go getModelFromRuntimeRef: the model is read from the runtime's name, which
    must have exactly three dash-separated parts (`torchtune-llama3.2-1b` -> `llama3_2/1B`)."""
    fields = runtime_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def _gpus(resources: dict[str, Any]) -> int:
    """pkg/runtime/runtime.go GetNumGPUPerNode: the first resource whose name contains "gpu", from the requests,
    else from the limits, rounded up."""
    for amounts in (resources.get("requests") or {}, resources.get("limits") or {}):
        for name, amount in amounts.items():
            if "gpu" in name.lower() and quantity.valid(amount):
                if count := math.ceil(quantity.parse(amount)):
                    return count
                break
    return 0


def _node_resources(runtime: dict[str, Any]) -> dict[str, Any]:
    """runtime.go ExtractResourcePerNodeFromRuntime: the `node` container's resources in the trainer job."""
    for pod_set in runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
        labels = pod_set.get("template", {}).get("metadata", {}).get("labels", {})
        if pod_set.get("name") == "node" or labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer":
            for container in pod_set.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}).get(
                    "containers", []):
                if container.get("name") == "node" and container.get("resources") is not None:
                    return dict(container["resources"])
    return {}


def torchtune_config(model: str, trainer: dict[str, Any], gpus: int) -> str:
    """torchtune.go getRecipeAndConfig: the config the recipe would run, the model followed by a suffix chosen by
    node count, processes per node, GPUs per node and the LoRA/QLoRA arguments (QLoRA: `model.quantize_base`
    without `model.use_dora`; LoRA: `model.lora_attn_modules`)."""
    args = [str(a) for a in trainer.get("args", []) or []]
    qlora = not any(TORCHTUNE_USE_DORA in a for a in args) and any(TORCHTUNE_QUANTIZE_BASE in a for a in args)
    lora = any(TORCHTUNE_LORA_ATTN_MODULES in a for a in args)
    nodes = int(trainer.get("numNodes", 1))
    single_device = trainer.get("numProcPerNode") == 1 or gpus == 1
    if nodes == 1 and single_device:
        suffix = "_qlora_single_device" if qlora else "_lora_single_device" if lora else "_full_single_device"
    elif nodes == 1:
        suffix = "_qlora" if qlora else "_lora" if lora else "_full"
    else:
        suffix = "_full_multinode"
    return model + suffix


def _torch(job: dict[str, Any], runtime: dict[str, Any]) -> list[Refusal]:
    """plugins/torch/torch.go Validate and, for a TrainJob running `tune run`, torchtune.go validateTorchTune:
    the pretrained model, the node count and the QLoRA recipe rules. `runtime` has the TrainJob's patches."""
    trainer = job.get("spec", {}).get("trainer", {})
    found = []
    reserved = sorted({e.get("name") for e in trainer.get("env", [])} & TORCH_RESERVED_ENV)
    if reserved:
        found.append(_refuse("spec.trainer.env", "must not have reserved envs, invalid envs configured: "
                             f"[{' '.join(reserved)}]"))  # Go's %v of a []string
    if trainer.get("command") != TORCHTUNE_ENTRYPOINT:
        return found
    model = torchtune_model(str(job.get("spec", {}).get("runtimeRef", {}).get("name", "")))
    if model not in TORCHTUNE_MODELS:
        found.append(_refuse("spec.runtimeRef.name", "must have a supported pretrained model, invalid model "
                             f"configured: {model}"))
    if int(trainer.get("numNodes", 1)) > 1 and model != TORCHTUNE_MULTI_NODE_MODEL:
        found.append(_refuse("spec.trainer.numNodes", f"must be 1 for {model} model"))
    resources = trainer.get("resourcesPerNode")  # the TrainJob's, when set (even empty), else the runtime's
    config = torchtune_config(model, trainer, _gpus(_node_resources(runtime) if resources is None else resources))
    if "_qlora" in config:
        if model == "qwen2_5/1.5B":
            found.append(_refuse("spec.runtimeRef.name", f"QLoRA is not supported for {model} model"))
        if "_qlora_single_device" not in config and model in ("llama3_2/1B", "llama3_2/3B"):
            found += [_refuse("spec.trainer.numProcPerNode", f"must be auto or 1 for {model} model when using QLoRA"),
                      _refuse("spec.trainer.resourcesPerNode", f"must have gpu resource with value 1 for {model} "
                              "model when using QLoRA")]
    return found


def trainjob(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """trainjob_webhook.go ValidateCreate: the runtime kind is registered and the runtime exists
    (pkg/runtime/core/*trainingruntime.go ValidateObjects), then every plugin's Validate."""
    spec = obj.get("spec", {})
    ref = spec.get("runtimeRef", {})
    group, kind = ref.get("apiGroup", TRAINER_GROUP), ref.get("kind", "ClusterTrainingRuntime")
    if group != TRAINER_GROUP or kind not in RUNTIME_KINDS:
        return [_refuse("", f"unsupported runtime: {kind}.{group}")]
    namespace = obj.get("metadata", {}).get("namespace", "")
    found_runtime = cluster.runtime(kind, str(ref.get("name", "")), namespace)
    if found_runtime is None:
        article = "clusterTrainingRuntime" if kind == "ClusterTrainingRuntime" else "trainingRuntime"
        return [_refuse("spec.runtimeRef", f"{kind} {ref.get('name')!r} not found: specified {article} must be "
                        "created before the TrainJob is created")]
    policy = found_runtime.get("spec", {}).get("mlPolicy", {})
    patched = patched_runtime(obj, found_runtime)  # the plugins validate against the runtime info, patches merged
    found = []
    if "torch" in policy:
        found += _torch(obj, patched)
    trainer = spec.get("trainer", {})
    if "mpi" in policy and int(trainer.get("numNodes", 1)) >= 2 and policy["mpi"].get("runLauncherAsNode"):
        names = {p.name for p in trainjob_pod_sets(obj, found_runtime)}
        if not {"launcher", "node"} <= names:  # plugins/mpi/mpi.go Validate
            found.append(_refuse("spec.trainer.numNodes", "must have 1 when MPI trainingRuntime with enabled "
                                 "runLauncherAsNode does not have either launcher and node"))
    if "flux" in policy:
        found += _flux(policy["flux"], patched)
    if "xgboost" in policy:  # plugins/xgboost/xgboost.go Validate
        found += [_refuse(f"spec.trainer.env[{i}]", f"{e.get('name')} is reserved for the XGBoost runtime")
                  for i, e in enumerate(trainer.get("env", [])) if e.get("name") in XGBOOST_RESERVED_ENV]
    return found + _jobset_plugin(obj, patched)


def _flux(policy: dict[str, Any], patched: dict[str, Any]) -> list[Refusal]:
    """plugins/flux/flux.go Validate: the runtime's Flux policy runs at least one process per node, and the node
    pod set has no init container of the name the plugin reserves for its installer
    (constants.FluxInstallerContainerName)."""
    found = []
    processes = policy.get("numProcPerNode")
    if processes is not None and int(processes) < 1:
        found.append(_refuse("spec.trainer.numProcPerNode", f"Invalid value: {int(processes)}: must be greater than "
                             "or equal to 1 for Flux TrainJob"))
    for pod_set in jobset_pod_sets(patched.get("spec", {}).get("template", {}).get("spec", {})):
        if pod_set.name == "node" and FLUX_INSTALLER in pod_set.init_containers:
            found.append(_refuse("spec.trainer.initContainers", f'Invalid value: "{FLUX_INSTALLER}": InitContainer '
                                 f"'{FLUX_INSTALLER}' is reserved"))
    return found


def _jobset_plugin(obj: dict[str, Any], patched: dict[str, Any]) -> list[Refusal]:
    """plugins/jobset/jobset.go Validate: initializers the TrainJob configures exist in the runtime; runtime
    patches name existing jobs and containers and set no env on the initializer and node containers. Upstream
    reads the container names from the runtime info, where the patches are already merged, so a patch's own new
    container counts as existing there too."""
    spec = obj.get("spec", {})
    containers = {p.name: {*p.containers, *p.init_containers}
                  for p in jobset_pod_sets(patched.get("spec", {}).get("template", {}).get("spec", {}))}
    found = []
    for part, job_name in (("dataset", "dataset-initializer"), ("model", "model-initializer")):
        if part not in spec.get("initializer", {}):
            continue
        if job_name not in containers:
            found.append(_refuse("spec.runtimeRef", f"must have {job_name} job when trainJob is configured with "
                                 f"input {part}Config"))
        elif job_name not in containers[job_name]:
            found.append(_refuse("spec.runtimeRef", f"must have container with name - {job_name} in the "
                                 f"{job_name} job"))
    for i, patch in enumerate(spec.get("runtimePatches", [])):
        path = "spec.runtimePatches"
        found += [_refuse(f"{path}[{i}].manager", p) for p in domain_prefixed_path(str(patch.get("manager", "")))]
        jobs = patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
        for job_patch in jobs:
            name = job_patch.get("name")
            if name not in containers:
                found.append(_refuse(path, "must not have replicated job that doesn't exist in the runtime job "
                                     "template"))
                continue
            pod = job_patch.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            for key, word in (("initContainers", "initContainer"), ("containers", "container")):
                for container in pod.get(key, []):
                    if container.get("name") not in containers[name]:
                        found.append(_refuse(path, f"must not have {word} that doesn't exist in the runtime job "
                                             f"{name}"))
                    elif (key == "containers" and container.get("env")
                          and container.get("name") in ANCESTOR_CONTAINERS.values()):
                        found.append(_refuse(path, "must not have envs for the dataset-initializer, "
                                             "model-initializer, node containers"))
    return found
