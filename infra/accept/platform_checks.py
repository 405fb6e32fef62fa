"""Checks of the platform's own machinery: the restore drills on demand, and each persona's access as the access
matrix states it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.accept.runner import Failed, Run, Skipped
from infra.accept.status import condition
from infra.apiserver.rbac import CLUSTER, NAMESPACED, PERSONA_LABEL, grants
from infra.offline.plan import objects
from infra.platform.backup import DRILL, NAMESPACE
from infra.platform.kfp.journal_drill import NAME as JOURNAL_DRILL

# Rights no tenant persona holds whatever its roles (the matrix grants none of them; checked below anyway):
# (verb, API group, resource, where: "own" namespace, "other" team's namespace or "" for cluster scope).
NEVER = (("delete", "", "namespaces", ""), ("patch", "", "nodes", ""),
         ("create", "rbac.authorization.k8s.io", "rolebindings", "own"), ("update", "", "resourcequotas", "own"),
         ("list", "", "secrets", "other"))
PLATFORM_ADMIN = "platform-admin"


def restore_drill(run: Run) -> str:
    """The restore-drill CronJob (the volumes' markers), started now as a Job."""
    return _drill_now(run, DRILL)


def journal_drill(run: Run) -> str:
    """The journal-drill CronJob (the newest run before the backup, in the restored Pipelines journal: infra/
    platform/kfp/journal_drill.py), started now as a Job, on a stack with Pipelines."""
    if run.platform.pipelines is None:
        raise Skipped("the stack declares no pipelines: no journal to drill")
    return _drill_now(run, JOURNAL_DRILL)


def _drill_now(run: Run, cronjob: str) -> str:
    """A drill's CronJob, started now as a Job (what `kubectl create job --from=cronjob/...` does); its last log
    line is the drill's verdict."""
    cron = run.kube.cronjob(NAMESPACE, cronjob)
    if cron is None:
        raise Failed(f"CronJob {NAMESPACE}/{cronjob} not found: is the backup component deployed?")
    name = f"{cronjob}-accept-{run.stamp}"
    run.kube.create(NAMESPACE, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob,
                                          "uid": cron["metadata"]["uid"], "controller": True}]},
        "spec": cron["spec"]["jobTemplate"]["spec"]})
    run.evidence["job"] = f"{NAMESPACE}/{name}"
    state = run.wait(f"Job {name} to finish", lambda: next(
        (kind for kind in ("Complete", "Failed") if condition(run.kube.job(NAMESPACE, name), kind)), None))
    lines = [line for pod in run.kube.pods(NAMESPACE, f"job-name={name}")
             for line in run.kube.log(NAMESPACE, pod["metadata"]["name"]).splitlines() if line.strip()]
    last = lines[-1] if lines else "(no log)"
    run.evidence["log"] = lines[-20:]
    if state != "Complete":
        raise Failed(f"the drill Job failed: {last}")
    return last


@dataclass(frozen=True)
class Probe:
    persona: str
    user: str
    group: str | None
    verb: str
    api_group: str
    resource: str
    namespace: str
    allowed: bool

    def line(self, got: bool) -> str:
        who = self.user + (f" (group {self.group})" if self.group else "")
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        word = "can" if got else "cannot"
        return f"{self.persona} {who} {word} {self.verb} {self.api_group or 'core'}/{self.resource}{where}"


def _identity(persona: str, subject: dict[str, Any]) -> tuple[str, str | None]:
    if subject["kind"] == "Group":
        return f"trainyard-accept-{persona}", subject["name"]
    if subject["kind"] == "ServiceAccount":
        return f"system:serviceaccount:{subject['namespace']}:{subject['name']}", None
    return subject["name"], None


def probes(capture: Any, team_namespaces: list[str]) -> Iterator[Probe]:
    """Per persona binding and subject: every right the matrix grants, where it grants it; the same rights in a
    team namespace the subject is not bound in; and the NEVER rights, for every persona but platform-admin."""
    found, _ = grants(capture)
    bound: dict[tuple[str, str, str | None], set[str]] = {}
    for _, obj in objects(capture):
        labels = obj.get("metadata", {}).get("labels", {})
        if obj.get("kind") not in ("RoleBinding", "ClusterRoleBinding") or PERSONA_LABEL not in labels:
            continue
        for subject in obj.get("subjects", []):
            key = (labels[PERSONA_LABEL], *_identity(labels[PERSONA_LABEL], subject))
            bound.setdefault(key, set()).add(obj["metadata"].get("namespace", ""))
    for (persona, user, group), where in sorted(bound.items(), key=lambda item: str(item[0])):
        held = {(g.group, g.resource, g.verb): g.scope for g in found if g.persona == persona
                and "*" not in (g.group, g.resource, g.verb)}
        own = sorted(ns for ns in where if ns)
        others = [ns for ns in team_namespaces if ns not in where]
        for (api_group, resource, verb), scope in sorted(held.items()):
            if scope == CLUSTER and "" in where:
                yield Probe(persona, user, group, verb, api_group, resource, "", True)
            elif scope == NAMESPACED:
                yield from (Probe(persona, user, group, verb, api_group, resource, ns, True) for ns in own)
                yield from (Probe(persona, user, group, verb, api_group, resource, ns, False) for ns in others[:1])
        if persona == PLATFORM_ADMIN:
            continue
        for verb, api_group, resource, scope_word in NEVER:
            if (api_group, resource, verb) in held:
                continue
            target = {"": [""], "own": own[:1], "other": others[:1]}[scope_word]
            yield from (Probe(persona, user, group, verb, api_group, resource, ns, False) for ns in target)


def access(run: Run) -> str:
    if run.render is None:
        raise Skipped("no rendered access matrix")
    team_namespaces = [ns for team in run.platform.teams for ns in team.namespaces]
    checked, wrong = 0, []
    for probe in probes(run.render(), team_namespaces):
        got = run.kube.can_i(probe.user, probe.group, probe.verb, probe.api_group, probe.resource, probe.namespace)
        checked += 1
        if got != probe.allowed:
            wrong.append(probe.line(got) + f", the matrix says it {'can' if probe.allowed else 'cannot'}")
    run.evidence["probes"] = checked
    run.evidence["mismatches"] = wrong
    if not checked:
        raise Skipped("the render binds no persona")
    if wrong:
        raise Failed(f"{len(wrong)} of {checked} access reviews differ from the matrix: {wrong[0]}")
    return f"{checked} SelfSubjectAccessReviews as the personas' identities agree with the access matrix"
