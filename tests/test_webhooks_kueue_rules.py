"""Kueue 0.19.2's ClusterQueue, Cohort and ResourceFlavor webhooks, field by field, from the upstream source
(kubernetes-sigs/kueue v0.19.2): `pkg/webhooks/clusterqueue_webhook.go` (validateClusterQueueSpec:
validateResourceGroups, validateFlavorQuotas, validateResourceQuantity, validateLimit, validateLendingLimit,
validatePreemption, validateFlavorFungibility, validateTotalFlavors, validateTotalCoveredResources,
validateFlavorResourceCombinations, validateAdmissionCheckOnFlavors), `pkg/webhooks/common.go`
(validateResourceName, validateFairSharing), `pkg/webhooks/cohort_webhook.go` (validateCohort: no
lending-above-nominal rule) and `pkg/webhooks/resourceflavor_webhook.go` (ValidateResourceFlavor, validateNodeTaints;
validateTolerations in workload_webhook.go); label rules are apimachinery's ValidateLabels / ValidateLabelName. Each
rule: the value at its edge admitted, one past it refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_apiserver_webhooks import KUEUE, _cq, _group, _quota, refusals

QUOTA = "webhook:kueue: spec.resourceGroups[0].flavors[0].resources[0]"


def _one(quota: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return _cq([_group(["cpu"], {"h100": [quota]})], **spec)


@pytest.mark.parametrize("key", ["nominalQuota", "borrowingLimit", "lendingLimit"])
def test_quotas_and_limits_are_not_negative(key: str) -> None:
    """validateResourceQuantity on each of the three: zero passes, -1m is refused (IsNegativeErrorMsg)."""
    quota = {"name": "cpu", "nominalQuota": "1"}
    assert refusals(_one({**quota, key: "0"}, cohortName="all")) == []
    lines = refusals(_one({**quota, key: "-1m"}, cohortName="all"))
    assert lines == [f"{QUOTA}.{key}: must be greater than or equal to 0"]


def test_a_borrowing_limit_alone_needs_a_cohort_and_names_it() -> None:
    """validateLimit: 'must be nil when cohort is empty' for a ClusterQueue, per limit set."""
    assert refusals(_one(_quota("cpu", 8, borrowingLimit=0), cohortName="all")) == []
    assert refusals(_one(_quota("cpu", 8, borrowingLimit=0))) == [
        f"{QUOTA}.borrowingLimit: must be nil when cohort is empty"]
    assert refusals(_one(_quota("cpu", 8, lendingLimit=0))) == [
        f"{QUOTA}.lendingLimit: must be nil when cohort is empty"]


def test_lending_equal_to_nominal_is_admitted_and_above_refused_in_a_cluster_queue_only() -> None:
    """validateLendingLimit (enforceNominalGreaterThanLending is true for ClusterQueues, false for Cohorts)."""
    assert refusals(_one(_quota("cpu", "500m", lendingLimit="0.5"), cohortName="all")) == []
    assert refusals(_one(_quota("cpu", "500m", lendingLimit="501m"), cohortName="all")) == [
        f"{QUOTA}.lendingLimit: must be less than or equal to the nominalQuota"]
    quota = _quota("cpu", "500m", lendingLimit="501m", borrowingLimit="-1")
    cohort: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "all"}, "spec": {
        "parentName": "root", "resourceGroups": [_group(["cpu"], {"h100": [quota]})]}}
    assert refusals(cohort) == [f"{QUOTA}.borrowingLimit: must be greater than or equal to 0"]
    cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    assert refusals(cohort) == []


def test_resources_beyond_the_covered_ones_are_not_read() -> None:
    """validateFlavorQuotas stops at len(coveredResources): an extra resource is the CRD's business."""
    extra = _cq([_group(["cpu"], {"h100": [_quota("cpu"), _quota("memory", -1)]})])
    assert refusals(extra) == []
    covered = _cq([_group(["cpu", "memory"], {"h100": [_quota("cpu"), _quota("memory", -1)]})])
    assert refusals(covered) == [
        "webhook:kueue: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: must be greater than or equal "
        "to 0"]


def test_a_flavor_name_repeated_in_one_group_is_refused_at_its_second_place() -> None:
    group = {"coveredResources": ["cpu"], "flavors": [{"name": "h100", "resources": [_quota("cpu")]},
                                                       {"name": "h100", "resources": [_quota("cpu")]}]}
    assert refusals(_cq([group])) == ["webhook:kueue: spec.resourceGroups[0].flavors[1].name: Duplicate value: 'h100'"]


def test_a_covered_resource_name_is_a_label_key() -> None:
    """validateResourceName: content.IsLabelKey; the refusal names the resource's place."""
    lines = refusals(_cq([_group(["cpu", "bad name"], {"h100": [_quota("cpu"), _quota("bad name")]})]))
    assert lines and all(line.startswith("webhook:kueue: spec.resourceGroups[0].coveredResources[1]: Invalid value: "
                                         "'bad name': ") for line in lines)


@pytest.mark.parametrize(("reclaim", "borrow", "refused"), [
    ("Never", "LowerPriority", True), (None, "LowerPriority", True), ("Never", "Never", False),
    ("Never", None, False), ("LowerPriority", "LowerPriority", False), ("Any", "Never", False)])
def test_borrowing_within_the_cohort_needs_reclaiming_within_it(reclaim: str | None, borrow: str | None,
                                                                refused: bool) -> None:
    """validatePreemption after the CRD defaults (reclaimWithinCohort and borrowWithinCohort.policy: Never)."""
    preemption: dict[str, Any] = {} if reclaim is None else {"reclaimWithinCohort": reclaim}
    if borrow is not None:
        preemption["borrowWithinCohort"] = {"policy": borrow}
    lines = refusals(_one(_quota("cpu"), preemption=preemption))
    assert lines == (["webhook:kueue: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"]
                     if refused else [])


@pytest.mark.parametrize(("borrow", "preempt", "refused"), [
    ("TryNextFlavor", "TryNextFlavor", False), ("TryNextFlavor", None, False), (None, "TryNextFlavor", True),
    ("MayStopSearch", "TryNextFlavor", True), ("TryNextFlavor", "MayStopSearch", True)])
def test_a_flavor_preference_needs_both_searches_to_try_the_next_flavor(borrow: str | None, preempt: str | None,
                                                                        refused: bool) -> None:
    """validateFlavorFungibility after the CRD defaults (whenCanBorrow: MayStopSearch, whenCanPreempt:
    TryNextFlavor)."""
    fungibility = {"preference": "PreemptionOverBorrowing"}
    fungibility |= {} if borrow is None else {"whenCanBorrow": borrow}
    fungibility |= {} if preempt is None else {"whenCanPreempt": preempt}
    expected = ["webhook:kueue: spec.flavorFungibility.preference: preference 'PreemptionOverBorrowing' requires both "
                "whenCanBorrow and whenCanPreempt to be TryNextFlavor"]
    assert refusals(_one(_quota("cpu"), flavorFungibility=fungibility)) == (expected if refused else [])
    # without a preference any combination stands
    assert refusals(_one(_quota("cpu"), flavorFungibility={"whenCanBorrow": "MayStopSearch",
                                                           "whenCanPreempt": "MayStopSearch"})) == []


@pytest.mark.parametrize(("weight", "refused"), [
    ("0", ""), (0, ""), ("1n", "When not 0, weight must be > 10e-9"), ("0.000000001", "When not 0, weight must be "
     "> 10e-9"), ("1001n", ""), ("0.0000000011", ""), (1, ""), ("-1", "must be greater than or equal to 0"),
    ("-1n", "must be greater than or equal to 0")])
def test_fair_sharing_weight_is_zero_or_above_one_nano(weight: Any, refused: str) -> None:
    """common.go validateFairSharing, for ClusterQueues and Cohorts alike."""
    expected = [f"webhook:kueue: spec.fairSharing: {refused}"] if refused else []
    assert refusals(_one(_quota("cpu"), fairSharing={"weight": weight})) == expected
    cohort = {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "all"},
              "spec": {"fairSharing": {"weight": weight}}}
    assert refusals(cohort) == expected


def test_covered_resources_at_most_256_across_groups() -> None:
    def groups(total: int) -> list[dict[str, Any]]:
        names = [f"example.com/r{i}" for i in range(total)]
        return [{"coveredResources": names[:128], "flavors": []}, {"coveredResources": names[128:], "flavors": []}]
    assert refusals(_cq(groups(256))) == []
    assert refusals(_cq(groups(257))) == ["webhook:kueue: spec.resourceGroups: total number of covered resources "
                                          "across all resourceGroups must be ≤ 256, got 257"]


def test_flavors_at_most_256_counted_across_groups() -> None:
    def groups(total: int) -> list[dict[str, Any]]:
        first = _group(["cpu"], {f"a{i}": [_quota("cpu")] for i in range(128)})
        return [first, _group(["memory"], {f"b{i}": [_quota("memory")] for i in range(total - 128)})]
    assert refusals(_cq(groups(256))) == []
    assert refusals(_cq(groups(257))) == ["webhook:kueue: spec.resourceGroups: total number of flavors across all "
                                          "resourceGroups must be ≤ 256, got 257"]


def test_flavor_resource_combinations_at_most_512_per_group() -> None:
    """validateFlavorResourceCombinations counts each group's flavors' resources (the second group is refused
    alone, at its index)."""
    names = [f"example.com/r{i}" for i in range(4)]
    def group(flavors: int, extra: int = 0) -> dict[str, Any]:
        return {"coveredResources": names, "flavors": [
            {"name": f"f{flavors}-{i}", "resources": [_quota(n) for n in names] + [_quota("cpu")] * (i < extra)}
            for i in range(flavors)]}
    assert refusals(_cq([{**group(128), "coveredResources": names}])) == []  # 128 flavors x 4 = 512
    lines = refusals(_cq([_group(["cpu"], {"x": [_quota("cpu")]}), group(128, extra=1)]))
    assert lines == ["webhook:kueue: spec.resourceGroups[1]: number of flavor-resource combinations in a "
                     "resourceGroup must be ≤ 512, got 513"]


def test_admission_checks_may_name_any_flavor_of_any_group() -> None:
    groups = [_group(["cpu"], {"h100": [_quota("cpu")]}), _group(["memory"], {"l40s": [_quota("memory")]})]
    strategy = {"admissionChecks": [{"name": "a", "onFlavors": ["l40s"]}, {"name": "b", "onFlavors": ["h100", "a100"]}]}
    assert refusals(_cq(groups, admissionChecksStrategy=strategy)) == [
        "webhook:kueue: spec.admissionChecksStrategy.admissionChecks[1].onFlavors[1]: Unsupported value: 'a100': "
        "supported values: ['h100', 'l40s']"]


# --- ResourceFlavor ---------------------------------------------------------------------------------------------

def _flavor(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": spec}


def test_node_labels_are_label_keys_and_values() -> None:
    """metavalidation.ValidateLabels on spec.nodeLabels."""
    assert refusals(_flavor(nodeLabels={"example.com/pool": "v" * 63})) == []
    assert refusals(_flavor(nodeLabels={"example.com/pool": "v" * 64})) == [  # the value is named, not the key
        f"webhook:kueue: spec.nodeLabels: Invalid value: '{'v' * 64}': must be no more than 63 characters"]
    lines = refusals(_flavor(nodeLabels={"bad key": "v"}))
    assert lines and all(line.startswith("webhook:kueue: spec.nodeLabels: Invalid value: 'bad key'") for line in lines)


def test_taint_keys_are_label_names_and_values_label_values() -> None:
    """validateNodeTaints: ValidateLabelName on the key, IsLabelValue on the value."""
    taint = {"key": "example.com/gpu", "value": "v" * 63, "effect": "NoSchedule"}
    assert refusals(_flavor(nodeTaints=[taint])) == []
    assert refusals(_flavor(nodeTaints=[{**taint, "value": "v" * 64}])) == [
        f"webhook:kueue: spec.nodeTaints[0].value: Invalid value: '{'v' * 64}': must be no more than 63 characters"]
    # every problem of one value in one refusal, joined by ';' (strings.Join(errs, ";"))
    assert refusals(_flavor(nodeTaints=[{**taint, "value": "-" * 64}])) == [
        f"webhook:kueue: spec.nodeTaints[0].value: Invalid value: '{'-' * 64}': must be no more than 63 characters;"
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character"]
    lines = refusals(_flavor(nodeTaints=[{**taint, "key": "bad key"}]))
    assert lines and all(line.startswith("webhook:kueue: spec.nodeTaints[0].key: ") for line in lines)


def test_taints_are_unique_by_key_and_effect_not_by_key_alone() -> None:
    taint = {"key": "example.com/gpu", "value": "a", "effect": "NoSchedule"}
    other_key = {**taint, "key": "example.com/spot"}
    assert refusals(_flavor(nodeTaints=[taint, other_key, {**taint, "effect": "PreferNoSchedule"}])) == []
    assert refusals(_flavor(nodeTaints=[taint, other_key, {**other_key, "value": "b"}])) == [
        "webhook:kueue: spec.nodeTaints[2]: taints must be unique by key and effect pair"]


def test_toleration_keys_are_label_names_when_set() -> None:
    """validateTolerations: only a non-empty key is checked (an empty key with Exists tolerates every taint)."""
    assert refusals(_flavor(tolerations=[{"operator": "Exists"}, {"key": "example.com/gpu", "operator": "Exists"}])) \
        == []
    lines = refusals(_flavor(tolerations=[{"key": "example.com/gpu"}, {"key": "bad key", "operator": "Exists"}]))
    assert lines and all(line.startswith("webhook:kueue: spec.tolerations[1].key: ") for line in lines)


def test_a_selector_expression_without_a_key_is_refused() -> None:
    """ValidateLabelSelectorRequirement: ValidateLabelName(key) on the empty key (Go's zero value)."""
    selector = {"matchExpressions": [{"operator": "Exists"}]}
    assert refusals(_one(_quota("cpu"), namespaceSelector=selector)) == [
        "webhook:kueue: spec.namespaceSelector.matchExpressions[0].key: Invalid value: '': name part must be non-empty"]


def test_a_selector_match_label_is_refused_at_its_place() -> None:
    """ValidateLabelSelector: ValidateLabels(ps.MatchLabels, fldPath.Child("matchLabels")), a bad value named."""
    assert refusals(_one(_quota("cpu"), namespaceSelector={"matchLabels": {"trainyard.io/team": "v" * 63}})) == []
    assert refusals(_one(_quota("cpu"), namespaceSelector={"matchLabels": {"trainyard.io/team": "v" * 64}})) == [
        f"webhook:kueue: spec.namespaceSelector.matchLabels: Invalid value: '{'v' * 64}': must be no more than 63 "
        "characters"]


def test_a_flavors_refusals_add_up_across_labels_taints_and_tolerations() -> None:
    """ValidateResourceFlavor appends each part's errors: a valid toleration after bad labels and taints keeps them."""
    taint = {"key": "example.com/gpu", "value": "v" * 64, "effect": "NoSchedule"}
    lines = refusals(_flavor(nodeLabels={"example.com/pool": "v" * 64}, nodeTaints=[taint],
                             tolerations=[{"key": "example.com/gpu", "operator": "Exists"}]))
    assert [line.split(": Invalid value")[0] for line in lines] == [
        "webhook:kueue: spec.nodeLabels", "webhook:kueue: spec.nodeTaints[0].value"]
