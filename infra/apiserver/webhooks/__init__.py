"""The operators' validating webhooks, re-written per component minor version: the registry picks the rules of
the pinned Kueue, Trainer and JobSet, so a version bump shows which rules (and which refusals) change. A
pinned minor without rules here is reported, never assumed to refuse nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal, Unchecked
from infra.apiserver.webhooks import jobset_v0_12, kueue_v0_19, kueue_v0_19_tas, kueue_v0_19_workload, trainer_v2_2
from infra.spec.versions import Versions, minor

Check = Callable[[dict[str, Any], ClusterState], list[Refusal]]
KUEUE, TRAINER, JOBSET, BATCH = "kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io", "batch"
GROUPS = frozenset({KUEUE, TRAINER, JOBSET, BATCH})  # the API groups whose objects the rules review or look up


@dataclass(frozen=True)
class WebhookRule:
    component: str
    group: str
    kind: str
    name: str
    check: Check


def _rules(component: str, entries: list[tuple[str, str, Check]]) -> tuple[WebhookRule, ...]:
    return tuple(WebhookRule(component, group, kind, check.__name__, check) for group, kind, check in entries)


REGISTRY: dict[tuple[str, str], tuple[WebhookRule, ...]] = {
    ("kueue", "0.19"): _rules("kueue", [
        (KUEUE, "ClusterQueue", kueue_v0_19.cluster_queue),
        (KUEUE, "Cohort", kueue_v0_19.cohort),
        (KUEUE, "ResourceFlavor", kueue_v0_19.resource_flavor),
        (KUEUE, "Workload", kueue_v0_19_workload.workload),
        (BATCH, "Job", kueue_v0_19.queue_name),
        (BATCH, "Job", kueue_v0_19_tas.job_topology),
        (JOBSET, "JobSet", kueue_v0_19.queue_name),
        (TRAINER, "TrainJob", kueue_v0_19.queue_name),
        (JOBSET, "JobSet", kueue_v0_19_tas.jobset_topology),
        (TRAINER, "TrainJob", kueue_v0_19_tas.trainjob_topology),
    ]),
    ("trainer", "2.2"): _rules("trainer", [
        (TRAINER, "ClusterTrainingRuntime", trainer_v2_2.runtime),
        (TRAINER, "TrainingRuntime", trainer_v2_2.runtime),
        (TRAINER, "TrainJob", trainer_v2_2.trainjob),
    ]),
    ("jobset", "0.12"): _rules("jobset", [(JOBSET, "JobSet", jobset_v0_12.jobset)]),
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
    return [refusal for rule in rules if rule.group == group and rule.kind == kind
            for refusal in rule.check(obj, cluster)]
