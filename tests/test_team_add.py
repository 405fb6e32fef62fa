"""`trainyard team add`: one pass onboards a team; the stack file keeps its comments; refusals change nothing."""

from __future__ import annotations

import difflib
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.commands import main
from infra.commands import team as onboard
from infra.spec.input.load import PLATFORM_KEY
from tests.conftest import ALL_STACKS, platform_of, raw_platform, stack_file, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run


@pytest.fixture
def no_plan_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of the stack file's text: skip the two offline runs that count the objects a team adds (the
    count is checked in test_team_add_appends_the_team_and_keeps_every_other_line)."""
    monkeypatch.setattr(onboard, "_kinds", lambda config, stack: Counter())


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    copy = tmp_path / "Pulumi.onprem-lab.yaml"
    shutil.copyfile(stack_file("onprem-lab"), copy)
    return copy


def _platform(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["config"][PLATFORM_KEY]


ADD = ["--quota", "cpu=cpu:16,memory:64Gi", "--quota", "h100=0", "--namespace", "rl", "--namespace", "rl-eval",
       "--engineers", "rl-eng", "--analysts", "rl-read", "--analysts", "leads"]


def test_team_add_appends_the_team_and_keeps_every_other_line(lab: Path, crds_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    before = lab.read_text(encoding="utf-8")
    assert main(["team", "add", str(lab), "rl", *ADD]) == 0
    after = lab.read_text(encoding="utf-8")
    changes = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert changes and all(line.startswith("+ ") for line in changes), changes
    assert any(line.lstrip().startswith("#") for line in before.splitlines())
    team = _platform(lab)["teams"]["rl"]
    assert team["namespaces"] == ["rl", "rl-eval"]
    assert team["quota"] == {"cpu": {"cpu": 16, "memory": "64Gi"}, "h100": 0}
    assert team["groups"] == {"engineers": "rl-eng", "analysts": ["rl-read", "leads"]}
    assert list(_platform(lab)["teams"])[:-1] == list(raw_platform("onprem-lab")["teams"])
    out = capsys.readouterr().out
    added = dict(item.rsplit(" ", 1) for item in out.split("Objects it adds to the plan: ")[1].splitlines()[0]
                 .split(", "))
    for kind in ("Namespace", "ResourceQuota", "LimitRange", "LocalQueue"):
        assert added[kind] == "3", kind  # one per namespace: rl, rl-eval and its models namespace rl-models
    assert added["ClusterQueue"] == "1"
    assert main(["validate", str(lab), "--crds", str(crds_dir)]) == 0


@pytest.mark.usefixtures("no_plan_count")
def test_team_add_shows_quota_against_unguaranteed_capacity(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    cpu_pool = raw["pools"]["cpu"]
    capacity = len(cpu_pool["nodes"]) * int(cpu_pool["cpu"])
    guaranteed = sum(int(t["quota"]["cpu"]["cpu"]) for t in raw["teams"].values() if "cpu" in t["quota"])
    assert main(["team", "add", str(lab), "rl", "--quota", "cpu=cpu:16,memory:64Gi"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("cpu ")]
    assert ["cpu", "cpu", "16", str(capacity), str(capacity - guaranteed), str(capacity - guaranteed - 16)] in rows


@pytest.mark.usefixtures("no_plan_count")
def test_adding_the_same_team_again_exits_2_and_leaves_the_file_byte_identical(
        lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["team", "add", str(lab), "rl", *ADD]) == 0
    once = lab.read_bytes()
    assert main(["team", "add", str(lab), "rl", *ADD]) == 2
    assert lab.read_bytes() == once
    assert "teams.rl" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "args", "path"), [
    ("vision", ["--quota", "cpu=cpu:1,memory:1Gi"], "teams.vision"),
    ("Bad_Team", ["--quota", "cpu=cpu:1,memory:1Gi"], "teams"),
    ("rl", ["--quota", "a100=8"], "teams.rl.quota.a100"),
    ("rl", ["--quota", "h100=8"], "teams.rl.quota"),  # every H100 is already guaranteed
    ("rl", ["--quota", "cpu=cpu:1,memory:1Gi", "--namespace", "nlp"], "teams.rl.namespaces"),
    ("rl", ["--quota", "cpu=cpu:1,memory:1Gi", "--pod-security", "baseline"], "teams.rl.podSecurity"),
    ("rl", ["--quota", "cpu=cpu:1,memory:1Gi", "--engineers", "system:masters"], "teams.rl.groups"),
    ("rl", ["--quota", "h100"], "--quota"),
])
def test_invalid_teams_are_refused_and_the_file_is_untouched(lab: Path, name: str, args: list[str], path: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = lab.read_bytes()
    assert main(["team", "add", str(lab), name, *args]) == 2
    assert lab.read_bytes() == before
    err = capsys.readouterr().err
    assert err.startswith("error: ") and path in err and "Traceback" not in err


@pytest.mark.usefixtures("no_plan_count")
def test_a_stack_without_teams_gets_its_first_team(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    del raw["teams"]
    path = write_stack(tmp_path, raw)
    assert main(["team", "add", str(path), "first", "--quota", "h100=8", "--engineers", "first-eng"]) == 0
    assert _platform(path)["teams"] == {"first": {"quota": {"h100": 8}, "groups": {"engineers": "first-eng"}}}


@pytest.mark.usefixtures("no_plan_count")
def test_baseline_with_a_reason_is_written_and_rendered(lab: Path) -> None:
    reason = "mpi-distributed launcher runs sshd"
    assert main(["team", "add", str(lab), "hpc", "--quota", "cpu=cpu:8,memory:32Gi", "--pod-security", "baseline",
                 "--pod-security-reason", reason]) == 0
    assert _platform(lab)["teams"]["hpc"]["podSecurity"] == {"level": "baseline", "reason": reason}


@pytest.mark.usefixtures("no_plan_count")
@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_file_survives_the_round_trip(stack: str, tmp_path: Path) -> None:
    """Whatever the file's layout (comments, flow maps, quoting, indentation), only the team's lines are added."""
    copy = tmp_path / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stack_file(stack), copy)
    before = copy.read_text(encoding="utf-8")
    # a CPU pool: in `local`, queueing for the GPU pool that `demo` is guaranteed whole is refused (test_reach.py)
    pool = next(f.name for f in platform_of(stack).flavors if not f.gpu_resources)
    # a group in the form the cluster's login gives (GKE: a Google group's email, AKS: an Entra object id)
    group = {"gke": "zz-eng@example.com", "aks": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}.get(
        platform_of(stack).spec.cluster.kind, "zz-eng")
    assert main(["team", "add", str(copy), "zz-onboarded", "--quota", f"{pool}=0", "--engineers", group]) == 0
    changes = [line for line in difflib.ndiff(before.splitlines(), copy.read_text(encoding="utf-8").splitlines())
               if line[:1] in "+-"]
    assert all(line.startswith("+ ") for line in changes), changes
    assert _platform(copy)["teams"]["zz-onboarded"] == {"quota": {pool: 0}, "groups": {"engineers": group}}
