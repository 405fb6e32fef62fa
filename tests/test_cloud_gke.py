"""GKE under mocks: gcp-prod's pools become node pools with their accelerators, driver mode, GPU sharing,
placement, Spot and reservations; a time-shared pool counts replicas in its flavor and quotas."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.spec import validate
from infra.spec.pools import GPU_RESOURCE
from infra.spec.queues.capacity import capacity_findings
from tests.conftest import capture_of, kube_objects, platform_of, raw_platform
from tests.test_cloud_common import configmap, of_type, pool_args, refused, variant

STACK = "gcp-prod"


def _accelerator(args: dict[str, Any]) -> dict[str, Any]:
    (accelerator,) = args["nodeConfig"]["guestAccelerators"]
    return dict(accelerator)


def test_a3_pool_attaches_eight_h100_with_the_managed_driver_compactly_on_its_reservation() -> None:
    args = pool_args(capture_of(STACK), STACK, "h100")
    assert args["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    accelerator = _accelerator(args)
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-h100-80gb", 8)
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert args["placementPolicy"] == {"type": "COMPACT"}
    assert args["nodeLocations"] == ["us-central1-a"] and args["nodeCount"] == 4
    affinity = args["nodeConfig"]["reservationAffinity"]
    assert affinity["consumeReservationType"] == "SPECIFIC_RESERVATION"
    assert affinity["values"] == ["a3-h100-reservation"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in args["nodeConfig"]["taints"]


def test_l4_spot_pool_time_shares_each_gpu_and_autoscales_across_zones() -> None:
    args = pool_args(capture_of(STACK), STACK, "l4")
    assert args["nodeConfig"]["spot"] is True
    accelerator = _accelerator(args)
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-l4", 4)
    assert accelerator["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4}
    # a Spot pool takes nodes in whichever zone has capacity
    assert args["autoscaling"] == {"totalMinNodeCount": 1, "totalMaxNodeCount": 6, "locationPolicy": "ANY"}


def test_time_shared_capacity_and_quotas_count_replicas() -> None:
    platform = platform_of(STACK)
    l4 = platform.flavor("l4")  # g2-standard-48: 4 x L4, each shared by 4; 1 to 6 nodes
    assert l4.capacity[GPU_RESOURCE] == 1 * 4 * 4 and l4.max_capacity[GPU_RESOURCE] == 6 * 4 * 4
    vision = next(team for team in platform.teams if team.name == "vision")
    declared = platform.spec.teams["vision"].pool_quota("l4").gpus
    assert vision.quota["l4"][GPU_RESOURCE] == declared, "a quota on a shared pool is in replicas, as declared"
    queue = next(q for q in kube_objects(capture_of(STACK), "ClusterQueue") if q["metadata"]["name"] == "vision")
    l4_entry = next(f for g in queue["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "l4")
    assert {"name": GPU_RESOURCE, "nominalQuota": str(declared)}.items() <= next(
        r for r in l4_entry["resources"] if r["name"] == GPU_RESOURCE).items()


def test_a_time_shared_quota_above_the_replicas_is_a_capacity_finding() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["teams"]["vision"]["quota"]["l4"] = 12  # 12 + nlp 8 = 20 replicas > 16 on the minimum node
    raw = raw_platform(STACK)
    edit(raw)
    findings = [f for f in capacity_findings(validate(raw, STACK))
                if f.subject == "flavor l4" and f.severity == "error" and f" {GPU_RESOURCE} " in f.message]
    assert len(findings) == 1
    assert "guarantee 20 " in findings[0].message and "offers 16 " in findings[0].message
    assert "minimum node count" in findings[0].message


def test_gke_runs_its_own_gpu_stack_with_dcgm_metrics_and_no_operator() -> None:
    capture = capture_of(STACK)
    assert not of_type(capture, "trainyard:platform:GpuOperator")
    cluster = next(iter(of_type(capture, "gcp:container/cluster:Cluster").values()))
    assert "DCGM" in cluster.inputs["monitoringConfig"]["enableComponents"]
    assert cluster.inputs["removeDefaultNodePool"] is True
    assert cluster.inputs["minMasterVersion"] == platform_of(STACK).spec.versions.kubernetes


@functools.cache
def _operator_mode() -> tuple[Any, Any]:
    return variant(STACK, lambda raw: raw["cluster"]["gke"].update(gpuDriver="operator"))


def test_operator_mode_disables_gke_driver_and_device_plugin_and_shares_through_the_operator() -> None:
    _, capture = _operator_mode()
    args = pool_args(capture, STACK, "l4")
    accelerator = _accelerator(args)
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}
    assert "gpuSharingConfig" not in accelerator
    labels = args["nodeConfig"]["labels"]
    assert labels["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert labels["nvidia.com/device-plugin.config"] == "l4"
    assert args["nodeConfig"]["imageType"] == "UBUNTU_CONTAINERD"
    chart = of_type(capture, "kubernetes:helm.sh/v4:Chart")["gpu-operator"]
    assert chart.inputs["values"]["driver"]["enabled"] is True
    configs = configmap(capture, "trainyard-device-plugin-configs")
    sharing = yaml.safe_load(configs["data"]["l4"])["sharing"]["timeSlicing"]
    assert sharing["resources"] == [{"name": GPU_RESOURCE, "replicas": 4}]
    quota = next(q for q in kube_objects(capture, "ResourceQuota") if q["metadata"]["namespace"] == "gpu-operator")
    assert "system-node-critical" in quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"]


def test_gke_mig_partitions_are_served_as_gpus() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["pools"]["l4"] = {"instanceType": "a2-highgpu-1g", "count": 3, "mig": {"profile": "1g.5gb"}}
    platform, capture = variant(STACK, edit)
    flavor = platform.flavor("l4")
    assert flavor.gpu_resources == (GPU_RESOURCE,) and flavor.capacity[GPU_RESOURCE] == 3 * 1 * 7
    assert _accelerator(pool_args(capture, STACK, "l4"))["gpuPartitionSize"] == "1g.5gb"


@pytest.mark.parametrize(("edit", "words"), [
    (lambda raw: raw["pools"]["cpu"].update(count=4), ("pools.cpu.count", "multiple of 3")),
    (lambda raw: raw["pools"]["h100"].pop("zone"), ("pools.h100.zone", "compact")),
    (lambda raw: raw["pools"]["h100"].update(zone="europe-west4-a"), ("pools.h100.zone", "us-central1")),
    (lambda raw: raw["pools"]["h100"].update(fabric="efa"), ("pools.h100", "a3-highgpu-8g", "efa")),
], ids=["fixed count not spread evenly", "compact without zone", "zone outside the region", "efa on gcp"])
def test_gke_pool_mistakes_are_refused(edit: Any, words: tuple[str, ...], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(STACK, edit, tmp_path, capsys)
    assert all(word in line for word in words), line
