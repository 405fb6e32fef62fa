"""The tenant attack catalogue (benchmarks/tenant_attacks.py) against every stack: nothing gets through."""

from __future__ import annotations

import pytest

from benchmarks.tenant_attacks import admitted, attacks, quota_attack
from infra.platform.tenancy import quota_hard
from tests.conftest import STACKS, platform_of


@pytest.mark.parametrize("stack", STACKS)
def test_no_attack_is_admitted(stack: str) -> None:
    platform = platform_of(stack)
    tried = attacks(platform)
    shared = {"quota"} if len(platform.teams) > 1 else set()
    assert {a.kind for a in tried} == {"queue", "pod", "image", "identity", "drill", *shared}
    assert [a.name for a in tried if admitted(platform, a)] == []


def test_a_pod_within_the_namespace_gpu_ceiling_passes_the_quota_and_one_more_gpu_does_not() -> None:
    platform = platform_of("onprem-lab")
    vision = next(t for t in platform.teams if t.name == "vision")
    ceiling = int(quota_hard(platform, vision)["requests.nvidia.com/gpu"])
    assert ceiling == 40  # 16 + 8 on h100, 8 + 8 on l40s (tests/test_reach.py)
    assert admitted(platform, quota_attack("vision", "at the ceiling", ceiling))
    assert not admitted(platform, quota_attack("vision", "one past", ceiling + 1))
