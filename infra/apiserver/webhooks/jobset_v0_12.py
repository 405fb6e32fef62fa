"""JobSet 0.12 validating webhook, beyond what its CRD says, re-written from the upstream source at v0.12.0
(kubernetes-sigs/jobset `pkg/webhooks/jobset_webhook.go` ValidateCreate after its Default, names from
`pkg/util/placement/placement.go`). Feature gates at their 0.12 defaults (InPlaceRestart, RestartJob off)."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal
from infra.spec.names import dns1035_label, dns1123_subdomain, domain_prefixed_path, label_value

FAMILY = "webhook:jobset"
MAX_INT32 = 2**31 - 1
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")  # jobset_webhook.go ruleNameFmt
COORDINATOR_LABEL = "jobset.sigs.k8s.io/coordinator"  # api/jobset/v1alpha2 CoordinatorKey
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")  # need the RestartJob gate, off in 0.12
# jobset_webhook.go validOnJobFailureReasons: k8s.io/api batch/v1 JobReason* constants
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                       "PodFailurePolicy")


def _refuse(field: str, message: str) -> Refusal:
    return Refusal(FAMILY, field, message)


def _label(value: str, too_long: str) -> list[str]:
    """IsDNS1035Label's problems with its length one in the webhook's words: jobset_webhook.go replaces each
    problem that contains dns1035MaxLengthExceededErrorMsg."""
    return [too_long if "must be no more than 63 characters" in p else p for p in dns1035_label(value)]


_subdomain_label = partial(_label, too_long=".spec.network.subdomain is too long, must be less than 63 characters")
_group_label = partial(_label, too_long=".spec.replicatedJob[].groupName is too long, must be less than 63 characters")


def _names(js_name: str, job: dict[str, Any], path: str) -> list[Refusal]:
    """Generated child names must be DNS-1035 labels: `<jobset>-<job>-<index>` and, for Indexed jobs,
    `<jobset>-<job>-<index>-<pod>-xxxxx`."""
    replicas = int(job.get("replicas", 1))
    longest_job = f"{js_name}-{job.get('name')}-{replicas - 1}"
    found = [_refuse(f"{path}.name", "JobSet name is too long, job names generated for this JobSet will exceed 63 "
                     "characters" if "63" in p else f"{longest_job!r}: {p}") for p in dns1035_label(longest_job)]
    spec = job.get("template", {}).get("spec", {})
    if spec.get("completionMode", "Indexed") == "Indexed" and "completions" in spec:  # Default made it Indexed
        longest_pod = f"{js_name}-{job.get('name')}-{replicas - 1}-{int(spec['completions']) - 1}-abcde"
        found += [_refuse(f"{path}.name", "JobSet name is too long, pod names generated for this JobSet will exceed "
                          "63 characters" if "63" in p else f"{longest_job!r}: {p}")  # upstream names the job
                  for p in dns1035_label(longest_pod)]
    return found


def jobset(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    spec = obj.get("spec", {})
    jobs = spec.get("replicatedJobs", [])
    name = str(obj.get("metadata", {}).get("name", ""))
    found = []
    if spec.get("failurePolicy", {}).get("restartStrategy") == "InPlaceRestart":
        found.append(_refuse("spec.failurePolicy.restartStrategy", "InPlaceRestart restart strategy cannot be set "
                             "when InPlaceRestart feature gate is disabled"))
    if jobs and "dependsOn" in jobs[0]:  # a non-nil list, even an empty one
        found.append(_refuse("spec.replicatedJobs[0].dependsOn", "DependsOn can't be set for the first ReplicatedJob"))
    subdomain = spec.get("network", {}).get("subdomain", "")
    if subdomain:
        found += [_refuse("spec.network.subdomain", p)
                  for p in dns1123_subdomain(subdomain) + _subdomain_label(subdomain)]
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
        found += [_refuse(f"{path}.groupName", p) for p in _group_label(str(job.get("groupName", "default")))]
        found += _names(name, job, path)
        found += [_refuse(f"{path}.dependsOn", f"replicatedJob: {job.get('name')} cannot depend on replicatedJob: "
                          f"{d.get('name')}") for d in job.get("dependsOn", []) if d.get("name") not in seen]
    found += [_refuse("spec.successPolicy.targetReplicatedJobs", f"invalid replicatedJob name '{target}' does not "
                      "appear in .spec.ReplicatedJobs")
              for target in spec.get("successPolicy", {}).get("targetReplicatedJobs", []) if target not in seen]
    found += _failure_policy(spec.get("failurePolicy") or {}, jobs) + _coordinator(spec, name)
    return found + _volume_claims(obj, cluster)


def _failure_policy(policy: dict[str, Any], jobs: list[dict[str, Any]]) -> list[Refusal]:
    """jobset_webhook.go validateFailurePolicy, after Default has named unnamed rules `failurePolicyRule<index>`:
    no restart-job action while its gate is off (answered alone), rule names 1 to 128 characters of the rule-name
    pattern and unique, targets that are replicated jobs, and reasons among the Job failure reasons."""
    rules = policy.get("rules", [])
    if any(rule.get("action") in RESTART_JOB_ACTIONS for rule in rules):
        return [_refuse("spec.failurePolicy.rules", "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy "
                        "actions are not allowed when RestartJob feature gate is disabled")]
    names = {str(job.get("name", "")) for job in jobs}
    found = []
    indices: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        path = f"spec.failurePolicy.rules[{i}]"
        rule_name = str(rule.get("name") or f"failurePolicyRule{i}")
        if not 1 <= len(rule_name) <= 128:
            found.append(_refuse(f"{path}.name", f"invalid failure policy rule name of length {len(rule_name)}, the "
                                 "rule name must be at least 1 characters long and at most 128 characters long"))
        indices.setdefault(rule_name, []).append(i)
        if not RULE_NAME.match(rule_name):
            found.append(_refuse(f"{path}.name", f"invalid failure policy rule name '{rule_name}', a failure policy "
                                 "rule name must start with an alphabetic character, optionally followed by a string "
                                 "of alphanumeric characters or '_,:', and must end with an alphanumeric character or "
                                 "'_'"))
        found += [_refuse(f"{path}.targetReplicatedJobs", f"invalid replicatedJob name '{t}' in failure policy does "
                          "not appear in .spec.ReplicatedJobs") for t in rule.get("targetReplicatedJobs", [])
                  if t not in names]
        found += [_refuse(f"{path}.onJobFailureReasons", f"invalid job failure reason '{reason}' in failure policy "
                          "is not a recognized job failure reason") for reason in rule.get("onJobFailureReasons", [])
                  if reason not in JOB_FAILURE_REASONS]
    found += [_refuse("spec.failurePolicy.rules", f"rule names are not unique, rules with indices "
                      f"[{' '.join(map(str, at))}] all have the same name '{n}'")
              for n, at in indices.items() if len(at) > 1]
    return found


def _coordinator(spec: dict[str, Any], name: str) -> list[Refusal]:
    """jobset_webhook.go validateCoordinator (the coordinator pod exists in an Indexed job; Default made a job
    without completionMode Indexed) and validateCoordinatorLabelValue (the coordinator's endpoint,
    pkg/controllers CoordinatorEndpoint, is a label value)."""
    coordinator = spec.get("coordinator")
    if coordinator is None:
        return []
    target, job_index, pod_index = (coordinator.get("replicatedJob", ""), int(coordinator.get("jobIndex", 0)),
                                    int(coordinator.get("podIndex", 0)))
    found = []
    job = next((j for j in spec.get("replicatedJobs", []) if j.get("name") == target), None)
    template = (job or {}).get("template", {}).get("spec", {})
    if job is None:
        found.append(_refuse("spec.coordinator", f"coordinator replicatedJob {target} does not exist"))
    elif not 0 <= job_index < int(job.get("replicas", 1)):
        found.append(_refuse("spec.coordinator", f"coordinator job index {job_index} is invalid for replicatedJob "
                             f"{target}"))
    elif template.get("completionMode", "Indexed") != "Indexed" or "completions" not in template:
        found.append(_refuse("spec.coordinator", "job for coordinator pod must be indexed completion mode, and "
                             "completions number must be set"))
    elif not 0 <= pod_index < int(template["completions"]):
        found.append(_refuse("spec.coordinator", f"coordinator pod index {pod_index} is invalid for replicatedJob "
                             f"{target} job index {job_index}"))
    endpoint = f"{name}-{target}-{job_index}-{pod_index}.{(spec.get('network') or {}).get('subdomain') or name}"
    problems = label_value(endpoint)
    if problems:
        found.append(_refuse("spec.coordinator", f"spec will lead to invalid label value \"{endpoint}\" for "
                             f"coordinator label \"{COORDINATOR_LABEL}\" (long JobSet / ReplicatedJob / SubDomain "
                             f"name?): {', '.join(problems)}"))
    return found


def _mounts(job: dict[str, Any]) -> set[str]:
    pod = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
    return {mount.get("name") for container in [*pod.get("initContainers", []), *pod.get("containers", [])]
            for mount in container.get("volumeMounts", [])}


def _volume_claims(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """jobset_webhook.go validateVolumeClaimPolicies: claim templates uniquely named DNS subdomains, the PVC name
    `<claim>-<jobset>` (pkg/controllers GeneratePVCName) at most 63 characters, mounted by some container and not
    shadowed by a job's own volume; a PVC of that name that already exists must have the template's spec and be
    retained (Default made an absent retention policy Delete). Offline the existing PVC is the one the stack or
    the submission declares, without the defaults and binding the live one carries, so the live webhook may
    refuse a spec this comparison passes."""
    spec, meta = obj.get("spec", {}), obj.get("metadata", {})
    jobs = spec.get("replicatedJobs", [])
    claims = {(str(c.get("metadata", {}).get("namespace", "")), str(c.get("metadata", {}).get("name", ""))): c
              for c in cluster.of_kind("PersistentVolumeClaim")}
    found = []
    names: set[str] = set()
    for i, policy in enumerate(spec.get("volumeClaimPolicies", []) or []):
        retained = ((policy.get("retentionPolicy") or {}).get("whenDeleted") or "Delete") == "Retain"
        for j, template in enumerate(policy.get("templates", []) or []):
            path = f"spec.volumeClaimPolicies[{i}].template[{j}]"
            claim = str(template.get("metadata", {}).get("name", ""))
            if claim in names:
                found.append(_refuse(f"{path}.name", "names must be unique for VolumeClaimPolicies template"))
            found += [_refuse(f"{path}.name", p) for p in dns1123_subdomain(claim)]
            pvc_name = f"{claim}-{meta.get('name', '')}"
            if len(pvc_name) > 63:
                found.append(_refuse(f"{path}.name", "VolumeClaimPolicies template name is too long"))
            for k, job in enumerate(jobs):
                pod = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
                found += [_refuse(f"spec.replicatedJobs[{k}].template.spec.template.spec.volumes[{v}].name",
                                  f"volume name conflicts with VolumeClaimPolicy template name: {claim}")
                          for v, volume in enumerate(pod.get("volumes", [])) if volume.get("name") == claim]
            if not any(claim in _mounts(job) for job in jobs):
                found.append(_refuse("spec.replicatedJobs", f"replicatedJob containers don't have a matching "
                                     f"volumeMount: {claim} from VolumeClaimPolicies"))
            existing = claims.get((str(meta.get("namespace", "")), pvc_name))
            if existing is not None:
                if existing.get("spec", {}) != template.get("spec", {}):
                    found.append(_refuse(f"{path}.spec", f"spec does not match existing PVC {pvc_name} in namespace "
                                         f"{meta.get('namespace', '')}"))
                if not retained:
                    found.append(_refuse(f"spec.volumeClaimPolicies[{i}].retentionPolicy.whenDeleted",
                                         "retentionPolicy must be retain when PVC exists"))
            names.add(claim)
    return found


# api/jobset/v1alpha2/jobset_types.go and batch/v1 JobCompletionIndexAnnotation
JOBSET_NAME, REPLICATED_JOB, JOB_INDEX = ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                          "jobset.sigs.k8s.io/job-index")
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _controller_uid(pod: dict[str, Any]) -> str | None:
    return next((str(o.get("uid", "")) for o in pod.get("metadata", {}).get("ownerReferences", [])
                 if o.get("controller")), None)


def _leader(pod: dict[str, Any], cluster: ClusterState) -> tuple[dict[str, Any] | None, str]:
    """pod_webhook.go leaderPodForFollower: the one pod named `<jobset>-<job>-<index>-0` (genLeaderPodName, from
    the follower's labels), owned by the follower's Job; or why not."""
    meta = pod.get("metadata", {})
    labels = meta.get("labels", {})
    for key in (JOBSET_NAME, REPLICATED_JOB, JOB_INDEX):
        if key not in labels:
            return None, f"pod missing label: {key}"
    name = f"{labels[JOBSET_NAME]}-{labels[REPLICATED_JOB]}-{labels[JOB_INDEX]}-0"
    leaders = [p for p in cluster.of_kind("Pod") if p.get("metadata", {}).get("name") == name
               and p.get("metadata", {}).get("namespace") == meta.get("namespace")]
    if len(leaders) != 1:
        return None, f"expected 1 leader pod ({name}), but got {len(leaders)}. this is an expected, transient error"
    follower_uid, leader_uid = _controller_uid(pod), _controller_uid(leaders[0])
    if follower_uid is None:
        return None, "follower pod has no owner reference"
    if leader_uid is None:
        return None, f'leader pod "{name}" has no owner reference'
    if follower_uid != leader_uid:
        return None, f"follower pod owner UID ({follower_uid}) != leader pod owner UID ({leader_uid})"
    return leaders[0], ""


def exclusive_placement(pod: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    """pkg/webhooks/pod_webhook.go ValidateCreate (registered for pods labelled with a JobSet name): a follower
    pod (completion index not 0) of a JobSet placed exclusively per topology, without the node-selector strategy,
    needs the topology in its node selector and its leader pod scheduled. Offline the only pods are those
    submitted with it, so a follower is refused unless its leader is submitted too, with a node."""
    annotations = pod.get("metadata", {}).get("annotations", {})
    if JOBSET_NAME not in annotations or NODE_SELECTOR_STRATEGY in annotations or EXCLUSIVE not in annotations:
        return []
    if annotations.get(COMPLETION_INDEX) == "0":  # placement.IsLeaderPod
        return []
    selector = pod.get("spec", {}).get("nodeSelector")
    if selector is None:
        return [_refuse("", "follower pod node selector not set")]
    if annotations[EXCLUSIVE] not in selector:
        return [_refuse("", "follower pod node selector for topology domain not found. missing selector: "
                        f"{annotations[EXCLUSIVE]}")]
    leader, why = _leader(pod, cluster)
    if leader is None:
        return [_refuse("", why)]
    if not leader.get("spec", {}).get("nodeName"):
        return [_refuse("", "leader pod not yet scheduled, not creating follower pod. this is an expected, transient "
                        "error")]
    return []
