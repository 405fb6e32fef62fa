"""EKS under mocks: each pool of aws-prod becomes the managed node group its declaration implies."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from infra.spec.clouds import MACHINES
from infra.spec.clouds.aws import EFA_INTERFACES
from infra.spec.pools import GPU_RESOURCE
from infra.spec.versions import EFA_DEVICE_PLUGIN_CHART
from tests.conftest import capture_of, platform_of
from tests.test_cloud_common import of_type, pool_args, refused, variant

STACK = "aws-prod"


def test_gpu_pools_use_the_nvidia_ami_and_cpu_pools_the_standard_one() -> None:
    capture, platform = capture_of(STACK), platform_of(STACK)
    for name, pool in platform.spec.pools.items():
        args = pool_args(capture, STACK, name)
        assert args["instanceTypes"] == [pool.instance_type]
        assert args["amiType"] == ("AL2023_x86_64_NVIDIA" if pool.gpu else "AL2023_x86_64_STANDARD")


def test_the_h100_pool_gets_efa_in_its_zone_and_the_gpu_taint() -> None:
    args = pool_args(capture_of(STACK), STACK, "h100")
    assert args["enableEfaSupport"] is True
    assert args["placementGroupAvailabilityZone"] == "us-east-1a"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in args["taints"]
    assert args["labels"]["trainyard.io/pool"] == "h100"
    assert args["scalingConfig"] == {"minSize": 4, "desiredSize": 4, "maxSize": 4}


def test_instances_without_efa_get_no_efa() -> None:
    for pool in ("l40s", "spot", "cpu"):
        assert "enableEfaSupport" not in pool_args(capture_of(STACK), STACK, pool)


def test_spot_and_autoscaled_pools() -> None:
    spot = pool_args(capture_of(STACK), STACK, "spot")
    assert spot["capacityType"] == "SPOT"
    assert spot["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 8}
    assert spot["ignoreScalingChanges"] is True, "the autoscaler owns the desired size"
    assert pool_args(capture_of(STACK), STACK, "l40s")["capacityType"] == "ON_DEMAND"


def test_h100_capacity_is_four_p5_nodes_of_eight_h100() -> None:
    flavor = platform_of(STACK).flavor("h100")
    assert flavor.capacity[GPU_RESOURCE] == 4 * 8
    assert flavor.capacity["cpu"] == 4 * 192


def test_autoscaled_pool_guarantees_its_minimum_and_lends_up_to_its_maximum() -> None:
    platform = platform_of(STACK)
    l40s = platform.flavor("l40s")  # g6e.12xlarge: 4 x L40S, between 2 and 6 nodes
    assert l40s.capacity[GPU_RESOURCE] == 2 * 4 and l40s.max_capacity[GPU_RESOURCE] == 6 * 4
    guaranteed = platform.quota_sums["l40s"][GPU_RESOURCE]
    assert platform.shared_pool["l40s"][GPU_RESOURCE] == 6 * 4 - guaranteed
    spot = platform.flavor("spot")
    assert spot.capacity[GPU_RESOURCE] == 0 and spot.max_capacity[GPU_RESOURCE] == 8 * 4


@functools.cache
def _capacity_block() -> tuple[Any, Any]:
    def edit(raw: dict[str, Any]) -> None:
        raw["pools"]["h100"].update(capacityType="reserved", reservation="cr-0123456789abcdef0", fabric="none")
    return variant(STACK, edit)


def test_a_capacity_block_pool_targets_its_reservation_through_a_launch_template() -> None:
    _, capture = _capacity_block()
    args = pool_args(capture, STACK, "h100")
    assert args["capacityType"] == "CAPACITY_BLOCK"
    template = of_type(capture, "aws:ec2/launchTemplate:LaunchTemplate")["capacity-block-h100"]
    assert template.inputs["instanceMarketOptions"]["marketType"] == "capacity-block"
    target = template.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == "cr-0123456789abcdef0"
    assert "launchTemplate" in args


def test_the_vpc_has_a_private_and_a_public_subnet_per_zone() -> None:
    subnets = of_type(capture_of(STACK), "aws:ec2/subnet:Subnet")
    zones = platform_of(STACK).spec.cluster.eks.network.zones  # type: ignore[union-attr]
    assert set(subnets) == {f"{kind}-{zone}" for kind in ("private", "public") for zone in zones}
    assert all(subnets[f"private-{z}"].inputs["tags"]["kubernetes.io/role/internal-elb"] == "1" for z in zones)


def test_existing_subnets_are_used_by_id() -> None:
    private = {"us-east-1a": "subnet-0a", "us-east-1b": "subnet-0b", "us-east-1c": "subnet-0c"}

    def edit(raw: dict[str, Any]) -> None:
        raw["cluster"]["eks"]["network"] = {"existing": {"vpcId": "vpc-0abc", "privateSubnets": private}}
    _, capture = variant(STACK, edit)
    assert not of_type(capture, "aws:ec2/vpc:Vpc")
    cluster = next(iter(of_type(capture, "eks:index:Cluster").values()))
    assert cluster.inputs["vpcId"] == "vpc-0abc"
    assert sorted(cluster.inputs["privateSubnetIds"]) == sorted(private.values())


@pytest.mark.parametrize(("edit", "words"), [
    (lambda raw: raw["pools"]["h100"].pop("zone"), ("pools.h100.zone", "EFA")),
    (lambda raw: raw["pools"]["l40s"].update(fabric="efa"), ("pools.l40s", "g6e.12xlarge", "efa")),
    (lambda raw: raw["pools"]["h100"].update(capacityType="reserved"), ("pools.h100", "reservation")),
    (lambda raw: raw["pools"]["h100"].update(zone="eu-west-1a"), ("pools.h100.zone", "eu-west-1a")),
    (lambda raw: raw["pools"]["h100"].update(compact=True), ("pools.h100.compact", "GKE")),
], ids=["efa without zone", "efa on an instance without it", "reserved without reservation", "zone outside the vpc",
        "compact on eks"])
def test_eks_pool_mistakes_are_refused(edit: Any, words: tuple[str, ...], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(STACK, edit, tmp_path, capsys)
    assert all(word in line for word in words), line


def test_efa_pools_get_the_pinned_efa_device_plugin_tolerating_their_taints() -> None:
    capture, platform = capture_of(STACK), platform_of(STACK)
    [chart] = [r for r in capture.resources if r.type == "kubernetes:helm.sh/v4:Chart"
               and r.inputs["chart"] == EFA_DEVICE_PLUGIN_CHART.path]
    assert chart.parent == "trainyard:platform:Fabric::fabric"
    assert (chart.inputs["version"], chart.inputs["namespace"]) == (EFA_DEVICE_PLUGIN_CHART.version, "kube-system")
    assert chart.inputs["values"]["tolerations"] == [dict(t) for t in platform.flavor("h100").tolerations]
    for stack in ("onprem-lab", "gcp-prod", "azure-prod"):
        assert not [r for r in capture_of(stack).resources if r.type == "trainyard:platform:Fabric"], stack


def test_every_efa_machine_knows_its_interface_count() -> None:
    efa = {m.name for m in MACHINES.values() if m.fabric == "efa"}
    assert efa == set(EFA_INTERFACES), "EFA_INTERFACES covers exactly the EFA sizes"
    assert MACHINES["p5.48xlarge"].efa_interfaces == 32 and MACHINES["g6e.12xlarge"].efa_interfaces == 0
