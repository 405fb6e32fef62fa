"""Pipeline steps meet the queue like every other workload (issue 30 point 4).

Kueue cannot manage an Argo Workflow, and its `pod` integration stays off (with manageJobsWithoutQueueName it
would gate every Deployment and KFP driver pod of a team namespace). So GPU work from a pipeline step goes
through a Kueue-managed job the step creates (a TrainJob, or a batch Job), never through the step's own pod:

- at the pod, `trainyard-queue-required` already refuses a GPU pod from anyone but the job controller, and the
  Argo controller (`system:serviceaccount:kubeflow:argo`) is not the job controller: an ownerReference to a
  Workflow exempts nothing;
- at submission, `trainyard-pipeline-steps` (here) refuses the Workflow, WorkflowTemplate, CronWorkflow or KFP
  ScheduledWorkflow whose steps would ask for a GPU, so a run fails when it is created, with the reason, not
  hours later at its GPU step: a template container (container, script, containerSet, init containers,
  sidecars) requesting a GPU resource, a podSpecPatch naming one, or a KFP task with an accelerator (KFP 2.16
  passes a task's container spec, `resources.accelerator` included, as a JSON argument that its driver turns
  into the step pod's podSpecPatch at run time: visible only as text at submission);
- the run's ServiceAccount (the team's data account, infra/platform/kfp/teams.py `pipeline-runner`) may create
  TrainJobs in its own namespace, which the queue policy holds to that namespace's LocalQueues.
"""

from __future__ import annotations

import re
from typing import Any

from infra.platform.admission_cel import asks_gpu, every_pod_spec, lit, when
from infra.platform.kfp.patches import RUNNER_ACCOUNT
from infra.vocabulary import GPU_RESOURCE_PREFIX, QUEUE_LABEL

# The ServiceAccount KFP runs a namespace's Workflows as (pipeline-install-config DEFAULTPIPELINERUNNERSERVICEACCOUNT,
# patched from upstream's `default-editor` to the team's data account: infra/platform/kfp/patches.py).
STEP_ACCOUNT = RUNNER_ACCOUNT
# Kinds that carry a Workflow spec, by resource: (API group, path to the Workflow spec).
PIPELINE_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "workflows": ("argoproj.io", ("spec",)),
    "workflowtemplates": ("argoproj.io", ("spec",)),
    "cronworkflows": ("argoproj.io", ("spec", "workflowSpec")),
    "scheduledworkflows": ("kubeflow.org", ("spec", "workflow", "spec")),
}
# A GPU resource as a key of a podSpecPatch (JSON or YAML): `"nvidia.com/gpu": 1` or `nvidia.com/gpu: 1`.
GPU_KEY = re.escape(GPU_RESOURCE_PREFIX) + r"""[A-Za-z0-9._-]+["']?\s*:"""
# A KFP task's accelerator, non-empty, in its container spec JSON (`"accelerator":{"type":"nvidia.com/gpu",...}`).
ACCELERATOR = r'"accelerator"\s*:\s*\{\s*"'
SINGLE = ("container", "script")
LISTS = ("initContainers", "sidecars")


def _text_free(var: str, pattern: str) -> str:
    """CEL: the optional text field `var` does not match `pattern`."""
    parent, _, field = var.rpartition(".")
    return f"(!has({parent}.{field}) || !string({var}).matches({lit(pattern)}))"


def _template_ok(t: str) -> str:
    """CEL over template `t`: none of its containers asks for a GPU, its podSpecPatch names none."""
    single = [f"(!has({t}.{f}) || !{asks_gpu(f'{t}.{f}', 'resources')})" for f in SINGLE]
    lists = [f"(!has({t}.{f}) || {t}.{f}.all(c, !{asks_gpu('c', 'resources')}))" for f in LISTS]
    group = (f"(!has({t}.containerSet) || !has({t}.containerSet.containers) || "
             f"{t}.containerSet.containers.all(c, !{asks_gpu('c', 'resources')}))")
    return " && ".join([*single, *lists, group, _text_free(f"{t}.podSpecPatch", GPU_KEY)])


def _arguments_free(var: str) -> str:
    """CEL: no parameter of the optional arguments `var` declares a KFP accelerator."""
    return (f"(!has({var}) || !has({var}.parameters) || {var}.parameters.all(p, "
            f"{_text_free('p.value', ACCELERATOR)}))")


def steps_gpu_free() -> str:
    """CEL over Workflow spec `s`: no template (nor the template defaults, nor the spec's podSpecPatch) asks for
    a GPU."""
    return (f"(!has(s.templates) || s.templates.all(t, {_template_ok('t')})) && "
            f"(!has(s.templateDefaults) || [s.templateDefaults].all(t, {_template_ok('t')})) && "
            f"{_text_free('s.podSpecPatch', GPU_KEY)}")


def tasks_accelerator_free() -> str:
    """CEL over Workflow spec `s`: no argument (the Workflow's, a DAG task's or a step's) carries a KFP task's
    accelerator."""
    dag = f"(!has(t.dag) || !has(t.dag.tasks) || t.dag.tasks.all(d, {_arguments_free('d.arguments')}))"
    steps = f"(!has(t.steps) || t.steps.all(g, g.all(d, {_arguments_free('d.arguments')})))"
    return f"{_arguments_free('s.arguments')} && (!has(s.templates) || s.templates.all(t, {dag} && {steps}))"


def pipeline_policy() -> dict[str, Any]:
    fix = (f"have the step create a TrainJob labelled {QUEUE_LABEL} with your team's LocalQueue (Kueue admits it "
           "against the team's quota)")
    validations = []
    for resource, (_, path) in PIPELINE_KINDS.items():
        validations += [
            {"expression": when(resource, every_pod_spec(path, steps_gpu_free())), "reason": "Forbidden",
             "message": f"a pipeline step may not request GPUs ({GPU_RESOURCE_PREFIX}* in a template's containers "
                        f"or podSpecPatch): its pod would run outside Kueue; {fix}"},
            {"expression": when(resource, every_pod_spec(path, tasks_accelerator_free())), "reason": "Forbidden",
             "message": "a KFP task may not set an accelerator (set_accelerator_type/limit): its step pod would "
                        f"run outside Kueue; {fix}"},
        ]
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [group], "apiVersions": ["*"], "resources": [resource], "operations": ["CREATE", "UPDATE"]}
            for resource, (group, _) in PIPELINE_KINDS.items()]},
        "validations": validations,
    }
