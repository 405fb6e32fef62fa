"""`trainyard simulate`: cases with known answers (each able to fail), bad trace rows named by line and column,
byte-identical reports whatever the hash seed, the synthetic generator, --base, and the repository's traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.commands import main
from infra.simulate import queues, report, trace
from infra.simulate.engine import Outcome, Record, simulate
from infra.simulate.run import run
from infra.spec import validate
from infra.spec.input.load import stack_names
from tests.conftest import ROOT, platform_of, write_stack
from tests.seeds import seed_unlike_this_process

HEADER = ",".join(trace.HEADER)
# How simulations/<stack>.csv are made (docs/simulate.md)
GENERATE = ["--generate", "*=1", "--hours", "24", "--seed", "0"]


def _stack(teams: dict[str, dict[str, Any]], nodes: int = 2, **queueing: Any) -> dict[str, Any]:
    """One pool of `nodes` x 8 H100s and the teams given (quota on it, plus any other team field)."""
    return {
        "cluster": {"existing": {"context": "test"}},
        "identity": {"groupPrefix": "oidc:"},
        "pools": {"h100": {"gpu": "H100-SXM-80GB", "perNode": 8, "cpu": "192", "memory": "1900Gi",
                           "nodes": [f"gpu-{i}" for i in range(nodes)], "capacityType": "reserved"}},
        "teams": {name: {"groups": {"engineers": f"{name}-eng"}, **team} for name, team in teams.items()},
        **({"queueing": queueing} if queueing else {}),
    }


def _model(raw: dict[str, Any]) -> queues.Model:
    return queues.build(validate(raw, "test"))


def _jobs(*rows: tuple[int, str, int, int, int, str | None]) -> list[trace.Job]:
    """(submit, team, gpus per pod, pods, duration, priority) on pool h100, named by their order."""
    return [trace.Job(i + 2, submit, team, "h100", gpus, pods, duration, priority)
            for i, (submit, team, gpus, pods, duration, priority) in enumerate(rows)]


def _by_line(outcome: Outcome) -> dict[int, Record]:
    return {record.job.line: record for record in outcome.records}


def _most_at_once(outcome: Outcome, team: str) -> int:
    """The most GPUs a team held at one time (its jobs' last runs)."""
    edges = sorted(edge for r in outcome.records if r.job.team == team and r.end is not None
                   for edge in ((r.end - r.job.duration, r.job.demand), (r.end, -r.job.demand)))
    held = most = 0
    for _, change in sorted(edges, key=lambda e: (e[0], e[1])):
        held += change
        most = max(most, held)
    return most


@pytest.mark.parametrize("fair", [True, False])
def test_two_jobs_that_each_need_the_whole_pool_wait_exactly_the_first_ones_duration(fair: bool) -> None:
    model = _model(_stack({"vision": {"quota": {"h100": 16}}}, fairSharing=fair))
    outcome = simulate(model, _jobs((0, "vision", 8, 2, 3600, None), (10, "vision", 8, 2, 600, None)))
    first, second = _by_line(outcome)[2], _by_line(outcome)[3]
    assert (first.waited, second.waited) == (0, 3600 - 10)
    assert second.end == 3600 + 600 and outcome.span == 4200
    assert outcome.busy["h100"] == 16 * (3600 + 600)


@pytest.mark.parametrize("fair", [True, False])
@pytest.mark.parametrize(("reclaim", "waits"), [("Any", 0), ("Never", 10_000 - 100)])
def test_a_job_within_its_nominal_quota_does_not_wait_behind_another_teams_borrowing_when_reclaim_is_on(
        fair: bool, reclaim: str, waits: int) -> None:
    raw = _stack({"vision": {"quota": {"h100": 8}}, "nlp": {"quota": {"h100": 8}}}, fairSharing=fair,
                 preemption={"reclaimWithinCohort": reclaim, "withinClusterQueue": "LowerPriority"})
    model = _model(raw)
    assert model.reach("nlp", "h100") == 12  # 8 guaranteed + the default limit, 50% of the 8 vision lends
    # nlp borrows 4 of vision's GPUs first; vision then asks for its own 8, at a lower priority than nlp's
    outcome = simulate(model, _jobs((0, "nlp", 4, 3, 10_000, "production"), (100, "vision", 8, 1, 600, "sweep")))
    assert _by_line(outcome)[3].waited == waits
    assert outcome.preempted.get("nlp", 0) == (1 if reclaim == "Any" else 0)
    assert outcome.preempting.get("vision", 0) == (1 if reclaim == "Any" else 0)


@pytest.mark.parametrize("limit", [3, 4])
def test_a_borrowing_limit_caps_what_a_team_reaches(limit: int) -> None:
    raw = _stack({"vision": {"quota": {"h100": 16}}, "research": {"quota": {"h100": 0}, "borrowingLimit": limit}},
                 nodes=3)
    model = _model(raw)
    outcome = simulate(model, _jobs(*[(0, "research", 1, 1, 1000, None)] * 12))
    assert _most_at_once(outcome, "research") == limit  # the pool has 24 idle GPUs all along
    assert outcome.span == -(-12 // limit) * 1000


@pytest.mark.parametrize(("policy", "low", "high", "preempts"), [
    ("LowerPriority", "sweep", "production", True),
    ("LowerPriority", "research", "research", False),  # equal priority: not lower
    ("LowerOrNewerEqualPriority", "research", "research", False),  # the running job is the older one
    ("Never", "sweep", "production", False),
])
def test_a_higher_priority_preempts_within_the_queue_as_the_policy_says(
        policy: str, low: str, high: str, preempts: bool) -> None:
    raw = _stack({"vision": {"quota": {"h100": 16}, "preemption": {"withinClusterQueue": policy}}})
    outcome = simulate(_model(raw), _jobs((0, "vision", 8, 2, 10_000, low), (100, "vision", 8, 2, 500, high)))
    running, arriving = _by_line(outcome)[2], _by_line(outcome)[3]
    assert arriving.waited == (0 if preempts else 10_000 - 100)
    assert outcome.preempted.get("vision", 0) == int(preempts)
    # the evicted job queues again and runs its whole duration after the preemptor
    assert running.end == (100 + 500 + 10_000 if preempts else 10_000)


def test_weights_split_a_contended_pool_in_their_ratio() -> None:
    """Two teams with no guarantee borrow the cohort's whole pool, each always with work waiting: over the time
    both are backlogged the GPU-hours split 3:1, their weights, within 5%."""
    raw = _stack({"vision": {"quota": {"h100": 0}, "weight": 3, "borrowingLimit": 15},
                  "nlp": {"quota": {"h100": 0}, "weight": 1, "borrowingLimit": 15}})
    jobs = _jobs(*[(i * 50, team, 1, 1, 1000, None) for i in range(600) for team in ("vision", "nlp")])
    outcome = simulate(_model(raw), jobs)
    until = 600 * 50  # the last arrival: both queues hold work up to here
    held = {team: sum(max(0, min(r.end or 0, until) - (r.end or 0) + r.job.duration)
                      for r in outcome.records if r.job.team == team) for team in ("vision", "nlp")}
    assert held["vision"] / held["nlp"] == pytest.approx(3, rel=0.05)
    even = _stack({"vision": {"quota": {"h100": 0}, "borrowingLimit": 15},
                   "nlp": {"quota": {"h100": 0}, "borrowingLimit": 15}})
    outcome = simulate(_model(even), jobs)
    held = {team: sum(max(0, min(r.end or 0, until) - (r.end or 0) + r.job.duration)
                      for r in outcome.records if r.job.team == team) for team in ("vision", "nlp")}
    assert held["vision"] / held["nlp"] == pytest.approx(1, rel=0.05)


def test_a_job_larger_than_its_team_can_ever_reach_is_never_admitted() -> None:
    model = _model(_stack({"vision": {"quota": {"h100": 16}}, "nlp": {"quota": {"h100": 0}, "borrowingLimit": 8}},
                          nodes=3))
    outcome = simulate(model, _jobs((0, "nlp", 8, 1, 100, None), (0, "nlp", 8, 2, 100, None)))
    assert [r.flavor for r in outcome.records] == ["h100", None]
    assert report.build(model, outcome)["teams"]["nlp"]["never_admitted"] == 1


@pytest.mark.parametrize(("row", "column", "says"), [
    ("0,vision,h100,x,1,60,", "gpus", "'x' is not a number of GPUs"),
    ("0,vision,h100,0,1,60,", "gpus", "'0' is not a number of GPUs"),
    ("0,vision,h100,9,1,60,", "gpus", "a node of pool h100 has 8"),
    ("-5,vision,h100,1,1,60,", "submit", "'-5'"),
    ("0,vision,h100,1,0,60,", "pods", "'0'"),
    ("0,vision,h100,1,1,0,", "duration", "'0'"),
    ("0,nobody,h100,1,1,60,", "team", "'nobody' is not a team"),
    ("0,vision,a100,1,1,60,", "pool", "'a100' is not a GPU pool"),
    ("0,vision,h100,1,1,60,urgent", "priority", "'urgent' is not a WorkloadPriorityClass"),
])
def test_a_bad_row_exits_2_naming_its_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       row: str, column: str, says: str) -> None:
    stack = write_stack(tmp_path, _stack({"vision": {"quota": {"h100": 16}}}))
    (tmp_path / "t.csv").write_text(f"{HEADER}\n0,vision,h100,8,2,60,research\n{row}\n", encoding="utf-8")
    assert main(["simulate", str(stack), "--trace", str(tmp_path / "t.csv")]) == 2
    error = capsys.readouterr().err
    assert f"t.csv: line 3, column {column}:" in error and says in error and "Traceback" not in error
    (tmp_path / "t.csv").write_text(f"{HEADER}\n0,vision,h100,8,2,60,research\n", encoding="utf-8")
    assert main(["simulate", str(stack), "--trace", str(tmp_path / "t.csv")]) == 0


@pytest.mark.parametrize("text", ["submit,team,pool,gpus,pods,duration\n", f"{HEADER}\n0,vision,h100,1,1\n"])
def test_a_bad_header_or_a_short_row_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    stack = write_stack(tmp_path, _stack({"vision": {"quota": {"h100": 16}}}))
    (tmp_path / "t.csv").write_text(text, encoding="utf-8")
    assert main(["simulate", str(stack), "--trace", str(tmp_path / "t.csv")]) == 2
    assert "t.csv: line " in capsys.readouterr().err


def test_reports_are_byte_identical_whatever_the_hash_seed(tmp_path: Path) -> None:
    """A child process under another hash seed (tests/seeds.py) writes the same reports as this process."""
    trace_file = str(ROOT / "simulations" / "onprem-lab.csv")
    subprocess.run([sys.executable, "-m", "infra.commands", "simulate", "onprem-lab", "--trace", trace_file,
                    "--out", str(tmp_path / "child")],
                   cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed_unlike_this_process(), "PYTHONPATH": str(ROOT)},
                   check=True, capture_output=True)
    assert main(["simulate", "onprem-lab", "--trace", trace_file, "--out", str(tmp_path / "here")]) == 0
    outputs = [((tmp_path / run / "report.json").read_bytes(), (tmp_path / run / "report.md").read_bytes())
               for run in ("child", "here")]
    assert outputs[0] == outputs[1] and b'"vision"' in outputs[0][0]


@pytest.mark.parametrize("stack", stack_names(ROOT))
def test_the_repositorys_traces_are_the_generators_output_and_simulate(stack: str, tmp_path: Path) -> None:
    assert main(["simulate", stack, "--trace", str(tmp_path / "t.csv"), *GENERATE]) == 0
    kept = ROOT / "simulations" / f"{stack}.csv"
    assert kept.read_bytes() == (tmp_path / "t.csv").read_bytes(), f"regenerate: trainyard simulate {stack} " \
        f"--trace simulations/{stack}.csv {' '.join(GENERATE)}"
    model = queues.build(platform_of(stack))
    jobs = trace.read(kept, model)
    result = report.build(model, simulate(model, jobs))
    assert sum(team["admitted"] + team["never_admitted"] for team in result["teams"].values()) == len(jobs) > 0


def test_the_generator_is_seeded() -> None:
    model = queues.build(platform_of("onprem-lab"))
    rates = trace.parse_rates(["*=2"], model)
    assert trace.write(trace.generate(model, rates, 12, 7)) == trace.write(trace.generate(model, rates, 12, 7))
    assert trace.write(trace.generate(model, rates, 12, 7)) != trace.write(trace.generate(model, rates, 12, 8))


def test_base_compares_the_base_revisions_queues(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack, kept = "onprem-lab", ROOT / "simulations" / "onprem-lab.csv"
    assert run(ROOT, stack, kept, "HEAD", tmp_path / "out", only_if_changed=True) == 0
    assert "the queues are the same at HEAD" in capsys.readouterr().out  # the work tree's stack file is HEAD's
    assert run(ROOT, stack, kept, "HEAD", tmp_path / "out", only_if_changed=False) == 0
    difference = (tmp_path / "out" / "difference.md").read_text(encoding="utf-8")
    assert "| vision | 0 | 0 | 0h00m00s | 0h00m00s | 0h00m00s | 0 |" in difference
    with pytest.raises(Exception, match="not a git revision"):
        run(ROOT, stack, kept, "no-such-ref", None, only_if_changed=False)


def test_the_difference_is_head_minus_base() -> None:
    base = {"teams": {"vision": {"admitted": 3, "never_admitted": 0, "wait": {"p50": 10, "p95": 20, "max": 30},
                                 "preemptions": {"suffered": 2, "caused": 0}}}}
    head = {"teams": {"nlp": {"admitted": 1, "never_admitted": 1, "wait": {"p50": 5, "p95": 5, "max": 5},
                              "preemptions": {"suffered": 0, "caused": 0}},
                      "vision": {"admitted": 3, "never_admitted": 0, "wait": {"p50": 70, "p95": 20, "max": 10},
                                 "preemptions": {"suffered": 0, "caused": 1}}}}
    changes = report.difference(base, head)
    assert changes["vision"] == {"admitted": 0, "never_admitted": 0, "wait_p50": 60, "wait_p95": 0, "wait_max": -20,
                                 "preempted": -2}
    assert changes["nlp"]["admitted"] == 1 and changes["nlp"]["wait_p50"] == 5


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 101))
    assert (report.percentile(values, 0.5), report.percentile(values, 0.95)) == (50, 95)
    assert report.percentile([7], 0.95) == 7 and report.percentile([], 0.5) == 0


def test_workloads_to_trace_turns_finished_gpu_workloads_into_rows(crds_dir: Path, tmp_path: Path) -> None:
    """The fixture is five Workloads as `kubectl get workloads -A -o json` lists them, each valid against the
    pinned Workload CRD: three finished with GPUs, one pending, one CPU-only."""
    fixture = ROOT / "tests" / "fixtures" / "workloads.json"
    index = CrdIndex(crds_dir, platform_of("onprem-lab").spec.versions.crd_dirs())
    for item in json.loads(fixture.read_text(encoding="utf-8"))["items"]:
        assert check_custom(item, index) == [], item["metadata"]["name"]
    done = subprocess.run([str(ROOT / "scripts" / "workloads-to-trace"), str(fixture)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines() == [
        HEADER,
        "0,vision,h100,8,2,3600,production",  # pinned to its pool by the trainyard.io/pool node selector
        "100,nlp,,4,1,1800,",  # admitted at once: its 30 minutes run from admission to Finished
        "120,speech,,8,3,7200,research",  # the launcher pod set asks for no GPU
    ]
    assert "2 left out" in done.stderr
    rows = tmp_path / "t.csv"
    rows.write_text(done.stdout, encoding="utf-8")
    assert len(trace.read(rows, queues.build(platform_of("onprem-lab")))) == 3  # a trace of the stack it ran on
