"""The tenant attack catalogue (benchmarks/tenant_attacks.py) against every stack: nothing gets through."""

from __future__ import annotations

import pytest

from benchmarks.tenant_attacks import admitted, attacks

from .conftest import STACKS, platform_of


@pytest.mark.parametrize("stack", STACKS)
def test_no_attack_is_admitted(stack: str) -> None:
    platform = platform_of(stack)
    tried = attacks(platform)
    assert {a.kind for a in tried} == {"queue", "pod", "image", "identity", "drill"}
    assert [a.name for a in tried if admitted(platform, a)] == []
