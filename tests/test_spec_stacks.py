"""Every stack file loads, and the derived facts are what the declarations imply."""

from __future__ import annotations

from decimal import Decimal

import pytest

from infra.spec.pools import GPU_RESOURCE
from tests.conftest import ALL_STACKS, platform_of


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_loads(stack: str) -> None:
    platform = platform_of(stack)
    assert platform.stack == stack
    assert platform.flavors, "a stack declares at least one pool"


def test_onprem_capacity_is_derived_from_nodes() -> None:
    platform = platform_of("onprem-lab")
    spec = platform.spec.pools
    for flavor in platform.flavors:
        pool = spec[flavor.pool]
        if pool.is_gpu:
            expected = Decimal(len(pool.nodes or []) * (pool.per_node or 0) * pool.sharing.time_slicing)
            assert flavor.capacity[GPU_RESOURCE] == expected


def test_team_quota_sums_match_declarations() -> None:
    platform = platform_of("onprem-lab")
    for flavor in platform.flavors:
        declared = sum(
            (Decimal(team.pool_quota(flavor.pool).gpus or 0) for team in platform.spec.teams.values()
             if flavor.pool in team.quota),
            Decimal(0),
        )
        assert platform.quota_sums[flavor.name].get(GPU_RESOURCE, Decimal(0)) == declared


def test_shared_pool_is_allocatable_minus_guarantees() -> None:
    platform = platform_of("onprem-lab")
    for flavor in platform.flavors:
        for resource, allocatable in flavor.allocatable.items():
            guaranteed = platform.quota_sums[flavor.name].get(resource, Decimal(0))
            # the teams' serving budgets on the pool are kept out of it too (onprem-lab's vision serves on cpu)
            serving = platform.serving_sums.get(flavor.name, {}).get(resource, Decimal(0))
            assert platform.shared_pool[flavor.name][resource] == max(allocatable - guaranteed - serving, Decimal(0))
            # what the platform's DaemonSets take is never in it (the GPU Operator's NFD worker: 5m a node)
            assert allocatable <= flavor.capacity[resource]
