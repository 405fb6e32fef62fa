"""The machine and GPU catalogs, and the spec rules that tie pools to them and to the cluster kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.spec.catalog import GPU_MODELS
from infra.spec.clouds import MACHINES
from infra.spec.cluster import ClusterSpec
from tests.test_cloud_common import refused

# Figures as the providers publish them (instance type -> GPUs per node, GPU model).
PUBLISHED = {
    "p5.48xlarge": (8, "H100-SXM-80GB"), "p4d.24xlarge": (8, "A100-SXM-40GB"), "g6e.12xlarge": (4, "L40S"),
    "g6e.48xlarge": (8, "L40S"), "g5.12xlarge": (4, "A10G"), "a3-highgpu-8g": (8, "H100-SXM-80GB"),
    "g2-standard-24": (2, "L4"), "g2-standard-48": (4, "L4"), "Standard_ND96isr_H100_v5": (8, "H100-SXM-80GB"),
    "Standard_ND96asr_v4": (8, "A100-SXM-40GB"), "Standard_NC24ads_A100_v4": (1, "A100-PCIE-80GB"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_gpu_figures(name: str) -> None:
    machine = MACHINES[name]
    assert (machine.gpus, machine.gpu) == PUBLISHED[name]


def test_every_gpu_machine_names_a_known_model_and_gke_machines_their_accelerator() -> None:
    for machine in MACHINES.values():
        assert (machine.gpu is None) == (machine.gpus == 0), machine.name
        if machine.gpu is not None:
            assert machine.gpu in GPU_MODELS, machine.name
            assert machine.cloud != "gcp" or (machine.accelerator or "").startswith("nvidia-"), machine.name


def test_mig_instance_counts_follow_the_slices() -> None:
    for model in GPU_MODELS.values():
        for profile, count in model.mig_profiles.items():
            slices = int(profile.split("g.")[0])
            assert count * slices <= 7, (model.name, profile)


def test_gpu_stack_per_cluster_kind() -> None:
    def stack(cluster: dict[str, Any]) -> tuple[bool, bool, bool]:
        facts = ClusterSpec.model_validate(cluster).gpu_stack()
        return facts.operator, facts.driver, facts.cloud_sharing
    eks = {"region": "us-east-1", "network": {"create": {"zones": ["us-east-1a", "us-east-1b"]}}}
    gke = {"project": "my-project", "region": "us-central1", "zones": ["us-central1-a"]}
    aks = {"location": "eastus", "resourceGroup": "rg"}
    assert stack({"existing": {"context": "lab"}}) == (True, True, False)
    assert stack({"existing": {"context": "lab", "gpuDriver": "preinstalled"}}) == (True, False, False)
    assert stack({"existing": {"context": "kind", "simulatedGpus": True}})[0] is False
    assert stack({"eks": eks}) == (True, False, False)
    assert stack({"gke": gke}) == (False, False, True)
    assert stack({"gke": {**gke, "gpuDriver": "operator"}}) == (True, True, False)
    assert stack({"aks": aks}) == (True, False, False)
    assert stack({"aks": {**aks, "gpuDriver": "operator"}}) == (True, True, False)


def _pool(name: str, **fields: Any) -> Any:
    return lambda raw: raw["pools"][name].update(fields)


@pytest.mark.parametrize(("stack", "edit", "words"), [
    ("onprem-lab", _pool("h100", mig={"profile": "1g.5gb"}), ("pools.h100.mig", "H100-SXM-80GB", "1g.10gb")),
    ("onprem-lab", _pool("l40s", mig={"profile": "1g.10gb"}), ("pools.l40s.mig", "no MIG")),
    ("onprem-lab", _pool("h100", instanceType="p5.48xlarge"), ("pools.h100",)),
    ("onprem-lab", _pool("cpu", autoscale={"min": 1, "max": 2}), ("pools.cpu", "fixed size")),
    ("onprem-lab", _pool("l40s", sharing={"timeSlicing": 2, "mps": 2}), ("pools.l40s.sharing", "exclusive")),
    ("onprem-lab", _pool("h100", mig={"profile": "1g.10gb"}, sharing={"timeSlicing": 2}), ("pools.h100", "MIG")),
    ("aws-prod", _pool("l40s", autoscale={"min": 5, "max": 2}), ("pools.l40s.autoscale", "min 5")),
    ("aws-prod", _pool("cpu", reservation="cr-1"), ("pools.cpu", "reserved")),
    ("gcp-prod", lambda raw: raw["cluster"]["gke"].update(zones=["europe-west4-a"]), ("cluster.gke", "zones")),
    ("azure-prod", lambda raw: raw["cluster"]["aks"].update(network={"create": {"cidr": "172.16.0.0/12"}}),
     ("cluster.aks.network", "service range")),
], ids=["mig profile the gpu lacks", "mig on a gpu without mig", "instance type on an existing cluster",
        "autoscale on an on-prem pool", "time-slicing and mps", "mig and sharing", "autoscale min above max",
        "reservation without reserved", "gke zone outside region", "aks vnet over the service range"])
def test_pool_and_cluster_mistakes_are_one_line(stack: str, edit: Any, words: tuple[str, ...], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(stack, edit, tmp_path, capsys)
    assert all(word in line for word in words), line
