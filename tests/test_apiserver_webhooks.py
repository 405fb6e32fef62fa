"""The pinned operators' webhook rules, one test per rule: what passes at the limit and what is refused one
past it (Kueue 0.19.2, Trainer 2.2.1, JobSet 0.12.0), and the registry keyed by component minor."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import REGISTRY, review, rules_for
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED

KUEUE = "kueue.x-k8s.io/v1beta2"
TRAINER = "trainer.kubeflow.org/v1alpha1"
RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"


def refusals(obj: dict[str, Any], *cluster: dict[str, Any]) -> list[str]:
    return [r.line() for r in review(obj, ClusterState([*MANAGED, *cluster, obj]), RULES)]


def _cq(groups: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "vision"},
            "spec": {"resourceGroups": groups, **spec}}


def _group(resources: list[str], flavors: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"coveredResources": resources,
            "flavors": [{"name": name, "resources": quotas} for name, quotas in flavors.items()]}


def _quota(name: str, nominal: Any = 8, **limits: Any) -> dict[str, Any]:
    return {"name": name, "nominalQuota": nominal, **limits}


def test_registry_is_keyed_by_component_minor() -> None:
    assert set(REGISTRY) == {("kueue", "0.19"), ("trainer", "2.2"), ("jobset", "0.12")}
    rules, missing = rules_for(Versions(kueue="0.20.0", trainer="2.3.0", jobset="0.12.0"))
    assert {u.where for u in missing} == {"kueue 0.20", "trainer 2.3"}
    assert {r.component for r in rules} == {"jobset"}


# --- Kueue: ClusterQueue ----------------------------------------------------------------------------------

def test_flavor_resources_follow_covered_resources_in_order() -> None:
    ok = _cq([_group(["cpu", "memory"], {"h100": [_quota("cpu"), _quota("memory")]})])
    assert refusals(ok) == []
    swapped = _cq([_group(["cpu", "memory"], {"h100": [_quota("memory"), _quota("cpu")]})])
    assert refusals(swapped) == [
        "webhook:kueue: spec.resourceGroups[0].flavors[0].resources[0].name: must match the name in coveredResources",
        "webhook:kueue: spec.resourceGroups[0].flavors[0].resources[1].name: must match the name in coveredResources"]


def test_a_resource_and_a_flavor_belong_to_one_resource_group() -> None:
    twice = _cq([_group(["cpu"], {"h100": [_quota("cpu")]}), _group(["cpu"], {"l40s": [_quota("cpu")]})])
    assert refusals(twice) == ["webhook:kueue: spec.resourceGroups[1].coveredResources[0]: Duplicate value: 'cpu'"]
    flavor_twice = _cq([_group(["cpu"], {"h100": [_quota("cpu")]}), _group(["memory"], {"h100": [_quota("memory")]})])
    assert refusals(flavor_twice) == ["webhook:kueue: spec.resourceGroups[1].flavors[0].name: Duplicate value: 'h100'"]


def test_covered_resources_are_label_keys() -> None:
    assert refusals(_cq([_group(["nvidia.com/gpu"], {"h100": [_quota("nvidia.com/gpu")]})])) == []
    assert refusals(_cq([_group(["nvidia.com/gpu!"], {"h100": [_quota("nvidia.com/gpu!")]})]))


@pytest.mark.parametrize(("cohort", "refused"), [("all", False), ("", True)])
def test_borrowing_and_lending_limits_need_a_cohort(cohort: str, refused: bool) -> None:
    cq = _cq([_group(["cpu"], {"h100": [_quota("cpu", 8, borrowingLimit=2, lendingLimit=2)]})])
    if cohort:
        cq["spec"]["cohortName"] = cohort
    lines = refusals(cq)
    assert bool(lines) is refused
    assert not refused or (all("must be nil when cohort is empty" in line for line in lines) and len(lines) == 2)


@pytest.mark.parametrize(("lending", "refused"), [("8", False), ("9", True), ("8000m", False), ("8001m", True)])
def test_lending_limit_at_most_nominal(lending: str, refused: bool) -> None:
    cq = _cq([_group(["cpu"], {"h100": [_quota("cpu", "8", lendingLimit=lending)]})], cohortName="all")
    assert (refusals(cq) == ["webhook:kueue: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be "
                             "less than or equal to the nominalQuota"]) is refused


def test_totals_across_resource_groups() -> None:
    at_limit = _cq([_group(["cpu"], {f"f{i}": [_quota("cpu")] for i in range(256)})])
    assert refusals(at_limit) == []
    one_past = copy.deepcopy(at_limit)
    one_past["spec"]["resourceGroups"].append(_group(["memory"], {"extra": [_quota("memory")]}))
    assert refusals(one_past) == ["webhook:kueue: spec.resourceGroups: total number of flavors across all "
                                  "resourceGroups must be ≤ 256, got 257"]


def test_preemption_fungibility_and_fair_sharing() -> None:
    base = [_group(["cpu"], {"h100": [_quota("cpu")]})]
    assert refusals(_cq(base, preemption={"reclaimWithinCohort": "Never",
                                          "borrowWithinCohort": {"policy": "LowerPriority"}}))
    assert refusals(_cq(base, preemption={"reclaimWithinCohort": "Any",
                                          "borrowWithinCohort": {"policy": "LowerPriority"}})) == []
    assert refusals(_cq(base, flavorFungibility={"preference": "BorrowingOverPreemption"}))
    assert refusals(_cq(base, flavorFungibility={"preference": "BorrowingOverPreemption",
                                                 "whenCanBorrow": "TryNextFlavor"})) == []
    assert refusals(_cq(base, fairSharing={"weight": "1n"})) == [
        "webhook:kueue: spec.fairSharing: When not 0, weight must be > 10e-9"]
    assert refusals(_cq(base, fairSharing={"weight": "2n"})) == []
    assert refusals(_cq(base, fairSharing={"weight": "0"})) == []


def test_admission_checks_name_flavors_of_the_queue() -> None:
    base = [_group(["cpu"], {"h100": [_quota("cpu")]})]
    def strategy(flavor: str) -> dict[str, Any]:
        return {"admissionChecks": [{"name": "a", "onFlavors": [flavor]}]}
    assert refusals(_cq(base, admissionChecksStrategy=strategy("h100"))) == []
    assert refusals(_cq(base, admissionChecksStrategy=strategy("l40s")))


def test_namespace_selector_is_a_valid_label_selector() -> None:
    base = [_group(["cpu"], {"h100": [_quota("cpu")]})]
    good = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
    assert refusals(_cq(base, namespaceSelector=good)) == []
    assert refusals(_cq(base, namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In"}]}))


# --- Kueue: Cohort, ResourceFlavor, queue name, topology ---------------------------------------------------

def test_cohort_limits_need_a_parent_but_lending_may_exceed_nominal() -> None:
    cohort: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "all"},
              "spec": {"resourceGroups": [_group(["cpu"], {"h100": [_quota("cpu", 1, lendingLimit=4)]})]}}
    assert refusals(cohort) == ["webhook:kueue: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be "
                                "nil when parent is empty"]
    cohort["spec"]["parentName"] = "root"
    assert refusals(cohort) == []


def test_resource_flavor_taints_unique_by_key_and_effect() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    flavor: dict[str, Any] = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
              "spec": {"nodeLabels": {"pool": "h100"}, "nodeTaints": [taint, {**taint, "effect": "NoExecute"}]}}
    assert refusals(flavor) == []
    flavor["spec"]["nodeTaints"].append({**taint, "value": "other"})
    assert refusals(flavor) == ["webhook:kueue: spec.nodeTaints[2]: taints must be unique by key and effect pair"]
    flavor["spec"]["nodeLabels"] = {"pool": "h100 sxm"}
    assert len(refusals(flavor)) == 2


@pytest.mark.parametrize(("queue", "refused"), [("vision", False), ("vision.gpu", False), ("Vision", True),
                                                ("a" * 253, False), ("a" * 254, True)])
def test_queue_name_label_is_a_dns_subdomain(queue: str, refused: bool) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "vision",
                                                                  "labels": {"kueue.x-k8s.io/queue-name": queue}}}
    assert bool(refusals(job)) is refused


def _jobset(*jobs: dict[str, Any], name: str = "train") -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": "vision"}, "spec": {"replicatedJobs": list(jobs)}}


def _rjob(name: str, replicas: int = 1, annotations: dict[str, str] | None = None, **job: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "template": {"spec": {**job, "template": {
        "metadata": {"annotations": annotations or {}}, "spec": {"containers": [{"name": name, "image": "i"}]}}}}}


def test_one_topology_annotation_per_pod_template() -> None:
    assert refusals(_jobset(_rjob("node", annotations={TOPOLOGY: "rack"}))) == []
    both = {TOPOLOGY: "rack", "kueue.x-k8s.io/podset-preferred-topology": "rack"}
    lines = refusals(_jobset(_rjob("node", annotations=both)))
    assert any("more than one topology annotation" in line for line in lines)


def test_pod_set_groups_are_pairs_with_one_single_pod_and_one_topology() -> None:
    grouped = {TOPOLOGY: "rack", GROUP: "trainer"}
    assert refusals(_jobset(_rjob("launcher", 1, grouped), _rjob("node", 4, grouped))) == []
    assert any("groups where at least one pod set has only 1 replica" in line
               for line in refusals(_jobset(_rjob("launcher", 2, grouped), _rjob("node", 4, grouped))))
    assert any("groups of exactly 2 pod sets" in line for line in refusals(_jobset(_rjob("node", 4, grouped))))
    other = {"kueue.x-k8s.io/podset-preferred-topology": "rack", GROUP: "trainer"}
    assert any("consistent with" in line for line in refusals(_jobset(_rjob("launcher", 1, grouped),
                                                                      _rjob("node", 4, other))))


# --- JobSet ----------------------------------------------------------------------------------------------

def test_jobset_generated_job_names_fit_63_characters() -> None:
    # "<jobset>-<job>-<index>": 55 + 1 + 5 + 2 = 63 passes; one more character is refused
    assert refusals(_jobset(_rjob("nodes", replicas=10), name="j" * 55)) == []
    lines = refusals(_jobset(_rjob("nodes", replicas=10), name="j" * 56))
    assert lines == ["webhook:jobset: spec.replicatedJobs[0].name: JobSet name is too long, job names generated for "
                     "this JobSet will exceed 63 characters"]


def test_jobset_depends_on_only_earlier_jobs_and_not_on_the_first() -> None:
    first, second = _rjob("init"), _rjob("node")
    second["dependsOn"] = [{"name": "init", "status": "Complete"}]
    assert refusals(_jobset(first, second)) == []
    assert refusals(_jobset(second, first)) == [
        "webhook:jobset: spec.replicatedJobs[0].dependsOn: DependsOn can't be set for the first ReplicatedJob",
        "webhook:jobset: spec.replicatedJobs[0].dependsOn: replicatedJob: node cannot depend on replicatedJob: init"]


def test_jobset_success_and_failure_policies_name_existing_jobs() -> None:
    jobset = _jobset(_rjob("node"))
    jobset["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["node"]}
    rule = {"name": "r1", "action": "FailJobSet", "targetReplicatedJobs": ["node"]}
    jobset["spec"]["failurePolicy"] = {"rules": [rule]}
    assert refusals(jobset) == []
    jobset["spec"]["successPolicy"]["targetReplicatedJobs"] = ["workers"]
    jobset["spec"]["failurePolicy"]["rules"].append({"name": "r1", "action": "FailJobSet"})
    assert len(refusals(jobset)) == 2


def test_jobset_group_name_and_subdomain() -> None:
    jobset = _jobset(_rjob("node"))
    jobset["spec"]["network"] = {"subdomain": "train"}
    assert refusals(jobset) == []
    jobset["spec"]["network"] = {"subdomain": "1train"}
    jobset["spec"]["replicatedJobs"][0]["groupName"] = "Group"
    assert len(refusals(jobset)) == 2
