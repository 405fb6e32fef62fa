"""One admission review: everything the API server (and what runs behind it) would say about one object, in
the order the server applies it: the CRD or core schema, the CRD's CEL rules, the operators' validating
webhooks, the ValidatingAdmissionPolicies with their bindings, Pod Security of the target namespace, and
finally whether Kueue can ever run it (queue and quota)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.apiserver import crd_rules, podsecurity, queues, vap, webhooks
from infra.apiserver.core_rules import template_problems
from infra.apiserver.schema import CrdIndex, check_core, check_custom, is_core_kind, is_custom
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal, Unchecked
from infra.spec.versions import Versions

_TYPE_ERROR = " is not of type "  # how the schema check words a value of the wrong type (jsonschema's message)


@dataclass
class Verdict:
    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[Refusal] = field(default_factory=list)
    unchecked: list[Unchecked] = field(default_factory=list)
    rules: int = 0  # rules evaluated on this object

    @property
    def admitted(self) -> bool:
        return not self.refusals


class Reviewer:
    """The offline API server of one stack: its pinned CRDs and webhook rules, and what the cluster holds."""

    def __init__(self, versions: Versions, crds: CrdIndex | None, cluster: ClusterState,
                 kueue_excluded: tuple[str, ...] = ()) -> None:
        self.versions = versions
        self.kueue_excluded = kueue_excluded
        self.crds = crds
        self.cluster = cluster
        self.webhook_rules, self.missing_webhooks = webhooks.rules_for(versions)

    def schema(self, obj: dict[str, Any]) -> list[Refusal]:
        if is_custom(obj, self.crds):
            problems = check_custom(obj, self.crds) if self.crds is not None else []
        elif self.crds is not None and not is_core_kind(obj, self.versions.kubernetes):
            # A kind neither Kubernetes serves nor a CRD of the cluster defines: the API server has no such resource.
            problems = [f'no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}": the stack '
                        "installs no CRD that defines it"]
        else:
            problems = check_core(obj, self.versions.kubernetes)
        return [Refusal("schema", "", problem) for problem in problems]

    def review(self, obj: dict[str, Any], operation: str = "CREATE", user: str = "trainyard",
               queues_too: bool = True, groups: tuple[str, ...] = ("system:authenticated",)) -> Verdict:
        verdict = Verdict(refusals=self.schema(obj), unchecked=list(self.missing_webhooks))
        crd_schema = self.crds.schema(obj.get("apiVersion", ""), obj.get("kind", "")) \
            if self.crds is not None and is_custom(obj, self.crds) else None
        # A CRD's rules are skipped when a value has the wrong type (the API server's "blocking" errors), and an
        # object refused by its schema or rules reaches no validating webhook or policy: the server validates it
        # before it calls them.
        if crd_schema is not None and not any(_TYPE_ERROR in refusal.message for refusal in verdict.refusals):
            outcome = crd_rules.evaluate(obj, crd_schema)
            verdict.refusals += outcome.refusals
            verdict.unchecked += outcome.unchecked
            verdict.rules += outcome.evaluated
        if verdict.refusals:
            return verdict
        try:
            verdict.refusals += webhooks.review(obj, self.cluster, self.webhook_rules)
            policies = vap.evaluate(vap.Request(obj, operation, user, groups), self.cluster)
            verdict.refusals += policies.refusals
            verdict.warnings += policies.warnings
            verdict.unchecked += policies.unchecked
            verdict.rules += policies.evaluated
            verdict.refusals += podsecurity.review(obj, self.cluster)
            if queues_too and self.cluster.kueue_manages(obj):  # Kueue makes no Workload for what it does not manage
                verdict.refusals += queues.review(obj, self.cluster, self.kueue_excluded)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError) as error:
            # Only an object no schema vetted gets here malformed (a custom resource without its CRD): a webhook
            # that cannot decode it into its Go type refuses it, and so does this review.
            verdict.refusals.append(Refusal("decode", "", f"a field has the wrong type or shape for {obj.get('kind')} "
                                            f"({type(error).__name__}: {str(error)[:120]}): fix the manifest"))
        if obj.get("kind") == "CronJob" and str(obj.get("apiVersion", "")).startswith("batch/") and verdict.admitted:
            verdict = self._scheduled_job(obj, operation, verdict)
        # The API server admits a JobSet, runtime or TrainJob whatever its Jobs will be; they are judged after every
        # check of the object itself, so its own verdicts are all given too.
        if self.crds is not None and is_custom(obj, self.crds):
            children = template_problems(obj, self.cluster.runtime)
            verdict.refusals += [Refusal("schema", "", problem) for problem in children]
        return verdict

    def _scheduled_job(self, cron_job: dict[str, Any], operation: str, verdict: Verdict) -> Verdict:
        """A CronJob's Jobs meet what a Job meets, created by the cronjob controller: its template judged as one
        (the API server admits the CronJob itself either way; its Jobs would be refused at every run)."""
        job = scheduled_job(cron_job)
        run = self.review(job, operation, CRONJOB_CONTROLLER, groups=CONTROLLER_GROUPS)
        verdict.refusals += [Refusal(r.family, "spec.jobTemplate" + (f".{r.field}" if r.field else ""),
                                     f"its Jobs would be refused: {r.message}", r.reason) for r in run.refusals]
        verdict.warnings += run.warnings
        verdict.unchecked += [u for u in run.unchecked if u not in verdict.unchecked]
        verdict.rules += run.rules
        return verdict


CRONJOB_CONTROLLER = "system:serviceaccount:kube-system:cronjob-controller"
CONTROLLER_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")


def scheduled_job(cron_job: dict[str, Any]) -> dict[str, Any]:
    """The Job the cronjob controller creates at a scheduled time (k8s.io/kubernetes pkg/controller/cronjob
    getJobFromTemplate2): the template's labels, annotations and spec, named `<cronjob>-<minutes since epoch>`,
    owned by the CronJob."""
    meta = cron_job.get("metadata", {})
    template = cron_job.get("spec", {}).get("jobTemplate", {})
    template_meta = template.get("metadata", {})
    job_meta: dict[str, Any] = {"name": f"{meta.get('name', '')}-29000000", "namespace": meta.get("namespace", ""),
                                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                                     "name": meta.get("name", ""), "uid": "cronjob",
                                                     "controller": True, "blockOwnerDeletion": True}]}
    for key in ("labels", "annotations"):
        if template_meta.get(key):
            job_meta[key] = dict(template_meta[key])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": template.get("spec", {})}
