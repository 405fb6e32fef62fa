"""A TrainJob's Jobs as the JobSet controller will create them, judged by the API server's Job rules. The TrainJob
is admitted, then Trainer 2.2.1 builds a JobSet from its runtime and the TrainJob's overrides, and the JobSet
controller's Jobs are refused: the TrainJob never runs. The JobSet is built as kubeflow/trainer v2.2.1 does for the
fields that reach pod specs:

- spec.runtimePatches: merged into the runtime (pkg/runtime/core/trainingruntime.go mergeRuntimePatches, modelled
  by webhooks/podsets.patched_runtime);
- spec.trainer image, command and args: set on the `node` container of the trainer job (the job labelled with
  ancestor `trainer`); resourcesPerNode replaces that container's resources whole (requests and limits as the
  TrainJob gives them), also on the `node` job of an MPI runtime that runs its launcher as a node; env is upserted
  by name (pkg/runtime/framework/plugins/jobset/builder.go Trainer);
- spec.initializer.dataset / model: STORAGE_URI, env and the secret's envFrom on the initializer's own container
  (builder.go Initializer).

Each refusal is reported at the TrainJob field whose change brought it: the Jobs are built one field at a time, and a
refusal the runtime alone already earns is the runtime's finding (children.runtime_problems), not the TrainJob's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from infra.apiserver.core_rules.children import JOBSET_DEFAULT_RESTART, claim_names
from infra.apiserver.core_rules.fielderrors import items, mapping, text
from infra.apiserver.core_rules.workloads import job_spec_problems
from infra.apiserver.state import TRAINER_GROUP
from infra.apiserver.webhooks.podsets import ANCESTOR_LABEL, patched_runtime
from infra.apiserver.webhooks.trainer_v2_2 import RUNTIME_KINDS

# (kind, name, namespace) -> the runtime the cluster holds, or None
RuntimeLookup = Callable[[str, str, str], dict[str, Any] | None]
Jobs = list[dict[str, Any]]

TRAINER, NODE = "trainer", "node"
INITIALIZERS = {"dataset": "dataset-initializer", "model": "model-initializer"}  # spec.initializer key -> job
STORAGE_URI = "STORAGE_URI"  # jobset/constants InitializerEnvStorageUri


def _ancestor(job: dict[str, Any]) -> str:
    return text(mapping(mapping(mapping(job.get("template")).get("metadata")).get("labels")).get(ANCESTOR_LABEL))


def _containers(job: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The containers of that name in the job's pod template (mutable: the jobs are the caller's copy)."""
    pod = mapping(mapping(mapping(mapping(job.get("template")).get("spec")).get("template")).get("spec"))
    return [c for c in items(pod.get("containers")) if isinstance(c, dict) and c.get("name") == name]


def _upsert_env(container: dict[str, Any], env: list[Any]) -> None:
    """apply.UpsertEnvVars: a variable replaces the one of its name, else is appended."""
    current = [e for e in items(container.get("env")) if isinstance(e, dict)]
    for var in (e for e in env if isinstance(e, dict)):
        at = next((i for i, e in enumerate(current) if e.get("name") == var.get("name")), None)
        current = [*current, var] if at is None else [*current[:at], var, *current[at + 1:]]
    container["env"] = current


def _node_containers(jobs: Jobs, launcher_as_node: bool) -> Iterator[dict[str, Any]]:
    """The `node` containers of the trainer job, and of the `node` job when an MPI launcher runs as a node."""
    for job in jobs:
        if _ancestor(job) == TRAINER or (launcher_as_node and job.get("name") == NODE):
            yield from _containers(job, NODE)


def _trainer_field(key: str, launcher_as_node: bool) -> Callable[[Jobs, dict[str, Any]], None]:
    """builder.go Trainer for one field of spec.trainer."""
    def apply(jobs: Jobs, trainer: dict[str, Any]) -> None:
        value = trainer.get(key)
        if key in ("image", "command", "args"):  # set on the trainer job's container only, when given
            for container in _node_containers(jobs, False):
                if value is not None:
                    container[key] = value
        elif key == "resourcesPerNode":
            given = {part: mapping(value)[part] for part in ("limits", "requests")
                     if mapping(value).get(part) is not None}
            for container in _node_containers(jobs, launcher_as_node) if given else ():
                container["resources"] = dict(given)
        else:
            for container in _node_containers(jobs, launcher_as_node):
                _upsert_env(container, items(value))
    return apply


def _initializer(key: str) -> Callable[[Jobs, dict[str, Any]], None]:
    """builder.go Initializer for spec.initializer.<key>."""
    def apply(jobs: Jobs, initializer: dict[str, Any]) -> None:
        source = initializer.get(key)
        if not isinstance(source, dict):
            return
        for job in (j for j in jobs if _ancestor(j) == INITIALIZERS[key]):
            for container in _containers(job, INITIALIZERS[key]):
                if source.get("storageUri") is not None:
                    _upsert_env(container, [{"name": STORAGE_URI, "value": source["storageUri"]}])
                _upsert_env(container, items(source.get("env")))
                secret = mapping(source.get("secretRef")).get("name")
                if secret is not None:
                    container["envFrom"] = [*items(container.get("envFrom")), {"secretRef": {"name": secret}}]
    return apply


def _refusals(jobs: Jobs, claims: list[str]) -> dict[str, list[str]]:
    """Each replicated job's refusals, at the paths of the Job the JobSet controller creates (spec...)."""
    return {text(job.get("name")): job_spec_problems(mapping(job.get("template")).get("spec"), "spec",
                                                     JOBSET_DEFAULT_RESTART, claims) for job in jobs}


def trainjob_problems(obj: dict[str, Any], runtimes: RuntimeLookup) -> list[str]:
    """The refusals of the Jobs a TrainJob's JobSet would have, each at the TrainJob field that brings it; none when
    its runtime is unknown (the Trainer webhook refuses that TrainJob)."""
    spec = mapping(obj.get("spec"))
    ref = mapping(spec.get("runtimeRef"))
    kind = text(ref.get("kind")) or "ClusterTrainingRuntime"
    if (text(ref.get("apiGroup")) or TRAINER_GROUP) != TRAINER_GROUP or kind not in RUNTIME_KINDS:
        return []
    runtime = runtimes(kind, text(ref.get("name")), text(mapping(obj.get("metadata")).get("namespace")))
    if runtime is None:
        return []
    policy = mapping(mapping(runtime.get("spec")).get("mlPolicy"))
    launcher_as_node = mapping(policy.get("mpi")).get("runLauncherAsNode") is True
    trainer, initializer = mapping(spec.get("trainer")), mapping(spec.get("initializer"))
    template_spec = mapping(mapping(mapping(runtime.get("spec")).get("template")).get("spec"))
    claims = claim_names(template_spec)
    # (the TrainJob field, how it changes the jobs, the part of the TrainJob it reads), applied in turn
    steps: list[tuple[str, Callable[[Jobs, dict[str, Any]], None], dict[str, Any]]] = [
        *((f"spec.trainer.{key}", _trainer_field(key, launcher_as_node), trainer)
          for key in ("image", "command", "args", "resourcesPerNode", "env") if key in trainer),
        *((f"spec.initializer.{key}", _initializer(key), initializer) for key in INITIALIZERS if key in initializer)]
    jobs = [j for j in items(template_spec.get("replicatedJobs")) if isinstance(j, dict)]
    before = _refusals(jobs, claims)
    patched = patched_runtime(obj, runtime)["spec"]["template"]["spec"]["replicatedJobs"]
    jobs = copy.deepcopy([j for j in items(patched) if isinstance(j, dict)])
    problems: list[str] = []
    for cause, change, part in [("spec.runtimePatches", lambda _jobs, _part: None, spec), *steps]:
        change(jobs, part)
        after = _refusals(jobs, claims)
        problems += [f"{cause}: the {name!r} Jobs the JobSet controller creates for this TrainJob would be refused: "
                     f"{problem}" for name, found in after.items() for problem in found
                     if problem not in before.get(name, [])]
        before = after
    return problems
