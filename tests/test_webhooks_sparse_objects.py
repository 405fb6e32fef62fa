"""Every webhook rule on objects the CRDs and the API server admit with their optional fields left out: no `spec`
at all (optional in the Kueue, JobSet and Trainer CRDs), no labels or annotations, replicated jobs with an empty
template, pod sets and runtimes without containers. A webhook decodes such an object into its Go type, where an
absent field is its zero value (an empty list or map, 0, "", or a documented default), so the rule answers as for
that value: here nothing is refused unless a test line says what upstream refuses. Sources as in the per-rule test
files (Kueue v0.19.2, JobSet v0.12.0, Trainer v2.2.1)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Unchecked
from infra.apiserver.webhooks import REGISTRY, WebhookRule, review, rules_for
from infra.apiserver.webhooks.jobset_v0_12 import exclusive_placement, jobset
from infra.apiserver.webhooks.kueue_v0_19 import cluster_queue, cohort, resource_flavor
from infra.apiserver.webhooks.kueue_v0_19_jobs import job_annotations, job_on_create
from infra.apiserver.webhooks.kueue_v0_19_tas import job_topology, jobset_topology, trainjob_topology
from infra.apiserver.webhooks.kueue_v0_19_workload import workload
from infra.apiserver.webhooks.trainer_v2_2 import runtime, trainjob
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED

STATE = ClusterState(MANAGED)
KINDS = {"ClusterQueue": "kueue.x-k8s.io/v1beta2", "Cohort": "kueue.x-k8s.io/v1beta2",
         "ResourceFlavor": "kueue.x-k8s.io/v1beta2", "Workload": "kueue.x-k8s.io/v1beta2", "Job": "batch/v1",
         "JobSet": "jobset.x-k8s.io/v1alpha2", "TrainJob": "trainer.kubeflow.org/v1alpha1",
         "ClusterTrainingRuntime": "trainer.kubeflow.org/v1alpha1", "TrainingRuntime": "trainer.kubeflow.org/v1alpha1",
         "Pod": "v1"}
RULES: list[WebhookRule] = [rule for rules in REGISTRY.values() for rule in rules]


def bare(kind: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": KINDS[kind], "kind": kind, "metadata": {"name": "x", "namespace": "v"}, **fields}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.component}-{r.kind}-{r.name}")
def test_an_object_without_spec_labels_or_annotations_is_refused_by_no_rule(rule: WebhookRule) -> None:
    """Except the Trainer's TrainJob rule: a TrainJob that names no runtime finds none."""
    found = rule.check(bare(rule.kind), STATE)
    if rule.name == "trainjob":
        assert [(r.family, r.field) for r in found] == [("webhook:trainer", "spec.runtimeRef")]
    else:
        assert found == []


EMPTY_JOB = {"name": "w", "template": {}}


@pytest.mark.parametrize(("check", "obj"), [
    (cluster_queue, bare("ClusterQueue", spec={"resourceGroups": [{"coveredResources": ["cpu"]}], "preemption": {},
                                               "flavorFungibility": {}, "fairSharing": {},
                                               "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]}})),
    (cluster_queue, bare("ClusterQueue", spec={"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f"}, {"name": "g", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]})),
    (cohort, bare("Cohort", spec={"resourceGroups": [{"flavors": [{"name": "f"}]}]})),
    (resource_flavor, bare("ResourceFlavor", spec={"nodeTaints": [{"key": "k", "effect": "NoSchedule"}],
                                                   "tolerations": [{"operator": "Exists"}]})),
    (workload, bare("Workload", spec={"podSets": [{"name": "main", "count": 1, "template": {}},
                                                  {"name": "b", "count": 1, "template": {"spec": {
                                                      "containers": [{"name": "c"}], "resources": {}}}}]})),
    (workload, bare("Workload", spec={"podSets": [{"name": "main", "count": 1, "template": {},
                                                   "topologyRequest": {"required": "rack"}}]})),
    (job_on_create, bare("Job", spec={})),
    (job_annotations, bare("Job", metadata={"name": "x", "annotations": {
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}}, spec={"completionMode": "Indexed"})),
    (job_topology, bare("Job", spec={"template": {}})),
    (jobset, bare("JobSet", spec={"replicatedJobs": [EMPTY_JOB], "network": {}, "successPolicy": {},
                                  "failurePolicy": {"rules": [{"action": "FailJobSet"}]},
                                  "volumeClaimPolicies": [{"templates": []}, {}]})),
    (jobset, bare("JobSet", spec={"replicatedJobs": [{**EMPTY_JOB, "template": {"spec": {"completions": 2}}}],
                                  "coordinator": {"replicatedJob": "w"}})),
    (jobset_topology, bare("JobSet", spec={"replicatedJobs": [EMPTY_JOB]})),
    (exclusive_placement, bare("Pod", metadata={"name": "p", "annotations": {"jobset.sigs.k8s.io/jobset-name": "js",
                                                                             "alpha.jobset.sigs.k8s.io/exclusive-"
                                                                             "topology": "rack"}},
                               spec={"nodeSelector": {"rack": "r"}})),
    (runtime, bare("ClusterTrainingRuntime", spec={"template": {"spec": {"replicatedJobs": [EMPTY_JOB, {
        "name": "node", "template": {"metadata": {"labels": {}}}}]}}})),
])
def test_optional_fields_left_out_deeper_down(check: Any, obj: dict[str, Any]) -> None:
    """Where a rule needs a field the object left out, the zero value decides: no flavors or resources to check, no
    pod template annotations, Indexed completions defaulted to 1 (= parallelism 1), a coordinator's job and pod index
    0 of a job with 2 completions, a follower pod that names no leader labels (refused for that, not for crashing)."""
    found = [r.line() for r in check(obj, STATE)]
    if check is exclusive_placement:
        assert found == ["webhook:jobset: pod missing label: jobset.sigs.k8s.io/jobset-name"]
    else:
        assert found == []


def _runtime(**spec: Any) -> dict[str, Any]:
    return {**bare("ClusterTrainingRuntime"), "metadata": {"name": "rt"}, "spec": spec}


@pytest.mark.parametrize("spec", [{}, {"mlPolicy": {}}, {"mlPolicy": {"torch": {}}, "template": {}},
                                  {"mlPolicy": {"torch": {}, "xgboost": {}, "flux": {}}, "template": {"spec": {
                                      "replicatedJobs": [EMPTY_JOB, {"name": "node", "template": {"spec": {}}}]}}}])
def test_a_trainjob_on_a_runtime_without_optional_fields(spec: dict[str, Any]) -> None:
    """The plugins run only for the policies the runtime names, each on zero values: nothing to refuse; Kueue's
    topology rules find no pod template annotations."""
    job = bare("TrainJob", spec={"runtimeRef": {"name": "rt"}})
    state = ClusterState([*MANAGED, _runtime(**spec)])
    assert trainjob(job, state) == []
    assert trainjob_topology(job, state) == []
    patched = bare("TrainJob", spec={"runtimeRef": {"name": "rt"}, "trainer": {},
                                     "runtimePatches": [{"manager": "example.com/m"},
                                                        {"manager": "example.com/m", "trainingRuntimeSpec": {}}]})
    assert trainjob(patched, state) == []


def test_a_jobset_volume_claim_against_a_job_with_an_empty_template() -> None:
    """validateReplicatedJobsVolumeClaims on a job whose template sets nothing: no volumes to shadow the claim and no
    container that mounts it."""
    obj = bare("JobSet", spec={"replicatedJobs": [EMPTY_JOB], "volumeClaimPolicies": [
        {"templates": [{"metadata": {"name": "data"}, "spec": {}}]}]})
    assert [r.line() for r in jobset(obj, STATE)] == [
        "webhook:jobset: spec.replicatedJobs: replicatedJob containers don't have a matching volumeMount: data from "
        "VolumeClaimPolicies"]


def test_a_claim_mounted_by_an_init_container_only_is_mounted() -> None:
    pod = {"initContainers": [{"name": "i", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}],
           "containers": [{"name": "c"}]}
    job = {"name": "w", "template": {"spec": {"template": {"spec": pod}}}}
    obj = bare("JobSet", spec={"replicatedJobs": [job], "volumeClaimPolicies": [
        {"templates": [{"metadata": {"name": "data"}, "spec": {}}]}]})
    assert jobset(obj, STATE) == []


def test_a_pod_without_labels_meets_no_rule_that_selects_labelled_pods() -> None:
    """The JobSet pod webhook's objectSelector (jobset-name label Exists): a pod with no labels at all is not sent."""
    pod = bare("Pod", metadata={"name": "p", "namespace": "v", "annotations": {
        "jobset.sigs.k8s.io/jobset-name": "js", "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}})
    assert review(pod, STATE, [rule for rules in REGISTRY.values() for rule in rules]) == []


def test_a_pinned_minor_without_rules_is_reported_with_the_minors_that_have_them() -> None:
    _, missing = rules_for(Versions(kueue="0.20.0", trainer="2.2.1", jobset="0.11.1"))
    assert missing == [Unchecked("jobset 0.11", "validating webhooks", "rules are written for jobset 0.12 only"),
                       Unchecked("kueue 0.20", "validating webhooks", "rules are written for kueue 0.19 only")]
