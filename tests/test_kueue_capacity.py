"""The capacity check covers the queues: quotas per resource name per flavor, lending and borrowing within the
cohort, quotas on pools no runtime tolerates, and resources a runtime requests that no queue covers."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from infra.commands import main
from infra.spec import Platform, validate
from infra.spec.queues.capacity import capacity_findings, lending_findings, quota_resource_findings
from tests.conftest import raw_platform, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run


def _errors(platform: Platform) -> list[str]:
    return [f"{f.subject}: {f.message}" for f in capacity_findings(platform) if f.severity == "error"]


def _warnings(platform: Platform) -> list[str]:
    return [f"{f.subject}: {f.message}" for f in capacity_findings(platform) if f.severity == "warning"]


def test_quotas_above_a_flavors_capacity_exit_1_naming_flavor_and_resource(
        tmp_path: Path, crds_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    pool = raw["pools"]["l40s"]
    capacity = len(pool["nodes"]) * pool["perNode"]
    raw["teams"]["speech"]["quota"]["l40s"] = capacity  # on top of the other teams' l40s quota
    total = sum(team["quota"].get("l40s", 0) for team in raw["teams"].values())
    assert main(["validate", str(write_stack(tmp_path, raw)), "--crds", str(crds_dir)]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[error]")]
    assert lines and all("flavor l40s" in line for line in lines)  # cpu and memory follow the GPU share
    assert any(f"{total} nvidia.com/gpu" in line and f"offers {capacity}" in line for line in lines)


def test_the_stacks_queues_are_clean() -> None:
    assert _errors(validate(raw_platform("onprem-lab"), "onprem-lab")) == []


def test_a_quota_on_a_pool_no_runtime_tolerates_is_an_error() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["cpu"]["taints"] = [{"key": "trainyard.io/batch", "value": "spare"}]
    raw["trainer"]["runtimes"] = ["torch-distributed"]
    errors = _errors(validate(raw, "onprem-lab"))
    teams_on_cpu = [name for name, team in raw["teams"].items() if "cpu" in team["quota"]]
    assert len(errors) == len(teams_on_cpu) and teams_on_cpu
    assert all(e.startswith("flavor cpu:") and "trainyard.io/batch=spare:NoSchedule" in e for e in errors)
    raw["trainer"]["runtimes"] = ["torch-distributed", "cpu-batch"]  # cpu-batch tolerates the CPU pools
    assert _errors(validate(raw, "onprem-lab")) == []


def test_a_runtime_requesting_what_no_queue_covers_is_an_error() -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"] = {"cpu": raw["pools"]["cpu"]}
    raw["teams"] = {"vision": {"quota": {"cpu": {"cpu": 32, "memory": "128Gi"}}}}
    raw["trainer"]["runtimes"] = ["cpu-batch", "torchtune-qwen2.5-1.5b"]
    errors = _errors(validate(raw, "onprem-lab"))
    assert errors == [e for e in errors if e.startswith("runtime torchtune-qwen2.5-1.5b:")]
    assert len(errors) == 1 and "nvidia.com/gpu" in errors[0] and "no ClusterQueue covers" in errors[0]


def test_a_team_that_cannot_reach_a_runtime_is_warned() -> None:
    raw = raw_platform("onprem-lab")
    without_cpu = sorted(name for name, team in raw["teams"].items() if "cpu" not in team["quota"])
    warned = [w for w in _warnings(validate(raw, "onprem-lab")) if "cpu-batch" in w]
    assert [w.split(":")[0] for w in warned] == [f"team {name}" for name in without_cpu]
    raw["queueing"]["borrowAnyPool"] = True
    assert not [w for w in _warnings(validate(raw, "onprem-lab")) if "cpu-batch" in w]


def test_borrowing_with_nothing_to_borrow_is_warned() -> None:
    raw = raw_platform("onprem-lab")
    h100 = raw["pools"]["h100"]
    guaranteed = sum(team["quota"]["h100"] for team in raw["teams"].values())
    assert guaranteed == len(h100["nodes"]) * h100["perNode"]  # no shared slack on h100
    for name in ("vision", "speech"):  # the others keep every guaranteed H100
        gpus = raw["teams"][name]["quota"]["h100"]
        raw["teams"][name]["quota"]["h100"] = {"gpus": gpus, "lendingLimit": 0}
    warned = [w for w in _warnings(validate(raw, "onprem-lab")) if "may borrow" in w]
    assert len(warned) == 1 and warned[0].startswith("flavor h100: team nlp may borrow")
    raw["teams"]["speech"]["quota"]["h100"]["lendingLimit"] = 2
    assert not [w for w in _warnings(validate(raw, "onprem-lab")) if "may borrow" in w]


def test_an_unused_pool_is_stranded_only_when_no_queue_may_borrow_it() -> None:
    raw = raw_platform("onprem-lab")
    for team in raw["teams"].values():
        team["quota"].pop("l40s", None)
    assert any(w.startswith("flavor l40s:") and "stranded" in w for w in _warnings(validate(raw, "onprem-lab")))
    raw["queueing"]["borrowAnyPool"] = True
    assert not any("stranded" in w for w in _warnings(validate(raw, "onprem-lab")))


def _replace_team_entry(platform: Platform, team: str, flavor: str, **changes: Any) -> Platform:
    """The platform with one ClusterQueue entry altered: states the spec cannot express, as a MIG or
    autoscaling derivation might produce them."""
    facts = platform.queueing
    queues = tuple(
        dataclasses.replace(q, flavors=tuple(dataclasses.replace(e, **changes) if e.flavor == flavor else e
                                             for e in q.flavors)) if q.team == team else q
        for q in facts.queues)
    altered = validate(raw_platform("onprem-lab"), "onprem-lab")
    altered.__dict__["queueing"] = dataclasses.replace(facts, queues=queues)
    return altered


def test_a_lending_limit_above_the_nominal_quota_is_an_error() -> None:
    platform = validate(raw_platform("onprem-lab"), "onprem-lab")
    assert lending_findings(platform) == []
    altered = _replace_team_entry(platform, "nlp", "h100",
                                  lending=MappingProxyType({"nvidia.com/gpu": Decimal(13)}))
    findings = lending_findings(altered)
    assert [(f.subject, f.severity) for f in findings] == [("flavor h100", "error")]
    assert "team nlp" in findings[0].message and "nvidia.com/gpu" in findings[0].message


def test_a_quota_for_a_resource_the_pool_does_not_offer_is_an_error() -> None:
    platform = validate(raw_platform("onprem-lab"), "onprem-lab")
    assert quota_resource_findings(platform) == []
    team = next(t for t in platform.teams if t.name == "vision")
    quota = {**team.quota, "l40s": MappingProxyType({**team.quota["l40s"], "nvidia.com/mig-1g.10gb": Decimal(7)})}
    altered = dataclasses.replace(platform, teams=tuple(
        dataclasses.replace(t, quota=MappingProxyType(quota)) if t.name == "vision" else t for t in platform.teams))
    findings = quota_resource_findings(altered)
    assert [(f.subject, f.severity) for f in findings] == [("flavor l40s", "error")]
    assert "nvidia.com/mig-1g.10gb" in findings[0].message and "team vision" in findings[0].message
