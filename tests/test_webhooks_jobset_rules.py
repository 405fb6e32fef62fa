"""JobSet 0.12.0's webhooks, field by field, from the upstream source: kubernetes-sigs/jobset v0.12.0
`pkg/webhooks/jobset_webhook.go` (ValidateCreate after Default: InPlaceRestart gate off, dependsOn, the subdomain as
DNS-1123 subdomain and DNS-1035 label, managedBy, the replicas x parallelism product, groupName) and
`pkg/webhooks/pod_webhook.go` (leaderPodForFollower). Each field: a valid value admitted, the nearest invalid one
refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.jobset_v0_12 import exclusive_placement, jobset
from tests.kueue_cluster import MANAGED

STATE = ClusterState(MANAGED)
MAX_INT32 = 2**31 - 1
# apimachinery v0.36.0 (jobset v0.12.0's) validation.go IsDomainPrefixedPath: RegexError("Invalid path", httpPathFmt)
INVALID_PATH = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"


def lines(found: list[Any]) -> list[str]:
    return [f"{r.field}: {r.message}".removeprefix(": ") for r in found]


def _jobset(*jobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "v"},
            "spec": {"replicatedJobs": list(jobs) or [_job("w")], **spec}}


def _job(name: str, replicas: int = 1, **template: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "template": {"spec": template}}


def test_in_place_restart_is_refused_while_its_gate_is_off() -> None:
    assert lines(jobset(_jobset(failurePolicy={"restartStrategy": "InPlaceRestart"}), STATE)) == [
        "spec.failurePolicy.restartStrategy: InPlaceRestart restart strategy cannot be set when InPlaceRestart "
        "feature gate is disabled"]
    assert jobset(_jobset(failurePolicy={"restartStrategy": "Recreate"}), STATE) == []


def test_a_job_depends_only_on_jobs_before_it() -> None:
    first, second, third = _job("a"), _job("b"), _job("c")
    third["dependsOn"] = [{"name": "a", "status": "Ready"}, {"name": "b", "status": "Complete"}]
    assert jobset(_jobset(first, second, third), STATE) == []
    second["dependsOn"] = [{"name": "c", "status": "Ready"}]
    assert lines(jobset(_jobset(first, second, third), STATE)) == [
        "spec.replicatedJobs[1].dependsOn: replicatedJob: b cannot depend on replicatedJob: c"]


@pytest.mark.parametrize(("subdomain", "refused"), [("train", False), ("t" * 63, False), ("", False),
                                                    ("t" * 64, True), ("my.train", True), ("1train", True),
                                                    ("Train", True)])
def test_the_subdomain_is_both_a_dns_subdomain_and_a_dns_label(subdomain: str, refused: bool) -> None:
    found = lines(jobset(_jobset(network={"subdomain": subdomain}), STATE))
    assert bool(found) is refused
    assert all(line.startswith("spec.network.subdomain: ") for line in found)


@pytest.mark.parametrize(("manager", "refused"), [("example.com/kueue", False), ("kueue.x-k8s.io/multikueue", False),
                                                  ("example.com/a-b_c.d~e%f!g$h&i'j(k)l*m+n,o;p=q:r/s", False),
                                                  ("kueue", True), ("example.com/", True), ("/kueue", True),
                                                  ("example.com/a b", True), ("example.com/a#b", True),
                                                  ("example.com/a?b", True), ("", True)])
def test_managed_by_is_a_domain_prefixed_path(manager: str, refused: bool) -> None:
    found = lines(jobset(_jobset(managedBy=manager), STATE))
    assert bool(found) is refused and all(line.startswith("spec.managedBy: ") for line in found)


def test_managed_by_is_at_most_63_bytes() -> None:
    assert jobset(_jobset(managedBy="example.com/" + "m" * 51), STATE) == []
    assert lines(jobset(_jobset(managedBy="example.com/" + "m" * 52), STATE)) == [
        "spec.managedBy: may not be more than 63 bytes"]


@pytest.mark.parametrize(("replicas", "parallelism", "refused"), [
    (1, MAX_INT32, False), (MAX_INT32, 1, False), (2, MAX_INT32 // 2, False), (2, MAX_INT32 // 2 + 1, True),
    (MAX_INT32 + 1, 1, True)])
def test_replicas_times_parallelism_fits_an_int32(replicas: int, parallelism: int, refused: bool) -> None:
    found = [line for line in lines(jobset(_jobset(_job("w", replicas, parallelism=parallelism)), STATE))
             if "product" in line]
    assert found == ([f"spec.replicatedJobs[0]: the product of replicas and parallelism must not exceed {MAX_INT32} "
                      "for replicatedJob 'w'"] if refused else [])


def test_parallelism_defaults_to_one_in_the_product() -> None:
    assert not any("product" in line for line in lines(jobset(_jobset(_job("w", MAX_INT32)), STATE)))


@pytest.mark.parametrize(("group", "refused"), [("default", False), ("g" * 63, False), ("g" * 64, True),
                                                ("Group", True), ("1g", True)])
def test_a_group_name_is_a_dns_label(group: str, refused: bool) -> None:
    job = _job("w")
    job["groupName"] = group
    found = lines(jobset(_jobset(job), STATE))
    assert bool(found) is refused and all(line.startswith("spec.replicatedJobs[0].groupName: ") for line in found)


def test_generated_names_use_the_last_job_index() -> None:
    """GenJobName(js, job, replicas-1): 'js-w-9' fits with 10 replicas; a name that is not a DNS label is refused
    with the name it would generate."""
    assert jobset(_jobset(_job("w", 10)), STATE) == []
    bad = _jobset(_job("W_", 2))
    assert lines(jobset(bad, STATE))[0].startswith("spec.replicatedJobs[0].name: 'js-W_-1': ")


# --- exclusive placement (pod_webhook.go) --------------------------------------------------------------------------


def _pod(name: str, index: str, **annotations: str) -> dict[str, Any]:
    base = {"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "w",
            "jobset.sigs.k8s.io/job-index": "0"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "v", "labels": dict(base),
        "annotations": {**base, "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack",
                        "batch.kubernetes.io/job-completion-index": index, **annotations},
        "ownerReferences": [{"uid": "u", "controller": True}]},
        "spec": {"nodeSelector": {"rack": "r1"}, "nodeName": "n1"}}


def test_only_followers_of_exclusive_jobsets_without_the_node_selector_strategy_are_checked() -> None:
    follower = _pod("js-w-0-1", "1")
    assert lines(exclusive_placement(follower, STATE)) == [
        "expected 1 leader pod (js-w-0-0), but got 0. this is an expected, transient error"]
    strategy = _pod("js-w-0-1", "1", **{"alpha.jobset.sigs.k8s.io/node-selector": "true"})
    assert exclusive_placement(strategy, STATE) == []
    not_exclusive = copy.deepcopy(follower)
    del not_exclusive["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"]
    assert exclusive_placement(not_exclusive, STATE) == []
    no_jobset = copy.deepcopy(follower)
    del no_jobset["metadata"]["annotations"]["jobset.sigs.k8s.io/jobset-name"]
    assert exclusive_placement(no_jobset, STATE) == []


@pytest.mark.parametrize("missing", ["jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                     "jobset.sigs.k8s.io/job-index"])
def test_a_follower_names_its_leader_by_three_labels(missing: str) -> None:
    follower = _pod("js-w-0-1", "1")
    del follower["metadata"]["labels"][missing]
    assert lines(exclusive_placement(follower, STATE)) == [f"pod missing label: {missing}"]


def test_the_leader_is_one_pod_of_the_same_job_in_the_same_namespace() -> None:
    follower, leader = _pod("js-w-0-1", "1"), _pod("js-w-0-0", "0")
    assert exclusive_placement(follower, ClusterState([leader])) == []
    elsewhere = copy.deepcopy(leader)
    elsewhere["metadata"]["namespace"] = "other"
    assert lines(exclusive_placement(follower, ClusterState([elsewhere]))) == [
        "expected 1 leader pod (js-w-0-0), but got 0. this is an expected, transient error"]
    assert lines(exclusive_placement(follower, ClusterState([leader, copy.deepcopy(leader)]))) == [
        "expected 1 leader pod (js-w-0-0), but got 2. this is an expected, transient error"]
    orphan = copy.deepcopy(leader)
    orphan["metadata"]["ownerReferences"] = [{"uid": "u", "controller": False}]
    assert lines(exclusive_placement(follower, ClusterState([orphan]))) == [
        'leader pod "js-w-0-0" has no owner reference']
    lone = copy.deepcopy(follower)
    lone["metadata"]["ownerReferences"] = []
    assert lines(exclusive_placement(lone, ClusterState([leader]))) == ["follower pod has no owner reference"]


def test_jobset_policy_and_coordinator_refusals_say_what_upstream_says() -> None:
    """The exact texts of jobset_webhook.go: success-policy targets, the rule-name pattern, and the coordinator's
    endpoint label value with every problem joined by ', '."""
    obj = _jobset(_job("w", 1, completions=1), successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]},
                  failurePolicy={"rules": [{"name": "1rule", "action": "FailJobSet"}]},
                  coordinator={"replicatedJob": "w"}, network={"subdomain": "s" * 62 + "-"})
    found = [line for line in lines(jobset(obj, STATE)) if not line.startswith("spec.network")]
    assert found == [
        "spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name 'x' does not appear in "
        ".spec.ReplicatedJobs",
        "spec.failurePolicy.rules[0].name: invalid failure policy rule name '1rule', a failure policy rule name must "
        "start with an alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and "
        "must end with an alphanumeric character or '_'",
        f'spec.coordinator: spec will lead to invalid label value "js-w-0-0.{"s" * 62}-" for coordinator label '
        '"jobset.sigs.k8s.io/coordinator" (long JobSet / ReplicatedJob / SubDomain name?): must be no more than 63 '
        "characters, a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character"]


def test_jobset_refusals_accumulate_in_upstreams_order() -> None:
    """ValidateCreate appends every finding in its order: restart strategy, first job's dependsOn, subdomain,
    managedBy, then each replicated job."""
    first = _job("w", 2, parallelism=MAX_INT32)
    first["dependsOn"] = []
    obj = _jobset(first, failurePolicy={"restartStrategy": "InPlaceRestart"}, network={"subdomain": "Bad"},
                  managedBy="kueue")
    assert [line.split(":")[0] for line in lines(jobset(obj, STATE))] == [
        "spec.failurePolicy.restartStrategy", "spec.replicatedJobs[0].dependsOn", "spec.network.subdomain",
        "spec.network.subdomain", "spec.managedBy", "spec.replicatedJobs[0]"]


@pytest.mark.parametrize(("replicas", "completions", "name_length", "refused"), [
    (10, 10, 51, False), (10, 10, 52, True), (11, 10, 50, False), (11, 10, 51, True), (10, 11, 50, False),
    (10, 11, 51, True)])
def test_generated_pod_names_use_the_last_job_and_pod_index(replicas: int, completions: int, name_length: int,
                                                            refused: bool) -> None:
    """GenPodName(js, job, replicas-1, completions-1) + '-abcde' is a DNS label of at most 63 characters: with 10
    replicas and 10 completions `<name>-w-9-9-abcde` is the name plus 12; a two-digit index adds one."""
    obj = _jobset(_job("w", replicas, completions=completions))
    obj["metadata"]["name"] = "j" * name_length
    found = [line for line in lines(jobset(obj, STATE)) if "pod names" in line]
    assert found == (["spec.replicatedJobs[0].name: JobSet name is too long, pod names generated for this JobSet will "
                      "exceed 63 characters"] if refused else [])


def test_a_generated_name_that_is_no_dns_label_is_refused_with_the_job_name() -> None:
    """jobset_webhook.go reports both the job-name and the pod-name problem with the longest job name as the value."""
    assert lines(jobset(_jobset(_job("W", 2, completions=3)), STATE)) == [
        f"spec.replicatedJobs[0].name: 'js-W-1': {problem}" for problem in (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character",) * 2]


def test_a_coordinator_on_a_job_without_replicas_or_template_fields() -> None:
    """Replicas default to 1, so job index 1 is out of range; an empty template has no completions."""
    assert lines(jobset(_jobset(_job("w", completions=2) | {"replicas": 1}, coordinator={"replicatedJob": "w",
                                                                                         "jobIndex": 1}), STATE)) == [
        "spec.coordinator: coordinator job index 1 is invalid for replicatedJob w"]
    unreplicated = {"name": "w", "template": {"spec": {"completions": 2}}}
    assert lines(jobset(_jobset(unreplicated, coordinator={"replicatedJob": "w", "jobIndex": 1}), STATE)) == [
        "spec.coordinator: coordinator job index 1 is invalid for replicatedJob w"]
    assert lines(jobset(_jobset({"name": "w", "template": {}}, coordinator={"replicatedJob": "w"}), STATE)) == [
        "spec.coordinator: job for coordinator pod must be indexed completion mode, and completions number must be "
        "set"]


# --- exact texts and absent optional fields (jobset_webhook.go ValidateCreate, pod_webhook.go ValidateCreate) -------

DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character")
DNS1123 = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
           "start and end with an alphanumeric character")


def _grouped(group: str) -> dict[str, Any]:
    job = _job("w")
    job["groupName"] = group
    return _jobset(job)


@pytest.mark.parametrize(("obj", "expected"), [
    (_jobset(network={"subdomain": "s" * 64}),
     ["spec.network.subdomain: .spec.network.subdomain is too long, must be less than 63 characters"]),
    (_jobset(network={"subdomain": "1train"}), [f"spec.network.subdomain: {DNS1035}"]),
    (_jobset(network={"subdomain": "S" * 64}), [f"spec.network.subdomain: {DNS1123}", "spec.network.subdomain: "
                                                ".spec.network.subdomain is too long, must be less than 63 characters",
                                                f"spec.network.subdomain: {DNS1035}"]),
    (_grouped("g" * 64), ["spec.replicatedJobs[0].groupName: .spec.replicatedJob[].groupName is too long, must be "
                          "less than 63 characters"]),
    (_grouped("1g"), [f"spec.replicatedJobs[0].groupName: {DNS1035}"]),
    (_jobset(managedBy="kueue"), ['spec.managedBy: must be a domain-prefixed path (such as "acme.io/foo")']),
    (_jobset(managedBy=""), ["spec.managedBy: Required value"]),  # field.Required, before the split
    (_jobset(managedBy="example.com/kueue manager"), [f"spec.managedBy: {INVALID_PATH}"]),
    # Go's `$` ends the text: a trailing newline is no path character
    (_jobset(managedBy="example.com/kueue\n"), [f"spec.managedBy: {INVALID_PATH}"]),
    (_jobset(managedBy="Example.com/a b"), [f"spec.managedBy: {DNS1123}", f"spec.managedBy: {INVALID_PATH}"])])
def test_subdomain_group_name_and_manager_refusals_say_what_upstream_says(obj: dict[str, Any],
                                                                          expected: list[str]) -> None:
    """IsDNS1123Subdomain's problems as they are; IsDNS1035Label's with the length one replaced by the webhook's
    subdomainTooLongErrMsg or groupNameTooLongErrorMsg; IsDomainPrefixedPath's for managedBy."""
    assert lines(jobset(obj, STATE)) == expected


def test_replicas_default_to_one() -> None:
    """The CRD defaults replicas to 1: the longest job name is `<jobset>-<job>-0` and the product is parallelism."""
    unreplicated = {"name": "W", "template": {"spec": {}}}
    assert lines(jobset(_jobset(unreplicated), STATE)) == [f"spec.replicatedJobs[0].name: 'js-W-0': {DNS1035}"]
    assert jobset(_jobset({"name": "w", "template": {"spec": {"parallelism": MAX_INT32}}}), STATE) == []


def test_a_jobset_without_replicated_jobs() -> None:
    """The CRD does not require replicatedJobs: a coordinator then names no job, and no container mounts a claim."""
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "v"},
           "spec": {"coordinator": {"replicatedJob": "w"},
                    "volumeClaimPolicies": [{"templates": [{"metadata": {"name": "data"}, "spec": {}}]}]}}
    assert lines(jobset(obj, STATE)) == [
        "spec.coordinator: coordinator replicatedJob w does not exist",
        "spec.replicatedJobs: replicatedJob containers don't have a matching volumeMount: data from "
        "VolumeClaimPolicies"]


def _placed(follower: dict[str, Any] | None = None, leader: dict[str, Any] | None = None) -> list[str]:
    """A follower and its leader, each with the given top-level fields replaced (a None value deletes one)."""
    def edited(pod: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        for key, value in fields.items():
            target = pod["metadata"] if key == "ownerReferences" else pod
            if value is None:
                del target[key]
            else:
                target[key] = value
        return pod
    pods = edited(_pod("js-w-0-1", "1"), follower or {}), edited(_pod("js-w-0-0", "0"), leader or {})
    return lines(exclusive_placement(pods[0], ClusterState([pods[1]])))


SELECTOR_NOT_SET = "follower pod node selector not set"
NO_TOPOLOGY = "follower pod node selector for topology domain not found. missing selector: rack"
UNSCHEDULED = "leader pod not yet scheduled, not creating follower pod. this is an expected, transient error"


@pytest.mark.parametrize(("follower", "leader", "expected"), [
    ({}, {}, []), ({"spec": {"nodeSelector": {"rack": "r1", "zone": "z1"}}}, {}, []),
    ({"spec": {}}, {}, [SELECTOR_NOT_SET]), ({"spec": None}, {}, [SELECTOR_NOT_SET]),
    ({"spec": {"nodeSelector": {}}}, {}, [NO_TOPOLOGY]),
    ({"spec": {"nodeSelector": {"zone": "z1"}}}, {}, [NO_TOPOLOGY]),
    ({}, {"spec": {"nodeSelector": {"rack": "r1"}}}, [UNSCHEDULED]), ({}, {"spec": {"nodeName": ""}}, [UNSCHEDULED]),
    ({}, {"spec": None}, [UNSCHEDULED]),
    ({"ownerReferences": None}, {}, ["follower pod has no owner reference"]),
    ({}, {"ownerReferences": None}, ['leader pod "js-w-0-0" has no owner reference']),
    ({}, {"ownerReferences": [{"uid": "v", "controller": True}]},
     ["follower pod owner UID (u) != leader pod owner UID (v)"])])
def test_a_follower_needs_the_topology_selector_and_a_scheduled_leader_of_its_job(
        follower: dict[str, Any], leader: dict[str, Any], expected: list[str]) -> None:
    """pod_webhook.go ValidateCreate: a nil node selector (a Pod without spec has none), one without the topology
    key, a leader without a node, and owner references that are absent (GetControllerOf nil) or of another Job;
    every refusal is a plain error (no field)."""
    assert _placed(follower, leader) == expected


# --- volume claim policies (jobset_webhook.go validateVolumeClaimPolicies) ---------------------------------------

def _claimed(template: dict[str, Any], mount: str = "data", retain: bool = True) -> dict[str, Any]:
    job = _job("w", template={"spec": {"containers": [{"name": "c", "volumeMounts": [{"name": mount,
                                                                                       "mountPath": "/d"}]}]}})
    policy = {"templates": [template]} | ({"retentionPolicy": {"whenDeleted": "Retain"}} if retain else {})
    return _jobset(job, volumeClaimPolicies=[policy])


def test_a_claim_template_name_is_a_dns_subdomain_even_when_absent() -> None:
    """IsDNS1123Subdomain(template.Name): the CRD does not require the template's name, and an empty one is refused
    and then mounted by no container."""
    assert jobset(_claimed({"metadata": {"name": "data"}}), STATE) == []
    assert lines(jobset(_claimed({"metadata": {"name": "Data"}}, mount="Data"), STATE)) == [
        f"spec.volumeClaimPolicies[0].template[0].name: {DNS1123}"]
    assert lines(jobset(_claimed({"metadata": {}}), STATE)) == [
        f"spec.volumeClaimPolicies[0].template[0].name: {DNS1123}",
        "spec.replicatedJobs: replicatedJob containers don't have a matching volumeMount:  from VolumeClaimPolicies"]


@pytest.mark.parametrize(("existing", "template", "matches"), [
    (None, None, True), ({}, None, True), (None, {}, True), ({"accessModes": ["ReadWriteOnce"]}, None, False),
    (None, {"accessModes": ["ReadWriteOnce"]}, False), ({"volumeMode": "Block"}, {"volumeMode": "Block"}, True)])
def test_an_existing_claims_spec_is_compared_as_a_struct(existing: dict[str, Any] | None,
                                                         template: dict[str, Any] | None, matches: bool) -> None:
    """reflect.DeepEqual(existingPVC.Spec, template.Spec): an absent spec is Go's zero value, equal to an empty one."""
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-js", "namespace": "v"}}
    claim = {"metadata": {"name": "data"}}
    found = lines(jobset(_claimed(claim | ({} if template is None else {"spec": template})),
                         ClusterState([pvc | ({} if existing is None else {"spec": existing})])))
    assert found == ([] if matches else [
        "spec.volumeClaimPolicies[0].template[0].spec: spec does not match existing PVC data-js in namespace v"])
