"""Kueue in depth: priorities, flavor order and fungibility, per-team preemption, fair sharing, gang admission,
Topologies per environment, pool taints as nodeTaints, and the cohort's shared pool."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.schema import CrdIndex, check_custom
from infra.spec import SpecError, validate
from infra.spec.base import parse_quantity
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw

CAPACITY_RANK = {"reserved": 0, "on-demand": 1, "spot": 2}
EKS = {"layer1": "topology.k8s.aws/network-node-layer-1", "layer2": "topology.k8s.aws/network-node-layer-2",
       "layer3": "topology.k8s.aws/network-node-layer-3"}
GKE = {"block": "cloud.google.com/gce-topology-block", "subblock": "cloud.google.com/gce-topology-subblock"}


def _named(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


def _queue_flavors(queue: dict[str, Any]) -> list[str]:
    return [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]


def _manager_config(capture: Any) -> dict[str, Any]:
    chart = next(r for r in capture.resources if r.type.startswith("kubernetes:helm.sh/") and r.name == "kueue")
    return dict(yaml.safe_load(chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]))


def _gpu_pool(nodes: list[str], capacity_type: str, **extra: Any) -> dict[str, Any]:
    return {"gpu": "A100-SXM-80GB", "perNode": 8, "nodes": nodes, "capacityType": capacity_type, **extra}


def test_priority_classes_are_top_level_objects_the_crd_accepts(crds_dir: Path) -> None:
    classes = _named(kube_objects(capture_of("onprem-lab"), "WorkloadPriorityClass"))
    assert set(classes) == {"production", "research", "sweep"}
    assert classes["production"]["value"] > classes["research"]["value"] > classes["sweep"]["value"]
    assert all("spec" not in c and c["description"] for c in classes.values())
    index = CrdIndex(crds_dir, {"kueue": "kueue/v0.19"})
    assert all(check_custom(c, index) == [] for c in classes.values())


@pytest.mark.parametrize(("kind", "problems"), [("MultiKueueConfig", 0), ("Multi_Kueue_Config", 1)])
def test_a_go_inline_flag_pattern_is_checked_as_go_checks_it(crds_dir: Path, kind: str, problems: int) -> None:
    """AdmissionCheck's parameters.kind pattern starts `^(?i)`, which Python's re refuses where Go's takes it:
    capitals pass (the flag), an underscore does not (the pattern)."""
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "burst"},
             "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": kind, "name": "burst"}}}
    found = check_custom(check, CrdIndex(crds_dir, {"kueue": "kueue/v0.19"}))
    assert len(found) == problems and all(p.startswith("spec.parameters.kind: ") for p in found), found


def test_priorities_are_configurable_and_must_differ() -> None:
    raw = raw_platform("onprem-lab")
    raw["queueing"]["priorities"] = {"urgent": 2000, "batch": {"value": 10, "description": "overnight"}}
    classes = _named(kube_objects(run_raw("onprem-lab", raw), "WorkloadPriorityClass"))
    assert {n: c["value"] for n, c in classes.items()} == {"urgent": 2000, "batch": 10}
    raw["queueing"]["priorities"] = {"a": 5, "b": 5}
    with pytest.raises(SpecError, match="share a value"):
        validate(raw, "onprem-lab")


def test_team_queues_take_reserved_then_on_demand_then_spot() -> None:
    """A stack with all three capacity types, declared out of order: every queue and the cohort list the pools
    reserved first, then on-demand, then spot."""
    raw = raw_platform("onprem-lab")
    raw["pools"] = {"spot": _gpu_pool(["gpu-s01", "gpu-s02"], "spot"),
                    "ondemand": _gpu_pool(["gpu-o01", "gpu-o02"], "on-demand"),
                    **raw["pools"]}
    for team in raw["teams"].values():
        team["quota"] = {"spot": 0, "ondemand": 4, **team["quota"]}
    types = {name: pool.get("capacityType", "on-demand") for name, pool in raw["pools"].items()}
    assert set(types.values()) == set(CAPACITY_RANK)
    capture = run_raw("onprem-lab", raw)
    queues = [*kube_objects(capture, "ClusterQueue"), *kube_objects(capture, "Cohort")]
    assert len(queues) == len(raw["teams"]) + 1
    for queue in queues:
        ranks = [CAPACITY_RANK[types[name]] for name in _queue_flavors(queue)]
        assert ranks == sorted(ranks) and set(ranks) == {0, 1, 2}, queue["metadata"]["name"]
    vision = _named(kube_objects(capture, "ClusterQueue"))["vision"]
    assert _queue_flavors(vision) == ["h100", "l40s", "ondemand", "cpu", "spot"]  # declaration order within a type
    assert vision["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_orders_its_queues_by_capacity_type(stack: str) -> None:
    pools = platform_of(stack).spec.pools
    capture = capture_of(stack)
    for queue in [*kube_objects(capture, "ClusterQueue"), *kube_objects(capture, "Cohort")]:
        ranks = [CAPACITY_RANK[pools[name].capacity_type] for name in _queue_flavors(queue)]
        assert ranks == sorted(ranks), (stack, queue["metadata"]["name"])


def test_preemption_and_fair_sharing_weight_per_team() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["preemption"] = {"withinClusterQueue": "LowerOrNewerEqualPriority"}
    raw["teams"]["speech"]["weight"] = 3
    queues = _named(kube_objects(run_raw("onprem-lab", raw), "ClusterQueue"))
    assert queues["nlp"]["spec"]["preemption"] == {"reclaimWithinCohort": "Any",
                                                   "withinClusterQueue": "LowerOrNewerEqualPriority"}
    assert queues["vision"]["spec"]["preemption"] == {"reclaimWithinCohort": "Any",
                                                      "withinClusterQueue": "LowerPriority"}
    weights = {name: Decimal(q["spec"]["fairSharing"]["weight"]) for name, q in queues.items()}
    assert weights == {name: Decimal(str(team.get("weight", 1))) for name, team in raw["teams"].items()}


def test_borrow_within_cohort_is_classic_preemption_only() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["preemption"] = {"borrowWithinCohort": "LowerPriority", "borrowMaxPriority": 100}
    with pytest.raises(SpecError) as error:
        validate(raw, "onprem-lab")
    assert error.value.path.endswith("teams.nlp.preemption") and "fair sharing" in error.value.message
    raw["queueing"]["fairSharing"] = False
    capture = run_raw("onprem-lab", raw)
    assert _named(kube_objects(capture, "ClusterQueue"))["nlp"]["spec"]["preemption"]["borrowWithinCohort"] == \
        {"policy": "LowerPriority", "maxPriorityThreshold": 100}
    assert "fairSharing" not in _manager_config(capture)


def test_gang_admission_follows_the_stack() -> None:
    raw = raw_platform("onprem-lab")
    ready = raw["queueing"]["waitForPodsReady"]
    config = _manager_config(capture_of("onprem-lab"))["waitForPodsReady"]
    assert (config["timeout"], config["recoveryTimeout"]) == (ready["timeout"], ready["recoveryTimeout"])
    assert config["requeuingStrategy"]["backoffLimitCount"] == ready["backoffLimitCount"]
    assert config["blockAdmission"] is False


def test_topologies_per_environment_are_shared_by_pools_with_the_same_levels() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["gke-a"] = _gpu_pool(["gpu-g01"], "reserved", topology=GKE)
    raw["pools"]["gke-b"] = _gpu_pool(["gpu-g02"], "reserved", topology=GKE)
    raw["pools"]["eks"] = _gpu_pool(["gpu-e01"], "on-demand", topology=EKS)
    capture = run_raw("onprem-lab", raw)
    topologies = {t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]]
                  for t in kube_objects(capture, "Topology")}
    flavors = {f["metadata"]["name"]: f["spec"] for f in kube_objects(capture, "ResourceFlavor")}
    assert len(topologies) == 3  # on-prem racks, GKE blocks, EKS network layers
    for pool, levels in (("h100", raw["pools"]["h100"]["topology"]), ("gke-a", GKE), ("gke-b", GKE), ("eks", EKS)):
        assert topologies[flavors[pool]["topologyName"]] == [*levels.values(), "kubernetes.io/hostname"]
    assert flavors["gke-a"]["topologyName"] == flavors["gke-b"]["topologyName"]
    assert "topologyName" not in flavors["l40s"]


def test_pools_that_name_levels_alike_must_label_them_alike() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["other"] = _gpu_pool(["gpu-x01"], "reserved", topology={"rack": "example.com/rack"})
    with pytest.raises(SpecError, match="same level names as pool 'h100'"):
        validate(raw, "onprem-lab")


def test_pool_taints_gate_admission_as_node_taints() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["l40s"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present"},
                                      {"key": "example.com/soft", "effect": "PreferNoSchedule"}]
    flavors = _named(kube_objects(run_raw("onprem-lab", raw), "ResourceFlavor"))
    for name, flavor in flavors.items():
        assert "tolerations" not in flavor["spec"]
        declared = raw["pools"][name].get("taints")
        if declared is None and "gpu" in raw["pools"][name]:
            declared = [{"key": "nvidia.com/gpu", "value": "present"}]
        admitting = [t for t in declared or [] if t.get("effect", "NoSchedule") != "PreferNoSchedule"]
        assert [(t["key"], t["value"]) for t in flavor["spec"].get("nodeTaints", [])] == \
            [(t["key"], t["value"]) for t in admitting], name


def test_teams_list_their_own_pools_unless_any_pool_may_be_borrowed() -> None:
    raw = raw_platform("onprem-lab")
    default = _named(kube_objects(capture_of("onprem-lab"), "ClusterQueue"))
    for name, team in raw["teams"].items():
        assert set(_queue_flavors(default[name])) == set(team["quota"])
    raw["queueing"]["borrowAnyPool"] = True
    queues = _named(kube_objects(run_raw("onprem-lab", raw), "ClusterQueue"))
    nlp = {f["name"]: {r["name"]: r for r in f["resources"]}
           for f in queues["nlp"]["spec"]["resourceGroups"][0]["flavors"]}
    assert all(set(_queue_flavors(q)) == set(raw["pools"]) for q in queues.values())
    assert "cpu" not in raw["teams"]["nlp"]["quota"]
    assert {parse_quantity(r["nominalQuota"]) for r in nlp["cpu"].values()} == {0}
    assert nlp["h100"]["nvidia.com/gpu"]["borrowingLimit"] == str(raw["teams"]["nlp"]["borrowingLimit"])


def test_the_cohort_holds_what_no_team_is_guaranteed() -> None:
    raw = raw_platform("onprem-lab")
    cohort = kube_objects(capture_of("onprem-lab"), "Cohort")[0]
    shared = {f["name"]: {r["name"]: parse_quantity(r["nominalQuota"]) for r in f["resources"]}
              for f in cohort["spec"]["resourceGroups"][0]["flavors"]}
    for name, pool in raw["pools"].items():
        if "gpu" not in pool:
            continue
        guaranteed = sum(t["quota"][name] for t in raw["teams"].values() if name in t["quota"])
        assert shared[name]["nvidia.com/gpu"] == len(pool["nodes"]) * pool["perNode"] - guaranteed


def test_fabric_devices_stay_out_of_quota() -> None:
    raw = raw_platform("onprem-lab")
    config = _manager_config(capture_of("onprem-lab"))
    assert config["resources"] == {"excludeResourcePrefixes": ["rdma/rdma_shared_device_a"]}  # h100's RDMA device
    del raw["pools"]["h100"]["fabricDevice"]
    assert "resources" not in _manager_config(run_raw("onprem-lab", raw))
    cloud = raw_platform("aws-prod")  # EFA is an AWS fabric: its p5 pool brings the EFA devices
    cloud.setdefault("queueing", {})["excludeResourcePrefixes"] = ["nvidia.com/hostdev"]
    config = _manager_config(run_raw("aws-prod", cloud))
    assert config["resources"] == {"excludeResourcePrefixes": ["nvidia.com/hostdev", "vpc.amazonaws.com/efa"]}
