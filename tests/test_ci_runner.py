"""ci-runner-reaches-endpoint: a cloud stack's workflows run on a self-hosted runner it names; without one (or on
a hosted runner) the stack gives one error naming ci.runner, restored it passes."""

from __future__ import annotations

from typing import Any

import pytest

from infra.checks.ci import check_ci_runner
from infra.checks.context import Context
from infra.offline.engine import Capture
from infra.spec import Finding, SpecError, validate
from tests.conftest import STACKS, raw_platform

CLOUD_STACKS = ("aws-prod", "gcp-prod", "azure-prod")


def _findings(stack: str, raw: dict[str, Any]) -> list[Finding]:
    platform = validate(raw, stack)
    members = [c for c in platform.hybrid.clusters.values()] if platform.hybrid else [platform]
    return [f for member in members
            for f in check_ci_runner(Context(member, Capture(stack, "trainyard", (), {}), None))]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_runs_where_it_reaches_its_cluster(stack: str) -> None:
    assert _findings(stack, raw_platform(stack)) == []


@pytest.mark.parametrize("stack", CLOUD_STACKS)
@pytest.mark.parametrize("ci", [None, {"runner": ["ubuntu-24.04"]}])
def test_a_cloud_stack_on_a_hosted_runner_is_one_error_naming_ci_runner(stack: str, ci: Any) -> None:
    raw = raw_platform(stack)
    if ci is None:
        del raw["ci"]
    else:
        raw["ci"] = ci
    found = _findings(stack, raw)
    assert [(f.subject, f.severity) for f in found] == [("ci.runner", "error")]
    assert "203.0.113.0/24, 198.51.100.0/24 only" in found[0].message and "self-hosted" in found[0].message


def test_the_hybrid_worker_behind_a_private_endpoint_needs_the_runner_too() -> None:
    raw = raw_platform("hybrid-burst")
    del raw["ci"]
    found = _findings("hybrid-burst", raw)
    assert [f.subject for f in found] == ["ci.runner"] and "its VPC only" in found[0].message


def test_an_existing_cluster_needs_no_declared_runner() -> None:
    raw = raw_platform("onprem-lab")
    del raw["ci"]
    assert _findings("onprem-lab", raw) == []


def test_runner_labels_are_given_once() -> None:
    raw = raw_platform("aws-prod")
    raw["ci"] = {"runner": ["self-hosted", "self-hosted"]}
    with pytest.raises(SpecError) as caught:
        validate(raw, "aws-prod")
    assert "ci.runner" in str(caught.value)
