"""Pod templates inside custom resources, which the API server sees only when a controller creates objects from them:
a JobSet's replicatedJobs[].template is the spec of the Jobs the JobSet controller creates, and a (Cluster)
TrainingRuntime's spec.template is the JobSet that Trainer creates for every TrainJob on it. The CRD schemas
accept a template those Jobs' validation refuses (workloads.job_spec_problems), so the JobSet or the runtime is
admitted and fails later, at every run: each problem is reported at its path in the object, naming the child.

The JobSet webhook's defaults apply first (kubernetes-sigs/jobset jobset_webhook.go Default: an empty restartPolicy
becomes OnFailure), and the JobSet controller adds a claim volume to the pods for each volumeClaimPolicies
template, so mounts of those names are found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.apiserver.core_rules.fielderrors import items, mapping, text
from infra.apiserver.core_rules.workloads import job_spec_problems

JOBSET_DEFAULT_RESTART = "OnFailure"


def claim_names(spec: dict[str, Any]) -> list[str]:
    """The claim volumes the JobSet controller adds to the pods of the JobSet spec (volumeClaimPolicies)."""
    return [text(mapping(mapping(template).get("metadata")).get("name"))
            for policy in items(spec.get("volumeClaimPolicies"))
            for template in items(mapping(policy).get("templates"))]


def jobset_spec_problems(spec: Any, path: str, child: str) -> list[str]:
    """The refusals of the Jobs a JobSet spec at `path` makes, each followed by `child` (who would refuse)."""
    spec = mapping(spec)
    claims = claim_names(spec)
    problems: list[str] = []
    for i, job in enumerate(items(spec.get("replicatedJobs"))):
        job_spec = mapping(mapping(job).get("template")).get("spec")
        problems += job_spec_problems(job_spec, f"{path}.replicatedJobs[{i}].template.spec", JOBSET_DEFAULT_RESTART,
                                      claims)
    return [f"{problem} ({child})" for problem in problems]


def jobset_problems(obj: dict[str, Any]) -> list[str]:
    return jobset_spec_problems(obj.get("spec"), "spec", "the Jobs the JobSet controller creates from it would be "
                                "refused")


def runtime_problems(obj: dict[str, Any]) -> list[str]:
    template = mapping(mapping(obj.get("spec")).get("template"))
    return jobset_spec_problems(template.get("spec"), "spec.template.spec", "every TrainJob on this runtime fails: "
                                "the Jobs the JobSet controller creates for it would be refused")


# (API group, kind) -> the rule; any served version of the group holds the same template.
RULES: dict[tuple[str, str], Callable[[dict[str, Any]], list[str]]] = {
    ("jobset.x-k8s.io", "JobSet"): jobset_problems,
    ("trainer.kubeflow.org", "TrainingRuntime"): runtime_problems,
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): runtime_problems,
}
