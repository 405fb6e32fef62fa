"""Capacity from what a node can offer: each cloud's published kubelet reservation, the platform's DaemonSets,
quotas held to the rest, and the plan's table showing nominal beside allocatable."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from infra.checks.node_room import room, room_findings
from infra.offline.plan import objects
from infra.review.summary import capacity_rows
from infra.spec import load_file
from infra.spec.clouds import CLOUDS, MACHINES
from infra.spec.clouds.facts import GIB, MIB, Machine
from infra.spec.queues.capacity import capacity_findings
from infra.spec.queues.flavors import build_flavor
from tests.conftest import capture_of, platform_of, raw_platform, write_stack


def _machine(cloud: str, vcpu: int, gib: int) -> Machine:
    return Machine("test", cloud, vcpu, gib)


def test_gke_reserves_by_its_published_tiers() -> None:
    reserve = CLOUDS["gke"].kubelet_reserve
    assert reserve is not None
    # plan-node-sizes: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above 4
    assert [reserve(_machine("gcp", n, 4)).cpu for n in (1, 2, 4, 8)] == [
        Decimal("0.06"), Decimal("0.07"), Decimal("0.08"), Decimal("0.09")]
    # 150 GiB: 1 + 0.8 + 0.8 + 6.72 + 0.44 GiB, and the 100 MiB eviction threshold
    assert reserve(_machine("gcp", 8, 150)).memory == Decimal("9.76") * GIB + 100 * MIB


def test_eks_reserves_per_pod_and_aks_caps_at_a_quarter() -> None:
    eks, aks = CLOUDS["eks"].kubelet_reserve, CLOUDS["aks"].kubelet_reserve
    assert eks is not None and aks is not None
    assert eks(_machine("aws", 29, 64)).memory == (11 * 110 + 255 + 100) * MIB  # below 30 vCPUs: 110 pods
    assert eks(_machine("aws", 30, 64)).memory == (11 * 250 + 255 + 100) * MIB
    assert aks(_machine("azure", 8, 8)).memory == 2 * GIB + 100 * MIB  # 25% of 8 GiB < 20 MiB x 250 + 50 MiB
    assert aks(_machine("azure", 8, 64)).memory == (20 * 250 + 50 + 100) * MIB
    assert [aks(_machine("azure", n, 64)).cpu for n in (8, 9, 64, 96)] == [
        Decimal("0.18"), Decimal("0.26"), Decimal("0.74"), Decimal("1.06")]
    assert CLOUDS["existing"].kubelet_reserve is None  # a site's kubelet is its own: declared figures count


def test_default_shares_and_the_shared_pool_follow_allocatable_not_the_machine() -> None:
    platform = platform_of("aws-prod")
    h100 = platform.flavor("h100")
    p5 = MACHINES["p5.48xlarge"]
    assert h100.capacity["cpu"] == 4 * p5.vcpu
    assert h100.allocatable["cpu"] < h100.capacity["cpu"] and h100.allocatable["memory"] < h100.capacity["memory"]
    assert platform.quota_sums["h100"]["memory"] <= h100.allocatable["memory"]
    assert platform.quota_sums["h100"]["memory"] > h100.allocatable["memory"] - 2 * MIB  # all of it, rounded


def test_a_quota_over_allocatable_is_refused_and_at_allocatable_passes(tmp_path: Path) -> None:
    raw = raw_platform("aws-prod")
    raw["teams"]["vision"]["quota"]["cpu"] = {"cpu": 32, "memory": "64Gi"}  # 32 + 16 = 48: the nodes' size
    found = [f for f in capacity_findings(load_file(write_stack(tmp_path, raw, "aws-prod")))
             if f.subject == "flavor cpu"]
    # 3 nodes x 16: less the kubelet's 0.115 a node (EKS' formula) and Istio's CNI agent's 0.1 a node (it runs on
    # this untainted pool once Pipelines' sidecars keep it)
    assert len(found) == 1 and "teams guarantee 48 cpu but the pool offers 47.355 allocatable (48 less" in \
        found[0].message
    raw["teams"]["vision"]["quota"]["cpu"] = {"cpu": 31, "memory": "64Gi"}
    assert [f for f in capacity_findings(load_file(write_stack(tmp_path, raw, "aws-prod")))
            if f.subject == "flavor cpu"] == []


def _daemonset(requests: dict[str, str], tolerations: list[dict[str, str]]) -> dict[str, Any]:
    pod = {"containers": [{"name": "agent", "resources": {"requests": requests}}], "tolerations": tolerations}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "x"},
            "spec": {"template": {"spec": pod}}}


def test_a_daemonset_the_spec_does_not_know_is_found_only_where_it_lands() -> None:
    platform = platform_of("aws-prod")
    rendered = [obj for _, obj in objects(capture_of("aws-prod"))]
    assert room_findings(platform, rendered) == []
    # the render's DaemonSets take no more than the spec keeps for them
    for name, free in room(platform, rendered).items():
        assert all(free[r] >= platform.flavor(name).allocatable[r] for r in ("cpu", "memory"))
    everywhere = [{"operator": "Exists"}]
    heavy = _daemonset({"cpu": "100m", "memory": "1Gi"}, everywhere)
    found = room_findings(platform, [*rendered, heavy])
    assert {f.subject for f in found} == {"flavor h100", "flavor l40s"}  # the pools guaranteed to the full
    untolerated = _daemonset({"cpu": "100m", "memory": "1Gi"}, [])  # GPU pools are tainted: it lands elsewhere
    assert room_findings(platform, [*rendered, untolerated]) == []
    selected = copy.deepcopy(heavy)
    selected["spec"]["template"]["spec"]["nodeSelector"] = {"trainyard.io/pool": "cpu"}
    assert room_findings(platform, [*rendered, selected]) == []


@pytest.mark.parametrize("stack", ["aws-prod", "onprem-lab"])
def test_the_plan_table_shows_nominal_beside_allocatable(stack: str) -> None:
    platform = platform_of(stack)
    rows = capacity_rows(platform)
    assert rows[0][:4] == ["flavor", "resource", "nominal", "allocatable"]
    cpu = next(row for row in rows if row[:2] == ["h100", "cpu"])
    assert cpu[2] == "768" and cpu[3] != "768"  # the kubelet (cloud) or the platform's DaemonSets (both) keep some


def test_istio_s_cni_agent_is_kept_on_untainted_pools_only() -> None:
    """Pipelines' sidecars keep Istio's CNI agent, which tolerates no GPU taint: the cpu pool keeps its requests
    on each node, the tainted GPU pools keep nothing for it."""
    spec = platform_of("aws-prod").spec
    assert spec.pipelines is not None
    for name, kept in (("cpu", Decimal("0.1")), ("h100", Decimal(0))):
        pool = spec.pools[name]
        with_agent = build_flavor(name, pool, spec.cluster, mesh_agent=True).allocatable["cpu"]
        without = build_flavor(name, pool, spec.cluster, mesh_agent=False).allocatable["cpu"]
        assert without - with_agent == kept * pool.node_count, name
