"""What the API server refuses in the workload kinds that carry a pod template, beyond their schema:

- Pod and PodTemplate: the pod spec (pods.py);
- Deployment, ReplicaSet, DaemonSet (k8s.io/kubernetes pkg/apis/apps/validation ValidateDeploymentSpec,
  ValidateReplicaSetSpec, ValidateDaemonSetSpec): a non-empty selector that matches the template's labels, the
  template's restartPolicy Always, and its pod spec;
- StatefulSet (ValidateStatefulSetSpec): the same selector and restartPolicy rules; the server leaves the template's
  pod spec to the Pods the controller creates (with a volume per claim template), so those would be refused;
- Job (pkg/apis/batch/validation validateJobSpec, ValidateJobSpec): restartPolicy OnFailure or Never (Never with a
  podFailurePolicy), a manual selector that matches the template's labels, and the pod spec;
- CronJob (ValidateJobTemplateSpec): its Job template as a Job's spec, without a selector of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from infra.apiserver.core_rules.fielderrors import invalid, items, mapping, not_supported, required, text
from infra.apiserver.core_rules.pods import pod_spec_problems, restart_policy
from infra.apiserver.selectors import matches_selector

JOB_RESTART_POLICIES = ("OnFailure", "Never")
MISMATCH = "`selector` does not match template `labels`"
# The detail of an empty selector, per kind, as each validation function words it (ReplicaSet's says deployment).
EMPTY_SELECTOR = {"Deployment": "empty selector is invalid for deployment",
                  "ReplicaSet": "empty selector is invalid for deployment",
                  "DaemonSet": "empty selector is invalid for daemonset",
                  "StatefulSet": "empty selector is not valid for statefulset."}


def _labels(template: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping(mapping(template.get("metadata")).get("labels")).items()}


def _well_formed(selector: Any) -> bool:
    """A selector the schema passes: a mapping of labels and a list of expressions (else the schema's finding)."""
    selector = mapping(selector)
    return isinstance(selector.get("matchLabels", {}), dict) and all(
        isinstance(e, dict) for e in items(selector.get("matchExpressions", [])))


def _selects(selector: Any, template: dict[str, Any], path: str) -> list[str]:
    """The selector matches the template's labels (an absent selector matches nothing, an empty one everything)."""
    if selector is not None and not _well_formed(selector):
        return []
    if selector is None or not matches_selector(mapping(selector), _labels(template)):
        return [invalid(f"{path}.template.metadata.labels", _labels(template), MISMATCH)]
    return []


def replicated_problems(obj: dict[str, Any]) -> list[str]:
    """Deployment, ReplicaSet, DaemonSet and StatefulSet: selector, restartPolicy, pod spec."""
    kind, spec = str(obj.get("kind")), mapping(obj.get("spec"))
    template, selector = mapping(spec.get("template")), spec.get("selector")
    problems: list[str] = []
    if selector is None:
        problems.append(required("spec.selector"))
    elif not mapping(selector).get("matchLabels") and not mapping(selector).get("matchExpressions"):
        problems.append(invalid("spec.selector", selector, EMPTY_SELECTOR[kind]))
    else:
        problems += _selects(selector, template, "spec")
    policy = restart_policy(mapping(template.get("spec")))
    if policy != "Always":
        problems.append(not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
    if kind != "StatefulSet":
        return problems + pod_spec_problems(template.get("spec"), "spec.template.spec")
    claims = [text(mapping(claim.get("metadata")).get("name")) for claim in map(mapping,
                                                                                items(spec.get("volumeClaimTemplates")))]
    return problems + [f"{problem} (the StatefulSet's Pods would be refused)"
                       for problem in pod_spec_problems(template.get("spec"), "spec.template.spec", claims)]


def job_spec_problems(spec: Any, path: str, default_restart: str = "", injected: Iterable[str] = ()) -> list[str]:
    """validateJobSpec on the Job spec at `path`, plus the manual selector's match. `default_restart`: the
    restartPolicy a mutating webhook gives an empty one before the server sees it (JobSet's OnFailure)."""
    spec = mapping(spec)
    template = mapping(spec.get("template"))
    pod = mapping(template.get("spec"))
    problems = pod_spec_problems(pod, f"{path}.template.spec", injected)
    policy, where = text(pod.get("restartPolicy")) or default_restart, f"{path}.template.spec.restartPolicy"
    if policy in ("", "Always"):  # an empty one is defaulted to Always before validation
        problems.append(required(where, 'valid values: "OnFailure", "Never"'))
    elif policy not in JOB_RESTART_POLICIES:
        problems.append(not_supported(where, policy, JOB_RESTART_POLICIES))
    elif spec.get("podFailurePolicy") is not None and policy != "Never":
        problems.append(invalid(where, policy, 'only "Never" is supported when podFailurePolicy is specified'))
    if spec.get("manualSelector") is True:
        if spec.get("selector") is None:
            problems.append(required(f"{path}.selector"))
        problems += _selects(spec.get("selector"), template, path)
    return problems


def job_problems(obj: dict[str, Any]) -> list[str]:
    return job_spec_problems(obj.get("spec"), "spec")


def cron_job_problems(obj: dict[str, Any]) -> list[str]:
    """ValidateJobTemplateSpec: the Job spec, whose selector the cronjob controller generates."""
    job = mapping(mapping(mapping(obj.get("spec")).get("jobTemplate")).get("spec"))
    problems = job_spec_problems(job, "spec.jobTemplate.spec")
    if job.get("selector") is not None:
        problems.append(invalid("spec.jobTemplate.spec.selector", job["selector"], "`selector` will be "
                                "auto-generated"))
    if job.get("manualSelector") is True:
        problems.append(not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"]))
    return problems


def pod_problems(obj: dict[str, Any]) -> list[str]:
    return pod_spec_problems(obj.get("spec"), "spec")


def pod_template_problems(obj: dict[str, Any]) -> list[str]:
    return pod_spec_problems(mapping(obj.get("template")).get("spec"), "template.spec")


# (apiVersion, kind) -> the rule
RULES: dict[tuple[str, str], Callable[[dict[str, Any]], list[str]]] = {
    ("v1", "Pod"): pod_problems,
    ("v1", "PodTemplate"): pod_template_problems,
    **{("apps/v1", kind): replicated_problems for kind in EMPTY_SELECTOR},
    ("batch/v1", "Job"): job_problems,
    ("batch/v1", "CronJob"): cron_job_problems,
}
