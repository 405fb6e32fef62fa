"""AKS under mocks: azure-prod's pools become agent pools with their VM sizes, taints, labels and MIG
profile; a MIG pool's flavor, quotas and capacity check all speak the MIG resource name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.spec import validate
from infra.spec.queues.capacity import capacity_findings
from tests.conftest import capture_of, kube_objects, platform_of, raw_platform
from tests.test_cloud_common import configmap, of_type, pool_args, refused, variant

STACK = "azure-prod"
MIG = "nvidia.com/mig-1g.10gb"


def test_nd_h100_pool_is_an_agent_pool_of_that_size_in_its_zone_with_the_gpu_taint() -> None:
    args = pool_args(capture_of(STACK), STACK, "h100")
    assert args["vmSize"] == "Standard_ND96isr_H100_v5"
    assert args["count"] == 4 and args["availabilityZones"] == ["1"]
    assert args["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert args["nodeLabels"]["trainyard.io/pool"] == "h100"
    assert args["mode"] == "User" and args["gpuProfile"] == {"driver": "Install"}
    assert "gpuInstanceProfile" not in args


def test_the_a100_pool_is_partitioned_by_aks_and_labelled_for_the_mig_manager() -> None:
    args = pool_args(capture_of(STACK), STACK, "a100-mig")
    assert args["vmSize"] == "Standard_NC24ads_A100_v4" and args["agentPoolName"] == "a100mig"
    assert args["gpuInstanceProfile"] == "MIG1g"
    assert args["nodeLabels"]["nvidia.com/mig.config"] == "a100-mig"
    configs = configmap(capture_of(STACK), "trainyard-mig-configs")
    layout = yaml.safe_load(configs["data"]["config.yaml"])["mig-configs"]["a100-mig"]
    assert layout == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]


def test_mig_flavor_quota_and_queue_use_the_mig_resource_name() -> None:
    platform = platform_of(STACK)
    flavor = platform.flavor("a100-mig")  # 2 nodes x 1 A100 80GB x 7 instances of 1g.10gb
    assert flavor.gpu_resources == (MIG,) and flavor.capacity[MIG] == 2 * 1 * 7
    assert "nvidia.com/gpu" not in flavor.capacity
    for team, spec in platform.spec.teams.items():
        facts = next(t for t in platform.teams if t.name == team)
        assert facts.quota["a100-mig"][MIG] == spec.pool_quota("a100-mig").gpus
    assert MIG in platform.covered_resources
    queue = next(q for q in kube_objects(capture_of(STACK), "ClusterQueue") if q["metadata"]["name"] == "vision")
    assert MIG in queue["spec"]["resourceGroups"][0]["coveredResources"]


def test_a_mig_quota_above_the_instances_is_a_capacity_finding_naming_flavor_and_resource() -> None:
    raw = raw_platform(STACK)
    raw["teams"]["vision"]["quota"]["a100-mig"] = 10  # 10 + nlp 7 = 17 > 14 instances
    findings = [f for f in capacity_findings(validate(raw, STACK)) if f.severity == "error" and MIG in f.message]
    assert len(findings) == 1 and findings[0].subject == "flavor a100-mig"
    assert "guarantee 17 " in findings[0].message and "offers 14" in findings[0].message


def test_spot_pools_are_evicted_by_deletion_and_their_flavor_tolerates_the_aks_spot_taint() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["pools"]["spot"] = {"instanceType": "Standard_NC24ads_A100_v4", "capacityType": "spot",
                                "autoscale": {"min": 0, "max": 4}}
    platform, capture = variant(STACK, edit)
    args = pool_args(capture, STACK, "spot")
    assert (args["scaleSetPriority"], args["scaleSetEvictionPolicy"], args["spotMaxPrice"]) == ("Spot", "Delete", -1)
    assert (args["enableAutoScaling"], args["minCount"], args["maxCount"]) == (True, 0, 4)
    assert args["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"], "AKS adds its spot taint itself"
    spot_toleration = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                       "effect": "NoSchedule"}
    assert spot_toleration in [dict(t) for t in platform.flavor("spot").tolerations]
    operator = of_type(capture, "kubernetes:helm.sh/v4:Chart")["gpu-operator"]
    assert spot_toleration in operator.inputs["values"]["daemonsets"]["tolerations"]


def test_operator_driver_mode_skips_the_aks_driver() -> None:
    _, capture = variant(STACK, lambda raw: raw["cluster"]["aks"].update(gpuDriver="operator"))
    assert pool_args(capture, STACK, "h100")["gpuProfile"] == {"driver": "None"}
    values = of_type(capture, "kubernetes:helm.sh/v4:Chart")["gpu-operator"].inputs["values"]
    assert values["driver"]["enabled"] is True and values["toolkit"]["enabled"] is True


def test_the_cluster_keeps_its_system_pool_and_leaves_the_others_to_agent_pools() -> None:
    capture = capture_of(STACK)
    cluster = next(iter(of_type(capture, "azure-native:containerservice:ManagedCluster").values()))
    (system,) = cluster.inputs["agentPoolProfiles"]
    assert system["mode"] == "System" and system["name"] == "system"
    assert cluster.inputs["resourceGroupName"] == "trainyard-prod"
    assert cluster.inputs["networkProfile"]["networkPluginMode"] == "overlay"
    assert of_type(capture, "azure-native:resources:ResourceGroup")["group"].protect


@pytest.mark.parametrize(("edit", "words"), [
    (lambda raw: raw["pools"]["a100-mig"].update(mig={"profile": "1g.5gb"}),
     ("pools.a100-mig.mig", "1g.5gb", "A100-PCIE-80GB")),
    (lambda raw: raw["pools"]["a100-mig"].update(mig={"profile": "1g.20gb"}),
     ("pools.a100-mig.mig.profile", "AKS", "1g.10gb, 2g.20gb")),
    (lambda raw: raw["pools"]["h100"].update(zone="4"), ("pools.h100.zone",)),
    (lambda raw: raw["pools"].update({"a-100mig": raw["pools"]["a100-mig"]}), ("a100mig", "rename")),
], ids=["profile the GPU lacks", "profile AKS cannot set", "no such zone", "agent pool names collide"])
def test_aks_pool_mistakes_are_refused(edit: Any, words: tuple[str, ...], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(STACK, edit, tmp_path, capsys)
    assert all(word in line for word in words), line
