"""The operators' validating webhooks, re-written per component minor version: the registry picks the rules of
the pinned Kueue, Trainer and JobSet, so a version bump shows which rules (and which refusals) change. A
pinned minor without rules here is reported, never assumed to refuse nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.apiserver.selectors import matches_selector
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal, Unchecked
from infra.apiserver.webhooks import (
    jobset_v0_12,
    kueue_v0_19,
    kueue_v0_19_jobs,
    kueue_v0_19_tas,
    kueue_v0_19_workload,
    trainer_v2_2,
)
from infra.spec.versions import Versions, minor

Check = Callable[[dict[str, Any], ClusterState], list[Refusal]]
KUEUE, TRAINER, JOBSET, BATCH, CORE = "kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io", "batch", ""
GROUPS = frozenset({KUEUE, TRAINER, JOBSET, BATCH})  # the API groups whose objects the rules review or look up


@dataclass(frozen=True)
class WebhookRule:
    component: str
    group: str
    kind: str
    name: str
    check: Check
    gate: str = ""  # a Kueue feature gate the rule needs on
    object_label: str = ""  # the webhook's objectSelector: a label the object must carry

    def registered(self, obj: dict[str, Any], cluster: ClusterState) -> bool:
        """Whether the operator registers the rule for this object: a Kueue job rule only for an integrated
        framework in a namespace managedJobsNamespaceSelector selects, with its gate on; a rule with an object
        selector only for objects that match it."""
        if self.component == "kueue" and self.group in JOB_GROUPS and not cluster.kueue_manages(obj):
            return False
        if self.gate and not cluster.kueue.gate(self.gate):
            return False
        labels = obj.get("metadata", {}).get("labels", {})
        return matches_selector({"matchExpressions": [{"key": self.object_label, "operator": "Exists"}]}, labels) \
            if self.object_label else True


JOB_GROUPS = frozenset({BATCH, JOBSET, TRAINER, CORE})  # the groups of Kueue's job integrations
TAS = "TopologyAwareScheduling"


def _rules(component: str, entries: list[tuple[str, str, Check]], gates: dict[Check, str] | None = None,
           labels: dict[Check, str] | None = None) -> tuple[WebhookRule, ...]:
    return tuple(WebhookRule(component, group, kind, check.__name__, check, (gates or {}).get(check, ""),
                             (labels or {}).get(check, "")) for group, kind, check in entries)


REGISTRY: dict[tuple[str, str], tuple[WebhookRule, ...]] = {
    ("kueue", "0.19"): _rules("kueue", [
        (KUEUE, "ClusterQueue", kueue_v0_19.cluster_queue),
        (KUEUE, "Cohort", kueue_v0_19.cohort),
        (KUEUE, "ResourceFlavor", kueue_v0_19.resource_flavor),
        (KUEUE, "Workload", kueue_v0_19_workload.workload),
        (BATCH, "Job", kueue_v0_19_jobs.job_on_create),
        (BATCH, "Job", kueue_v0_19_jobs.job_annotations),
        (BATCH, "Job", kueue_v0_19_tas.job_topology),
        (JOBSET, "JobSet", kueue_v0_19_jobs.job_on_create),
        (TRAINER, "TrainJob", kueue_v0_19_jobs.job_on_create),
        (JOBSET, "JobSet", kueue_v0_19_tas.jobset_topology),
        (TRAINER, "TrainJob", kueue_v0_19_tas.trainjob_topology),
    ], gates={kueue_v0_19_tas.job_topology: TAS, kueue_v0_19_tas.jobset_topology: TAS,
              kueue_v0_19_tas.trainjob_topology: TAS}),
    ("trainer", "2.2"): _rules("trainer", [
        (TRAINER, "ClusterTrainingRuntime", trainer_v2_2.runtime),
        (TRAINER, "TrainingRuntime", trainer_v2_2.runtime),
        (TRAINER, "TrainJob", trainer_v2_2.trainjob),
    ]),
    ("jobset", "0.12"): _rules("jobset", [(JOBSET, "JobSet", jobset_v0_12.jobset),
                                          (CORE, "Pod", jobset_v0_12.exclusive_placement)],
                               labels={jobset_v0_12.exclusive_placement: jobset_v0_12.JOBSET_NAME}),
}


def pinned(versions: Versions) -> dict[str, str]:
    return {"kueue": minor(versions.kueue), "trainer": minor(versions.trainer), "jobset": minor(versions.jobset)}


def rules_for(versions: Versions) -> tuple[list[WebhookRule], list[Unchecked]]:
    """The webhook rules of the pinned minors, and the pinned minors this registry has no rules for."""
    rules: list[WebhookRule] = []
    missing = []
    for component, version in sorted(pinned(versions).items()):
        if (component, version) in REGISTRY:
            rules += REGISTRY[(component, version)]
        else:
            written = ", ".join(v for c, v in sorted(REGISTRY) if c == component)
            missing.append(Unchecked(f"{component} {version}", "validating webhooks",
                                     f"rules are written for {component} {written} only"))
    return rules, missing


def review(obj: dict[str, Any], cluster: ClusterState, rules: list[WebhookRule]) -> list[Refusal]:
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = obj.get("kind")
    return [refusal for rule in rules if rule.group == group and rule.kind == kind and rule.registered(obj, cluster)
            for refusal in rule.check(obj, cluster)]
