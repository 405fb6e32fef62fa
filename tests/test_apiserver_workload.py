"""Kueue 0.19's Workload webhook (pkg/webhooks/workload_webhook.go at v0.19.2), one test per rule: the edge is
admitted, one past it refused; and a Workload submitted through `trainyard admit` gets the webhook's answer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.admit import answer
from infra.apiserver.schema import CrdIndex
from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks import review, rules_for
from infra.spec.versions import Versions
from tests.conftest import CRDS, capture_of, platform_of
from tests.kueue_cluster import MANAGED

RULES, _ = rules_for(Versions(kueue="0.19.2", trainer="2.2.1", jobset="0.12.0"))
ELASTIC = "kueue.x-k8s.io/elastic-job"
GATED = "kueue.x-k8s.io/admission-gated-by"


def workload(*pod_sets: dict[str, Any], **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "vision", "annotations": annotations},
            "spec": {"queueName": "vision", "podSets": list(pod_sets) or [pod_set("main")]}}


def pod_set(name: str, count: int = 2, **fields: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox:1.37", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}
    return {"name": name, "count": count, "template": {"spec": {"containers": [container]}}, **fields}


def refusals(obj: dict[str, Any]) -> list[str]:
    return [r.line() for r in review(obj, ClusterState([*MANAGED, obj]), RULES)]


def test_a_plain_workload_is_admitted() -> None:
    assert refusals(workload()) == []


def test_at_most_one_pod_set_uses_min_count() -> None:
    assert refusals(workload(pod_set("a", minCount=1), pod_set("b"))) == []
    assert refusals(workload(pod_set("a", minCount=1), pod_set("b", minCount=1))) == [
        "webhook:kueue: spec.podSets: Invalid value: 2: at most one podSet can use minCount"]


def test_partial_admission_and_elastic_jobs_exclude_each_other() -> None:
    assert refusals(workload(pod_set("a"), **{ELASTIC: "true"})) == []
    assert refusals(workload(pod_set("a", minCount=1), **{ELASTIC: "false"})) == []
    assert refusals(workload(pod_set("a", minCount=1), **{ELASTIC: "true"})) == [
        "webhook:kueue: spec.podSets: Invalid value: 1: partial admission and elastic job cannot be used together"]


@pytest.mark.parametrize("where", ["requests", "limits"])
def test_the_pods_resource_is_reserved_and_quantities_are_not_negative(where: str) -> None:
    obj = workload()
    resources = obj["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
    resources[where] = {"cpu": "0", "memory": "0Gi"}
    assert refusals(obj) == []
    resources[where] = {"cpu": "-1m", "pods": "1"}
    path = f"spec.podSets[0].template.spec.containers[0].resources.{where}"
    assert refusals(obj) == [f"webhook:kueue: {path}[cpu]: Invalid value: '-1m': must be greater than or equal to 0",
                             f"webhook:kueue: {path}[pods]: Invalid value: \"pods\": the key is reserved for internal "
                             "kueue use"]


def test_init_containers_and_pod_level_resources_are_checked_too() -> None:
    obj = workload()
    spec = obj["spec"]["podSets"][0]["template"]["spec"]
    spec["initContainers"] = [{"name": "i", "image": "busybox:1.37", "resources": {"limits": {"memory": "-1"}}}]
    spec["resources"] = {"requests": {"pods": "2"}}
    assert [line.split(": Invalid")[0] for line in refusals(obj)] == [
        "webhook:kueue: spec.podSets[0].template.spec.initContainers[0].resources.limits[memory]",
        "webhook:kueue: spec.podSets[0].template.spec.resources.requests[pods]"]


def test_pod_set_labels_and_annotations_are_label_keys_and_values() -> None:
    obj = workload()
    obj["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"app": "a" * 63},
                                                         "annotations": {"Example.COM/Note": "any value: at all"}}
    assert refusals(obj) == []
    obj["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"app": "a" * 64},
                                                         "annotations": {"bad key!": "x"}}
    assert [line.split(": Invalid")[0] for line in refusals(obj)] == [
        "webhook:kueue: spec.podSets[0].template.metadata.labels",
        "webhook:kueue: spec.podSets[0].template.metadata.annotations"]


def test_pod_set_annotations_total_at_most_256_kib() -> None:
    obj = workload()
    meta = obj["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": {"a": "x" * (256 * 1024 - 1)}}
    assert refusals(obj) == []
    meta["annotations"]["a"] += "x"
    assert refusals(obj) == ["webhook:kueue: spec.podSets[0].template.metadata.annotations: Too long: may not be "
                             "more than 262144 bytes"]


def test_slice_topology_and_slice_size_come_together_and_sizes_are_positive() -> None:
    slice_topology = "cloud.google.com/gke-nodepool"
    ok = pod_set("a", topologyRequest={"podSetSliceRequiredTopology": slice_topology, "podSetSliceSize": 1,
                                       "podsetSliceRequiredTopologyConstraints": [{"topology": slice_topology,
                                                                                   "size": 1}]})
    assert refusals(workload(ok)) == []
    missing = pod_set("a", topologyRequest={"podSetSliceRequiredTopology": slice_topology})
    zero = pod_set("b", topologyRequest={"podSetSliceRequiredTopology": slice_topology, "podSetSliceSize": 0,
                                         "podsetSliceRequiredTopologyConstraints": [{"topology": "x", "size": 0}]})
    alone = pod_set("c", topologyRequest={"podSetSliceSize": 2})
    assert refusals(workload(missing, zero, alone)) == [
        "webhook:kueue: spec.podSets[0].topologyRequest.podSetSliceSize: Required value: must be set when "
        "podSetSliceRequiredTopology is specified",
        "webhook:kueue: spec.podSets[1].topologyRequest.podSetSliceSize: Invalid value: 0: must be greater than 0",
        "webhook:kueue: spec.podSets[1].topologyRequest.podsetSliceRequiredTopologyConstraints[0].size: Invalid "
        "value: 0: must be greater than 0",
        "webhook:kueue: spec.podSets[2].topologyRequest.podSetSliceSize: Forbidden: may not be set when "
        "podSetSliceRequiredTopology is not specified"]


def test_admission_gates_are_distinct_domain_prefixed_paths_of_63_chars_at_most() -> None:
    gate = "example.com/" + "g" * 51  # 63 characters
    assert refusals(workload(**{GATED: f"{gate}, example.com/other"})) == []
    assert refusals(workload(**{GATED: ""})) == []
    where = f"webhook:kueue: metadata.annotations[{GATED}]"
    assert refusals(workload(**{GATED: f"{gate}g"})) == [f"{where}: Too long: may not be more than 63 bytes"]
    assert refusals(workload(**{GATED: "a.io/x,,a.io/x"})) == [
        f'{where}: Invalid value: "a.io/x,,a.io/x": cannot contain empty gate names',
        f'{where}: Invalid value: "a.io/x,,a.io/x": duplicate gate name: a.io/x']
    assert refusals(workload(**{GATED: "nodomain"})) == [
        f'{where}: Invalid value: "nodomain": must be a domain-prefixed path (such as "acme.io/foo")']


def test_admit_gives_a_submitted_workload_the_webhooks_answer() -> None:
    platform = platform_of("onprem-lab")
    crds = CrdIndex(CRDS, platform.spec.versions.crd_dirs())
    good = workload()
    bad = copy.deepcopy(good)
    bad["metadata"]["name"] = "wl-bad"
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    # status is Kueue's to write: dropped on create, so its CEL rule (clusterName excludes nominatedClusterNames)
    # does not refuse the Workload
    good["status"] = {"clusterName": "a", "nominatedClusterNames": ["b"]}
    # Workloads are Kueue's to create (engineers may only read them): submitted as the platform
    lines, refused = answer(platform, capture_of("onprem-lab"), [good, bad], crds, "platform")
    assert refused == 1
    assert "admitted Workload/vision/wl" in lines
    assert ("refused Workload/vision/wl-bad: webhook:kueue: spec.podSets[0].template.spec.containers[0].resources."
            "requests[pods]: Invalid value: \"pods\": the key is reserved for internal kueue use") in lines
