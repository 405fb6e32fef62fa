"""JobSet 0.12 validating webhook, beyond what its CRD says, re-written from the upstream source at v0.12.0
(kubernetes-sigs/jobset `pkg/webhooks/jobset_webhook.go` ValidateCreate, names from
`pkg/util/placement/placement.go`). Feature gates at their 0.12 defaults (InPlaceRestart, RestartJob off)."""

from __future__ import annotations

import re
from typing import Any

from ..names import dns1035_label, dns1123_subdomain, domain_prefixed_path
from ..state import ClusterState
from ..verdict import Refusal

FAMILY = "webhook:jobset"
MAX_INT32 = 2**31 - 1
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def _names(js_name: str, job: dict[str, Any], path: str) -> list[Refusal]:
    """Generated child names must be DNS-1035 labels: `<jobset>-<job>-<index>` and, for Indexed jobs,
    `<jobset>-<job>-<index>-<pod>-xxxxx`."""
    replicas = int(job.get("replicas", 1))
    longest_job = f"{js_name}-{job.get('name')}-{replicas - 1}"
    found = [_refuse(f"{path}.name", "JobSet name is too long, job names generated for this JobSet will exceed 63 "
                     "characters" if "63" in p else f"{longest_job!r}: {p}") for p in dns1035_label(longest_job)]
    spec = job.get("template", {}).get("spec", {})
    if spec.get("completionMode") == "Indexed" and "completions" in spec:
        longest_pod = f"{js_name}-{job.get('name')}-{replicas - 1}-{int(spec['completions']) - 1}-abcde"
        found += [_refuse(f"{path}.name", "JobSet name is too long, pod names generated for this JobSet will exceed "
                          "63 characters" if "63" in p else f"{longest_pod!r}: {p}")
                  for p in dns1035_label(longest_pod)]
    return found


def jobset(obj: dict[str, Any], _: ClusterState) -> list[Refusal]:
    spec = obj.get("spec", {})
    jobs = spec.get("replicatedJobs", [])
    name = str(obj.get("metadata", {}).get("name", ""))
    found = []
    if spec.get("failurePolicy", {}).get("restartStrategy") == "InPlaceRestart":
        found.append(_refuse("spec.failurePolicy.restartStrategy", "InPlaceRestart restart strategy cannot be set "
                             "when InPlaceRestart feature gate is disabled"))
    if jobs and jobs[0].get("dependsOn"):
        found.append(_refuse("spec.replicatedJobs[0].dependsOn", "DependsOn can't be set for the first ReplicatedJob"))
    subdomain = spec.get("network", {}).get("subdomain", "")
    if subdomain:
        found += [_refuse("spec.network.subdomain", p) for p in dns1123_subdomain(subdomain) + dns1035_label(subdomain)]
    if "managedBy" in spec:
        manager = str(spec["managedBy"])
        found += [_refuse("spec.managedBy", p) for p in domain_prefixed_path(manager)]
        if len(manager) > 63:
            found.append(_refuse("spec.managedBy", "may not be more than 63 bytes"))
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        path = f"spec.replicatedJobs[{i}]"
        seen.add(job.get("name", ""))
        parallelism = int(job.get("template", {}).get("spec", {}).get("parallelism", 1))
        if parallelism * int(job.get("replicas", 1)) > MAX_INT32:
            found.append(_refuse(path, f"the product of replicas and parallelism must not exceed {MAX_INT32} for "
                                 f"replicatedJob '{job.get('name')}'"))
        found += [_refuse(f"{path}.groupName", p) for p in dns1035_label(str(job.get("groupName", "default")))]
        found += _names(name, job, path)
        found += [_refuse(f"{path}.dependsOn", f"replicatedJob: {job.get('name')} cannot depend on replicatedJob: "
                          f"{d.get('name')}") for d in job.get("dependsOn", []) if d.get("name") not in seen]
    found += [_refuse("spec.successPolicy.targetReplicatedJobs", f"invalid replicatedJob name '{target}' does not "
                      "appear in .spec.ReplicatedJobs")
              for target in spec.get("successPolicy", {}).get("targetReplicatedJobs", []) if target not in seen]
    return found + _failure_policy(spec.get("failurePolicy", {}), seen) + _coordinator(spec)


def _failure_policy(policy: dict[str, Any], jobs: set[str]) -> list[Refusal]:
    """jobset_webhook.go validateFailurePolicy: rule names unique and well formed, targets exist."""
    found = []
    names: dict[str, int] = {}
    for i, rule in enumerate(policy.get("rules", [])):
        path = f"spec.failurePolicy.rules[{i}]"
        rule_name = str(rule.get("name", ""))
        if not RULE_NAME.match(rule_name) or not 1 <= len(rule_name) <= 128:
            found.append(_refuse(f"{path}.name", f"invalid failure policy rule name '{rule_name}'"))
        names[rule_name] = names.get(rule_name, 0) + 1
        if rule.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
            found.append(_refuse(f"{path}.action", "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy "
                                 "actions are not allowed when RestartJob feature gate is disabled"))
        found += [_refuse(f"{path}.targetReplicatedJobs", f"invalid replicatedJob name '{t}' in failure policy does "
                          "not appear in .spec.ReplicatedJobs") for t in rule.get("targetReplicatedJobs", [])
                  if t not in jobs]
    found += [_refuse("spec.failurePolicy.rules", f"rule names are not unique: '{n}'")
              for n, count in names.items() if count > 1]
    return found


def _coordinator(spec: dict[str, Any]) -> list[Refusal]:
    """jobset_webhook.go validateCoordinator: the coordinator pod exists in an Indexed job."""
    coordinator = spec.get("coordinator")
    if coordinator is None:
        return []
    job = next((j for j in spec.get("replicatedJobs", []) if j.get("name") == coordinator.get("replicatedJob")), None)
    if job is None:
        return [_refuse("spec.coordinator",
                        f"coordinator replicatedJob {coordinator.get('replicatedJob')} does not exist")]
    if not 0 <= int(coordinator.get("jobIndex", 0)) < int(job.get("replicas", 1)):
        return [_refuse("spec.coordinator", f"coordinator job index {coordinator.get('jobIndex')} is invalid")]
    template = job.get("template", {}).get("spec", {})
    if template.get("completionMode") != "Indexed" or "completions" not in template:
        return [_refuse("spec.coordinator", "job for coordinator pod must be indexed completion mode, and "
                        "completions number must be set")]
    if not 0 <= int(coordinator.get("podIndex", 0)) < int(template["completions"]):
        return [_refuse("spec.coordinator", f"coordinator pod index {coordinator.get('podIndex')} is invalid")]
    return []
