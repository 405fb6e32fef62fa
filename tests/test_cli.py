"""The `trainyard` command contract: exit codes and what each command prints or writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infra.commands import main
from tests.conftest import ROOT, raw_platform, write_stack


@pytest.mark.usefixtures("repo_runs")
def test_plan_of_the_lab_is_clean_and_shows_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "onprem-lab"]) == 0
    out = capsys.readouterr().out
    assert "h100" in out and "nvidia.com/gpu" in out and "Findings: 0 error(s)" in out


@pytest.mark.usefixtures("repo_runs")
def test_validate_checks_every_object_against_the_crds(crds_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "onprem-lab", "--crds", str(crds_dir)]) == 0
    out = capsys.readouterr().out
    assert "0 error(s)" in out and "not schema-checked" not in out


def test_quota_above_capacity_exits_1_naming_the_flavor(tmp_path: Path, crds_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    pool = raw["pools"]["h100"]
    capacity = len(pool["nodes"]) * pool["perNode"]
    raw["teams"]["nlp"]["quota"]["h100"] = capacity  # with the other teams' H100 quota: above capacity
    assert main(["validate", str(write_stack(tmp_path, raw)), "--crds", str(crds_dir)]) == 1
    out = capsys.readouterr().out
    assert "flavor h100" in out and "nvidia.com/gpu" in out


def test_a_pool_no_team_can_reach_is_reported_stranded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    for team in raw["teams"].values():
        team["quota"].pop("l40s", None)
    assert main(["plan", str(write_stack(tmp_path, raw))]) == 0  # a warning, not an error
    assert "stranded" in capsys.readouterr().out


def test_a_schema_violation_is_a_finding(tmp_path: Path, crds_dir: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import infra.platform.kueue as kueue

    original = kueue.flavor_spec
    monkeypatch.setattr(kueue, "flavor_spec", lambda flavor: {**original(flavor), "nodeLabelz": {}})
    assert main(["validate", "onprem-lab", "--crds", str(crds_dir)]) == 1
    assert "nodeLabelz: not in the CRD schema" in capsys.readouterr().out


@pytest.mark.usefixtures("repo_runs")
def test_render_writes_plan_and_manifests(tmp_path: Path) -> None:
    assert main(["render", "onprem-lab", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "plan.json").is_file()
    assert (tmp_path / "manifests" / "_cluster" / "ClusterQueue-nlp.yaml").is_file()
    assert (tmp_path / "manifests" / "nlp" / "LocalQueue-nlp.yaml").is_file()


def test_console_script_runs_as_users_run_it() -> None:
    result = subprocess.run([str(Path(sys.executable).parent / "trainyard"), "plan", "local"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "Trainyard plan: stack local" in result.stdout
