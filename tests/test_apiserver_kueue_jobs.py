"""The job-framework rules added for the pinned Kueue (v0.19.2 jobframework/validation.go ValidateJobOnCreate,
jobs/job/job_webhook.go), JobSet (v0.12.0 jobset_webhook.go, pod_webhook.go) and Trainer (v2.2.1 flux plugin):
each refuses one object and admits its nearest valid neighbour; and Kueue's rules apply only where Kueue registers
them (integrated frameworks, managed namespaces, feature gates)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import review, rules_for
from infra.apiserver.webhooks.kueue_v0_19_jobs import job_on_create
from infra.spec import runtimes as rt
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED, kueue_config, namespace

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
ELASTIC, GATED = "kueue.x-k8s.io/elastic-job", "kueue.x-k8s.io/admission-gated-by"
MIN, EQUAL = "kueue.x-k8s.io/job-min-parallelism", "kueue.x-k8s.io/job-completions-equal-parallelism"
EXEC, PREBUILT = "kueue.x-k8s.io/max-exec-time-seconds", "kueue.x-k8s.io/prebuilt-workload-name"


def refusals(obj: dict[str, Any], *cluster: dict[str, Any], family: str = "") -> list[str]:
    state = ClusterState([*(cluster or MANAGED), obj])
    return [r.line() for r in review(obj, state, RULES) if r.family.startswith(family)]


def job(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "vision", "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"parallelism": 4, **spec, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def jobset(annotations: dict[str, str] | None = None, name: str = "js", **job_spec: Any) -> dict[str, Any]:
    template = {"spec": {"parallelism": 2, **job_spec, "template": {"spec": {"containers": [{"name": "c",
                                                                                              "image": "i"}]}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "vision", "annotations": annotations or {}},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": template}]}}


# kueue jobframework/validation.go ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "message"), [
    ("abc", 'Invalid value: "abc": strconv.Atoi: parsing "abc": invalid syntax'),
    ("0", "Invalid value: 0: should be greater than 0"),
    ("-5", "Invalid value: -5: should be greater than 0"),
])
def test_max_exec_time_is_a_positive_whole_number_of_seconds(value: str, message: str) -> None:
    assert refusals(job({EXEC: value})) == [f"webhook:kueue: metadata.labels[{EXEC}]: {message}"]
    assert refusals(job({EXEC: "1"})) == []


def test_a_prebuilt_workload_name_is_a_dns_subdomain() -> None:
    found = refusals(jobset({PREBUILT: "Bad_Name"}))
    assert found and found[0].startswith(f"webhook:kueue: metadata.annotations[{PREBUILT}]: Invalid value: "
                                         '"Bad_Name": a lowercase RFC 1123 subdomain')
    assert refusals(jobset({PREBUILT: "wl-1"})) == []
    labelled = job({PREBUILT: "Bad_Name"})
    assert refusals(labelled)[0].startswith(f"webhook:kueue: metadata.labels[{PREBUILT}]: Invalid value")


def test_a_prebuilt_workload_only_on_kinds_that_support_it() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "vision",
                                                                              "labels": {PREBUILT: "wl"}}}
    state = ClusterState(MANAGED)
    assert [r.line() for r in job_on_create(deployment, state)] == [
        f'webhook:kueue: metadata.labels[{PREBUILT}]: Forbidden: Is not supported for "apps/v1, Kind=Deployment"']
    assert job_on_create(job({PREBUILT: "wl"}), state) == []


def test_elastic_jobs_only_for_batch_jobs_while_the_gate_is_on() -> None:
    assert refusals(jobset({ELASTIC: "true"})) == [
        f'webhook:kueue: metadata.annotations[{ELASTIC}]: Forbidden: elastic job is not supported for '
        '"jobset.x-k8s.io/v1alpha2, Kind=JobSet"']
    assert refusals(jobset({ELASTIC: "false"})) == [] and refusals(job(annotations={ELASTIC: "true"})) == []
    gate_off = [kueue_config(gates={"ElasticJobsViaWorkloadSlices": False}), namespace("vision")]
    assert refusals(jobset({ELASTIC: "true"}), *gate_off) == []


@pytest.mark.parametrize(("value", "message"), [
    ("example.com/a,example.com/a", 'Invalid value: "example.com/a,example.com/a": duplicate gate name: '
                                    "example.com/a"),
    ("example.com/a,,example.com/b", 'Invalid value: "example.com/a,,example.com/b": cannot contain empty gate '
                                     "names"),
    ("no-domain", 'Invalid value: "no-domain": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("example.com/" + "g" * 52, "Too long: may not be more than 63 bytes"),
])
def test_admission_gates_are_distinct_domain_prefixed_names(value: str, message: str) -> None:
    assert refusals(job(annotations={GATED: value})) == [f"webhook:kueue: metadata.annotations[{GATED}]: {message}"]
    assert refusals(job(annotations={GATED: "example.com/a, example.com/" + "g" * 51})) == []
    gate_off = [kueue_config(gates={"AdmissionGatedBy": False}), namespace("vision")]
    assert refusals(job(annotations={GATED: value}), *gate_off) == []


# kueue jobs/job/job_webhook.go --------------------------------------------------------------------------------------

def test_partial_admission_minimum_is_below_the_pod_count() -> None:
    assert refusals(job(annotations={MIN: "4"})) == [
        f"webhook:kueue: metadata.annotations[{MIN}]: Invalid value: 4: should be between 0 and 3"]
    assert refusals(job(annotations={MIN: "3"})) == []
    assert refusals(job(annotations={MIN: "0"}))
    assert refusals(job(annotations={MIN: "x"})) == [
        f'webhook:kueue: metadata.annotations[{MIN}]: Invalid value: "x": strconv.Atoi: parsing "x": invalid syntax']
    assert refusals(job(annotations={MIN: "3", ELASTIC: "true"})) == [
        f'webhook:kueue: metadata.annotations[{MIN}]: Invalid value: "3": partial admission and elastic job cannot '
        "be used together"]


def test_completions_equal_to_parallelism_needs_an_indexed_job_with_equal_counts() -> None:
    assert refusals(job(annotations={EQUAL: "true"}, completionMode="Indexed", completions=4)) == []
    assert refusals(job(annotations={EQUAL: "true"}, completionMode="Indexed", completions=5)) == [
        f"webhook:kueue: spec.completions: Invalid value: 5: should be equal to parallelism when {EQUAL} annotation "
        "is true"]
    assert refusals(job(annotations={EQUAL: "true"}, completions=4)) == [
        f'webhook:kueue: metadata.annotations[{EQUAL}]: Invalid value: "true": should not be enabled for NonIndexed '
        "jobs"]
    assert refusals(job(annotations={EQUAL: "yes"}, completionMode="Indexed", completions=4)) == [
        f'webhook:kueue: metadata.annotations[{EQUAL}]: Invalid value: "yes": strconv.ParseBool: parsing "yes": '
        "invalid syntax"]
    assert refusals(job(annotations={EQUAL: "false"}, completions=4)) == []


# Kueue registers its rules only where it manages the job -----------------------------------------------------------

def test_no_kueue_job_rule_for_a_framework_it_does_not_integrate_or_a_namespace_it_does_not_manage() -> None:
    bad = job({EXEC: "0"})
    assert refusals(bad)
    assert refusals(bad, kueue_config(frameworks=["jobset.x-k8s.io/jobset"]), namespace("vision")) == []
    selector = {"matchExpressions": [{"key": "trainyard.io/team", "operator": "Exists"}]}
    assert refusals(bad, kueue_config(selector=selector), namespace("vision")) == []
    assert refusals(bad, kueue_config(selector=selector), namespace("vision", **{"trainyard.io/team": "v"}))


def test_topology_rules_follow_their_gate() -> None:
    bad = job(annotations={}, completions=4)
    bad["spec"]["template"]["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-slice-size": "2"}}
    assert refusals(bad)
    assert refusals(bad, kueue_config(gates={"TopologyAwareScheduling": False}), namespace("vision")) == []


# JobSet v0.12.0 ------------------------------------------------------------------------------------------------------

def test_the_first_replicated_job_depends_on_nothing_not_even_an_empty_list() -> None:
    first = jobset()
    first["spec"]["replicatedJobs"][0]["dependsOn"] = []
    assert refusals(first, family="webhook:jobset") == [
        "webhook:jobset: spec.replicatedJobs[0].dependsOn: DependsOn can't be set for the first ReplicatedJob"]
    assert refusals(jobset(), family="webhook:jobset") == []


def test_generated_pod_names_fit_63_characters_indexed_by_default() -> None:
    # "<jobset>-w-0-<completions-1>-abcde": 52 + 17 = 69 characters with 10 completions, 63 with a 46-long name
    assert refusals(jobset(name="a" * 52, completions=10), family="webhook:jobset") == [
        "webhook:jobset: spec.replicatedJobs[0].name: JobSet name is too long, pod names generated for this JobSet "
        "will exceed 63 characters"]
    assert refusals(jobset(name="a" * 46, completions=10), family="webhook:jobset") == []
    assert refusals(jobset(name="a" * 52, completions=10, completionMode="NonIndexed"), family="webhook:jobset") == []


def _pod(name: str, index: str, selector: dict[str, str] | None = None, node: str = "",
         uid: str = "job-uid") -> dict[str, Any]:
    labels = {"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "w",
              "jobset.sigs.k8s.io/job-index": "0"}
    annotations = {**labels, "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack",
                   "batch.kubernetes.io/job-completion-index": index}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "vision", "labels": labels, "annotations": annotations,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "js-w-0", "uid": uid,
                             "controller": True}]}, "spec": spec}


def test_a_follower_pod_of_exclusive_placement_waits_for_its_scheduled_leader() -> None:
    assert refusals(_pod("js-w-0-0", "0"), family="webhook:jobset") == []  # the leader goes first
    assert refusals(_pod("js-w-0-1", "1"), family="webhook:jobset") == [
        "webhook:jobset: follower pod node selector not set"]
    assert refusals(_pod("js-w-0-1", "1", {}), family="webhook:jobset") == [
        "webhook:jobset: follower pod node selector for topology domain not found. missing selector: rack"]
    follower = _pod("js-w-0-1", "1", {"rack": "r1"})
    assert refusals(follower, family="webhook:jobset") == [
        "webhook:jobset: expected 1 leader pod (js-w-0-0), but got 0. this is an expected, transient error"]
    assert refusals(follower, *MANAGED, _pod("js-w-0-0", "0"), family="webhook:jobset") == [
        "webhook:jobset: leader pod not yet scheduled, not creating follower pod. this is an expected, transient "
        "error"]
    assert refusals(follower, *MANAGED, _pod("js-w-0-0", "0", node="n1", uid="other"), family="webhook:jobset") == [
        "webhook:jobset: follower pod owner UID (job-uid) != leader pod owner UID (other)"]
    assert refusals(follower, *MANAGED, _pod("js-w-0-0", "0", node="n1"), family="webhook:jobset") == []
    unlabelled = copy.deepcopy(_pod("js-w-0-1", "1"))
    unlabelled["metadata"]["labels"] = {}  # the webhook's objectSelector: not sent to it at all
    assert refusals(unlabelled, family="webhook:jobset") == []


# Trainer v2.2.1 flux plugin ------------------------------------------------------------------------------------------

def test_flux_reserves_its_installer_init_container() -> None:
    runtime = rt.read("torch-distributed")
    runtime["metadata"]["name"] = "flux-run"
    policy = runtime["spec"]["mlPolicy"]
    policy.pop("torch", None)
    policy["flux"] = {"numProcPerNode": 1}
    node = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimeRef": {"name": "flux-run"}}}
    assert refusals(trainjob, *MANAGED, runtime, family="webhook:trainer") == []
    node["template"]["spec"]["template"]["spec"]["initContainers"] = [{"name": "flux-installer", "image": "i"}]
    assert refusals(trainjob, *MANAGED, runtime, family="webhook:trainer") == [
        "webhook:trainer: spec.trainer.initContainers: Invalid value: \"flux-installer\": InitContainer "
        "'flux-installer' is reserved"]
