"""Declared fabrics reach the pods, or the stack declares TCP: an InfiniBand pool without RDMA devices and a GKE A3
pool that does not declare `fabric: none` give one error each naming the field; the shipped stacks declare it; a
fabric an instance type lacks is refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.checks.context import Context
from infra.checks.fabric import check_fabric_reaches_pods
from infra.commands import main
from infra.offline.engine import Capture
from infra.spec import Finding, validate
from tests.conftest import STACKS, raw_platform, write_stack


def _findings(stack: str, raw: dict) -> list[Finding]:  # type: ignore[type-arg]
    return check_fabric_reaches_pods(Context(validate(raw, stack), Capture(stack, "trainyard", (), {}), None))


def test_an_infiniband_pool_without_rdma_devices_is_refused_naming_fabric_device() -> None:
    raw = raw_platform("azure-prod")
    assert _findings("azure-prod", raw) == []  # shipped: fabric none, TCP declared
    raw["pools"]["h100"]["fabric"] = "infiniband"
    found = _findings("azure-prod", raw)
    assert [(f.subject, f.severity) for f in found] == [("pools.h100.fabricDevice", "error")]
    assert "fabric infiniband" in found[0].message and "fabric: none" in found[0].message
    raw["pools"]["h100"]["fabricDevice"] = {"resource": "rdma/rdma_shared_device_a"}
    assert _findings("azure-prod", raw) == []


def test_the_same_pool_with_its_rdma_device_passes() -> None:
    raw = raw_platform("onprem-lab")
    assert _findings("onprem-lab", raw) == []
    del raw["pools"]["h100"]["fabricDevice"]
    assert [f.subject for f in _findings("onprem-lab", raw)] == ["pools.h100.fabricDevice"]


def test_a_gke_a3_pool_is_refused_until_it_declares_tcp() -> None:
    raw = raw_platform("gcp-prod")
    assert _findings("gcp-prod", raw) == []  # shipped: fabric none, typed
    del raw["pools"]["h100"]["fabric"]
    found = _findings("gcp-prod", raw)
    assert [(f.subject, f.severity) for f in found] == [("pools.h100.fabric", "error")]
    assert "GPUDirect-TCPX NICs are not provisioned" in found[0].message and "fabric: none" in found[0].message
    raw["pools"]["h100"]["instanceType"] = "a3-megagpu-8g"
    assert "GPUDirect-TCPXO" in _findings("gcp-prod", raw)[0].message
    raw["pools"]["h100"]["instanceType"] = "a3-ultragpu-8g"  # no GPUDirect-TCPX NICs of its own: nothing to declare
    assert _findings("gcp-prod", raw) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_has_no_fabric_finding(stack: str) -> None:
    assert _findings(stack, raw_platform(stack)) == []


def test_a_fabric_the_a3_machine_lacks_is_refused_at_load(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("gcp-prod")
    raw["pools"]["h100"]["fabric"] = "infiniband"
    code = main(["plan", str(write_stack(tmp_path, raw, "gcp-prod"))])
    captured = capsys.readouterr()
    assert code == 2
    assert "pools.h100" in captured.err + captured.out and "change `fabric`" in captured.err + captured.out
