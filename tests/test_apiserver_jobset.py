"""JobSet 0.12.0's failure-policy and coordinator rules offline (pkg/webhooks/jobset_webhook.go
validateFailurePolicy, validateCoordinator, validateCoordinatorLabelValue), after its defaulting webhook: an
unnamed rule is `failurePolicyRule<index>`, a job without completionMode is Indexed."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import review, rules_for
from infra.spec.versions import Versions
from tests.kueue_cluster import MANAGED

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
REASONS = ["BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded", "PodFailurePolicy"]


def jobset(rules: list[dict[str, Any]] | None = None, name: str = "train", **spec: Any) -> dict[str, Any]:
    jobs = [{"name": job, "replicas": 2, "template": {"spec": {"completions": 4, "parallelism": 4, "template": {
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}}} for job in ("driver", "workers")]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": "v"},
            "spec": {"replicatedJobs": jobs, **({"failurePolicy": {"maxRestarts": 3, "rules": rules}}
                                                if rules is not None else {}), **spec}}


def refusals(obj: dict[str, Any]) -> list[str]:
    return [r.line() for r in review(obj, ClusterState([*MANAGED, obj]), RULES) if r.family == "webhook:jobset"]


def test_every_job_failure_reason_is_admitted_and_another_refused() -> None:
    assert refusals(jobset([{"name": "r", "action": "FailJobSet", "onJobFailureReasons": REASONS}])) == []
    assert refusals(jobset([{"name": "r", "action": "FailJobSet",
                             "onJobFailureReasons": ["PodFailurePolicy", "OOMKilled"]}])) == [
        "webhook:jobset: spec.failurePolicy.rules[0].onJobFailureReasons: invalid job failure reason 'OOMKilled' in "
        "failure policy is not a recognized job failure reason"]


@pytest.mark.parametrize(("name", "refused"), [("a", False), ("a" * 128, False), ("Fail_on:oom,x_", False),
                                               ("a" * 129, True), ("1st", True), ("ends-", True), ("x:", True)])
def test_rule_names_are_checked_after_defaulting(name: str, refused: bool) -> None:
    lines = refusals(jobset([{"name": name, "action": "FailJobSet"}]))
    assert bool(lines) is refused, lines
    if len(name) > 128:
        assert lines == ["webhook:jobset: spec.failurePolicy.rules[0].name: invalid failure policy rule name of "
                         "length 129, the rule name must be at least 1 characters long and at most 128 characters "
                         "long"]


def test_unnamed_rules_get_distinct_default_names_and_named_duplicates_are_refused() -> None:
    assert refusals(jobset([{"action": "FailJobSet"}, {"name": "", "action": "RestartJobSet"}])) == []
    assert refusals(jobset([{"name": "failurePolicyRule1", "action": "FailJobSet"}, {"action": "RestartJobSet"}])) == [
        "webhook:jobset: spec.failurePolicy.rules: rule names are not unique, rules with indices [0 1] all have the "
        "same name 'failurePolicyRule1'"]


def test_rule_targets_are_replicated_jobs() -> None:
    assert refusals(jobset([{"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["workers"]}])) == []
    assert refusals(jobset([{"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["worker"]}])) == [
        "webhook:jobset: spec.failurePolicy.rules[0].targetReplicatedJobs: invalid replicatedJob name 'worker' in "
        "failure policy does not appear in .spec.ReplicatedJobs"]


def test_a_restart_job_action_is_refused_alone_while_its_gate_is_off() -> None:
    lines = refusals(jobset([{"name": "1bad", "action": "RestartJob", "onJobFailureReasons": ["Nope"]}]))
    assert lines == ["webhook:jobset: spec.failurePolicy.rules: RestartJob and RestartJobAndIgnoreMaxRestarts failure "
                     "policy actions are not allowed when RestartJob feature gate is disabled"]


@pytest.mark.parametrize(("coordinator", "refusal"), [
    ({"replicatedJob": "workers", "jobIndex": 1, "podIndex": 3}, None),
    ({"replicatedJob": "worker"}, "coordinator replicatedJob worker does not exist"),
    ({"replicatedJob": "workers", "jobIndex": 2}, "coordinator job index 2 is invalid for replicatedJob workers"),
    ({"replicatedJob": "workers", "jobIndex": 1, "podIndex": 4},
     "coordinator pod index 4 is invalid for replicatedJob workers job index 1"),
])
def test_the_coordinator_pod_exists(coordinator: dict[str, Any], refusal: str | None) -> None:
    lines = refusals(jobset(coordinator=coordinator))
    assert lines == ([f"webhook:jobset: spec.coordinator: {refusal}"] if refusal else [])


def test_the_coordinator_job_is_indexed_by_default_and_its_endpoint_a_label_value() -> None:
    obj = jobset(coordinator={"replicatedJob": "driver"})
    assert refusals(obj) == []  # no completionMode: the defaulting webhook made it Indexed
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] = "NonIndexed"
    assert refusals(obj) == ["webhook:jobset: spec.coordinator: job for coordinator pod must be indexed completion "
                             "mode, and completions number must be set"]
    # "<jobset>-driver-0-0.<subdomain>": 25 + 12 + 26 = 63 characters pass, one more is refused
    name, coordinator = "j" * 25, {"replicatedJob": "driver"}
    assert refusals(jobset(name=name, coordinator=coordinator, network={"subdomain": "s" * 26})) == []
    lines = refusals(jobset(name=name, coordinator=coordinator, network={"subdomain": "s" * 27}))
    assert lines == [f'webhook:jobset: spec.coordinator: spec will lead to invalid label value "{name}-driver-0-0.'
                     f'{"s" * 27}" for coordinator label "jobset.sigs.k8s.io/coordinator" (long JobSet / ReplicatedJob '
                     "/ SubDomain name?): must be no more than 63 characters"]
    # without a subdomain the endpoint ends in the JobSet's name: 2 x 25 + 12 = 62
    assert refusals(jobset(name=name, coordinator=coordinator)) == []
    assert len(refusals(jobset(name="j" * 26, coordinator=coordinator))) == 1


def claims(*names: str, retain: bool = False, mount: str = "cache") -> dict[str, Any]:
    obj = jobset(volumeClaimPolicies=[{
        "templates": [{"metadata": {"name": n}, "spec": {"accessModes": ["ReadWriteMany"],
                                                          "resources": {"requests": {"storage": "1Gi"}}}}
                      for n in names],
        **({"retentionPolicy": {"whenDeleted": "Retain"}} if retain else {})}])
    container = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": mount, "mountPath": "/cache"}]
    return obj


def review_with(obj: dict[str, Any], *cluster: dict[str, Any]) -> list[str]:
    state = ClusterState([*MANAGED, *cluster, obj])
    return [r.line() for r in review(obj, state, RULES) if r.family == "webhook:jobset"]


def test_volume_claim_templates_are_unique_mounted_and_not_shadowed() -> None:
    assert refusals(claims("cache")) == []
    assert refusals(claims("cache", "cache")) == [
        "webhook:jobset: spec.volumeClaimPolicies[0].template[1].name: names must be unique for VolumeClaimPolicies "
        "template"]
    assert refusals(claims("cache", mount="data")) == [
        "webhook:jobset: spec.replicatedJobs: replicatedJob containers don't have a matching volumeMount: cache from "
        "VolumeClaimPolicies"]
    shadowed = claims("cache")
    shadowed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"] = [
        {"name": "cache", "emptyDir": {}}]
    assert refusals(shadowed) == [
        "webhook:jobset: spec.replicatedJobs[0].template.spec.template.spec.volumes[0].name: volume name conflicts "
        "with VolumeClaimPolicy template name: cache"]


def test_the_generated_claim_name_fits_63_characters() -> None:
    # "<claim>-<jobset>": 57 + 1 + 5 ("train") = 63 passes, one more is refused
    assert refusals(claims("c" * 57, mount="c" * 57)) == []
    assert refusals(claims("c" * 58, mount="c" * 58)) == [
        "webhook:jobset: spec.volumeClaimPolicies[0].template[0].name: VolumeClaimPolicies template name is too long"]


def test_an_existing_claim_must_match_and_be_retained() -> None:
    obj = claims("cache", retain=True)
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "cache-train", "namespace": "v"},
           "spec": obj["spec"]["volumeClaimPolicies"][0]["templates"][0]["spec"]}
    assert review_with(obj, pvc) == []
    assert review_with(claims("cache"), pvc) == [
        "webhook:jobset: spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: retentionPolicy must be retain when "
        "PVC exists"]
    other = {**pvc, "spec": {**pvc["spec"], "resources": {"requests": {"storage": "2Gi"}}}}
    assert review_with(obj, other) == [
        "webhook:jobset: spec.volumeClaimPolicies[0].template[0].spec: spec does not match existing PVC cache-train in "
        "namespace v"]
