"""Serving capacity (issue 31 point 3, docs/models.md "Serving"): the teams' Kueue nominal quotas plus every serving
budget on a pool (teams.<t>.serving) must fit the pool's allocatable; exactly at capacity passes, one unit past is
refused with one line naming teams.<t>.serving and the figures, for GPUs, cpu and memory each. The budget is kept out
of the cohort's shared pool: Kueue never lends it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from infra.spec import Platform, validate
from infra.spec.derive import Platform as Derived
from infra.spec.queues.capacity import pool_fit_findings
from tests.conftest import raw_platform

STACK = "onprem-lab"
GPU = "nvidia.com/gpu"
MODELS = {"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}}


def _stack(**serving: dict[str, Any]) -> dict[str, Any]:
    """onprem-lab with `models`, nlp's l40s quota lowered by 2 GPUs, and the given serving budgets."""
    raw = raw_platform(STACK)
    raw["models"] = MODELS
    raw["teams"]["nlp"]["quota"]["l40s"] = 6
    for team, budget in serving.items():
        raw["teams"][team]["serving"] = budget
    return raw


def _free(platform: Derived, pool: str, resource: str) -> Decimal:
    """What the pool's allocatable leaves after the teams' nominal quotas."""
    return platform.flavor(pool).allocatable[resource] - platform.quota_sums[pool].get(resource, Decimal(0))


def _errors(platform: Platform) -> list[str]:
    return [f"{f.subject}: {f.message}" for f in pool_fit_findings(platform) if f.severity == "error"]


@pytest.fixture(scope="module")
def bare() -> Platform:
    return validate(_stack(), STACK)


def _cpu_budget(cpu: str, memory: str) -> dict[str, Any]:
    return {"vision": {"pool": "cpu", "cpu": cpu, "memory": memory}}


def test_gpus_exactly_at_capacity_pass_and_one_past_is_refused_naming_the_budget(bare: Platform) -> None:
    assert _free(bare, "l40s", GPU) == 2
    at = validate(_stack(nlp={"pool": "l40s", "gpus": 2, "cpu": "1", "memory": "1Gi"}), STACK)
    assert _errors(at) == []
    past = validate(_stack(nlp={"pool": "l40s", "gpus": 3, "cpu": "1", "memory": "1Gi"}), STACK)
    assert _errors(past) == [
        "teams.nlp.serving: on pool l40s, the teams' Kueue quotas (22) plus the serving budgets (3) ask 25 "
        "nvidia.com/gpu but the pool offers 24: lower a serving budget or a team quota, or add nodes"]


def test_cpu_exactly_at_capacity_passes_and_one_millicore_past_is_refused(bare: Platform) -> None:
    free_cpu, free_memory = _free(bare, "cpu", "cpu"), _free(bare, "cpu", "memory")
    memory = f"{int(free_memory) // 2**30}Gi"
    at = validate(_stack(**_cpu_budget(f"{int(free_cpu * 1000)}m", memory)), STACK)
    assert _errors(at) == []
    past = validate(_stack(**_cpu_budget(f"{int(free_cpu * 1000) + 1}m", memory)), STACK)
    (line,) = _errors(past)
    assert line.startswith("teams.vision.serving: on pool cpu, the teams' Kueue quotas (96) plus the serving budgets")
    assert " cpu but the pool offers " in line and "\n" not in line


def test_memory_exactly_at_capacity_passes_and_one_kibibyte_past_is_refused(bare: Platform) -> None:
    free_memory = _free(bare, "cpu", "memory")
    assert free_memory % 1024 == 0
    at = validate(_stack(**_cpu_budget("1", f"{int(free_memory) // 1024}Ki")), STACK)
    assert _errors(at) == []
    past = validate(_stack(**_cpu_budget("1", f"{int(free_memory) // 1024 + 1}Ki")), STACK)
    (line,) = _errors(past)
    assert line.startswith("teams.vision.serving: on pool cpu,") and " memory but the pool offers " in line


def test_budgets_of_several_teams_on_one_pool_add_up_and_each_is_named(bare: Platform) -> None:
    half = {"pool": "l40s", "gpus": 1, "cpu": "1", "memory": "1Gi"}
    assert _errors(validate(_stack(nlp=half, speech=half), STACK)) == []
    (line,) = _errors(validate(_stack(nlp=half, speech={**half, "gpus": 2}), STACK))
    assert line.startswith("teams.nlp.serving, teams.speech.serving: on pool l40s")
    assert "plus the serving budgets (3) ask 25" in line


def test_a_serving_budget_is_not_lendable_capacity(bare: Platform) -> None:
    """Kueue's cohort lends only what no team is guaranteed: the serving budget is not in the shared pool."""
    assert bare.shared_pool["l40s"][GPU] == 2
    served = validate(_stack(nlp={"pool": "l40s", "gpus": 2, "cpu": "1", "memory": "1Gi"}), STACK)
    assert served.shared_pool["l40s"][GPU] == 0
    assert served.serving_sums["l40s"] == {GPU: 2, "cpu": 1, "memory": 2**30}
    assert served.shared_pool["l40s"]["cpu"] == bare.shared_pool["l40s"]["cpu"] - 1


def test_without_serving_the_quota_message_is_the_one_it_was(bare: Platform) -> None:
    raw = _stack()
    raw["teams"]["nlp"]["quota"]["l40s"] = 9
    lines = _errors(validate(raw, STACK))
    assert "flavor l40s: teams guarantee 25 nvidia.com/gpu but the pool offers 24: lower a team quota or add nodes" \
        in lines
    assert not any("serving" in line for line in lines)
