"""`trainyard accept` against a fake Kubernetes API (tests/fake_kube.py, tests/fake_cluster.py) reached by the real
kubernetes client over HTTP: every check passes on a cluster that behaves, and fails on one that does not;
exit codes 0, 1 and 2; no real sleeping (the clock is simulated)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import kube_config

from infra.accept import suite as command
from infra.accept.status import parse
from infra.accept.suite import CANNOT_RUN, FAILED, PASSED, accept, checks, select
from infra.apiserver.schema import CrdIndex, check_custom
from infra.commands import main
from infra.commands.common import ROOT
from infra.platform.admission import policies
from infra.spec import SpecError, validate
from tests.cel import denials
from tests.conftest import capture_of, platform_of, raw_platform
from tests.fake_cluster import FakeClock, SimulatedCluster
from tests.fake_kube import Refused

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

CONTEXT = "fake-admin"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """make(stack, faults) -> a running simulated cluster that the default kubeconfig points at."""
    started: list[SimulatedCluster] = []

    def make(stack: str, *faults: str) -> SimulatedCluster:
        sim = SimulatedCluster(platform_of(stack), capture_of(stack), faults)
        sim.api.__enter__()
        started.append(sim)
        monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION",
                            str(sim.api.kubeconfig(tmp_path / "kubeconfig", CONTEXT)))
        return sim

    yield make
    for sim in started:
        sim.api.__exit__()


def run(sim: SimulatedCluster, tmp_path: Path, only: list[str] | None = None, drain: str | None = None,
        team: str | None = None) -> tuple[int, dict[str, Any], FakeClock]:
    platform = sim.platform
    clock = FakeClock(sim)
    code = accept(platform, context=CONTEXT, team=command.default_team(platform, team),
                  chosen=select(checks(platform), only, drain), drain_node=drain, report_dir=tmp_path / "report",
                  root=ROOT, clock=clock, render=lambda: sim.capture)
    report = json.loads((tmp_path / "report" / f"acceptance-{platform.stack}.json").read_text())
    return code, report, clock


def result(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["name"] == name)


def test_every_default_check_passes_on_a_cluster_that_behaves(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("local")
    code, report, clock = run(sim, tmp_path)
    assert code == PASSED, report
    assert [c["name"] for c in report["checks"]] == ["end-to-end", "gang", "checkpoint", "restore-drill",
                                                     "journal-drill", "access", "front-door", "pipeline", "serve",
                                                     "rollback"]
    assert {c["status"] for c in report["checks"][:-4]} == {"passed"}
    assert result(report, "front-door")["status"] == "skipped"  # no token given (tests/test_frontdoor_live.py)
    assert result(report, "pipeline")["status"] == "skipped"  # no pipelines declared (tests/test_accept_pipeline.py)
    # no models declared (tests/test_accept_serving.py)
    assert result(report, "serve")["status"] == result(report, "rollback")["status"] == "skipped"
    assert report["team"] == "demo" and report["namespace"] == "demo-accept"
    assert len(report["commit"].split()[0]) == 40 and report["versions"]["kueue"] == sim.platform.spec.versions.kueue
    assert report["server"] == "v1.34.1-fake"
    # the run's namespace is gone, and it was the team's (its labels make admission treat it as such)
    assert sim.store.get("", "namespaces", "", "demo-accept") is None
    assert clock.slept > 0  # simulated waiting only
    e2e = result(report, "end-to-end")["evidence"]
    assert {"e2e-torch-gpu", "e2e-plainml-cpu"} <= set(e2e)
    assert any("Admitted=True" in line for line in e2e["e2e-torch-gpu"]["conditions"])
    assert e2e["e2e-torch-gpu"]["flavors"] == {"node": {"gpu": "gpu"}}
    markdown = (tmp_path / "report" / "acceptance-local.md").read_text()
    assert "| end-to-end | PASS |" in markdown and "Result: 6 passed, 0 failed, 4 skipped." in markdown


def test_the_run_namespace_is_labelled_as_the_team_and_queued_on_its_cluster_queue(cluster: Any,
                                                                                      tmp_path: Path) -> None:
    sim = cluster("local")
    seen: dict[str, Any] = {}
    sim.store.on_create[("kueue.x-k8s.io", "localqueues")] = lambda q: seen.update(
        queue=q, ns=sim.store.get("", "namespaces", "", q["metadata"]["namespace"]))
    run(sim, tmp_path, only=["access"])
    assert seen["queue"]["spec"] == {"clusterQueue": "demo"}
    labels = seen["ns"]["metadata"]["labels"]
    assert labels["trainyard.io/team"] == "demo" and labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_multi_node_runs_report_the_all_reduce_bandwidth(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("onprem-lab")
    code, report, _ = run(sim, tmp_path, only=["end-to-end"])
    check = result(report, "end-to-end")
    assert code == PASSED, check
    assert "all-reduce 187.50 GB/s bus bandwidth over 2 nodes of h100 (fabric infiniband" in check["summary"]
    assert check["evidence"]["e2e-torch-h100"]["allreduce_busbw_gbps"] == 187.5
    # one job per family and pool the team's queue lists; torchtune is reported as not run
    assert {"e2e-mpi-h100", "e2e-jax-l40s", "e2e-plainml-cpu"} <= set(check["evidence"])
    assert any(line.startswith("torchtune") for line in check["evidence"]["not run"])
    pods = check["evidence"]["e2e-torch-h100"]["pods"]
    assert len(pods) == 2 and len({line.split(" on ")[1] for line in pods}) == 2  # two nodes


def test_every_trainjob_the_suite_submits_is_valid_and_admitted_by_the_platform(cluster: Any, tmp_path: Path,
                                                                                crds_dir: Path) -> None:
    """The suite's TrainJobs are tenants' TrainJobs: valid against the pinned CRDs and passing every admission
    policy of the stack in the run's namespace (evaluated as the API server does, tests/cel.py)."""
    sim = cluster("onprem-lab")
    submitted: list[dict[str, Any]] = []
    simulate = sim.store.on_create[("trainer.kubeflow.org", "trainjobs")]

    def record(job: dict[str, Any]) -> None:
        submitted.append(copy.deepcopy(job))
        simulate(job)

    sim.store.on_create[("trainer.kubeflow.org", "trainjobs")] = record
    code, _, _ = run(sim, tmp_path, only=["end-to-end", "gang", "checkpoint", "node-failure"], drain="gpu-a02")
    assert code == PASSED
    index = CrdIndex(crds_dir, sim.platform.spec.versions.crd_dirs())
    rules = policies(sim.platform)
    assert len(submitted) == 16 and {"trainyard-queue-required", "trainyard-fabric-request"} <= set(rules)
    for job in submitted:
        job = {k: v for k, v in job.items() if k in ("apiVersion", "kind", "spec")} | {"metadata": {
            k: job["metadata"][k] for k in ("name", "namespace", "labels")}}
        assert check_custom(job, index) == [], job["metadata"]["name"]
        for name, policy in rules.items():
            matched = {r for rule in policy["matchConstraints"]["resourceRules"] for r in rule["resources"]}
            if "trainjobs" in matched:
                assert denials(policy, job, "trainjobs", "vision-accept") == [], (job["metadata"]["name"], name)


def test_a_multi_node_run_without_a_bandwidth_figure_fails(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("onprem-lab", "no_allreduce"), tmp_path, only=["end-to-end"])
    assert code == FAILED
    assert "e2e-torch-h100: no all-reduce figure in the log" in result(report, "end-to-end")["summary"]


def test_a_job_that_never_finishes_fails_at_the_time_limit(cluster: Any, tmp_path: Path) -> None:
    code, report, clock = run(cluster("local", "never_complete"), tmp_path, only=["end-to-end"])
    check = result(report, "end-to-end")
    assert code == FAILED and check["status"] == "failed"
    assert check["summary"] == "time limit reached while waiting for TrainJob e2e-plainml-cpu to finish"
    assert check["limit_seconds"] - 5 <= check["seconds"] <= check["limit_seconds"]
    assert clock.slept >= check["limit_seconds"] - 5


@pytest.mark.parametrize(("fault", "message"), [
    ("partial_gang", "partially started: 1 pod(s) of a job that cannot be admitted whole"),
    ("over_quota", "admitted with 4 GPUs of gpu, above the team's limit of 2"),
])
def test_gang_fails_when_a_job_starts_in_part_or_beyond_the_quota(cluster: Any, tmp_path: Path, fault: str,
                                                                   message: str) -> None:
    code, report, _ = run(cluster("local", fault), tmp_path, only=["gang"])
    assert code == FAILED and result(report, "gang")["summary"] == message


def test_gang_passes_when_the_job_stays_pending_whole(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("onprem-lab"), tmp_path, only=["gang"])
    check = result(report, "gang")
    assert code == PASSED, check
    # vision: 16 guaranteed H100s and no limit of its own, so the default: half of the 16 the others lend, 8.
    # One node more than 16 + 8 is asked.
    assert check["summary"].startswith("32 GPUs asked, 24 allowed: pending for 120s with no pod started")
    assert "insufficient quota" in check["summary"]


def test_checkpoint_restart_resumes_from_the_saved_step(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local"), tmp_path, only=["checkpoint"])
    check = result(report, "checkpoint")
    assert code == PASSED, check
    assert check["summary"] == "pod deleted at step 3; its replacement resumed from step 3; the job completed"


def test_a_restart_from_step_zero_fails_the_checkpoint_check(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local", "restart_from_zero"), tmp_path, only=["checkpoint"])
    assert code == FAILED
    assert result(report, "checkpoint")["summary"] == ("the job restarted from step 0, but step 3 had been saved: "
                                                      "the checkpoint was not used")


def test_preemption_runs_only_when_named_and_passes_when_the_low_job_gives_way(cluster: Any,
                                                                                tmp_path: Path) -> None:
    assert "preemption" not in [c.name for c in select(checks(platform_of("local")), None, None)]
    code, report, _ = run(cluster("local"), tmp_path, only=["preemption"])
    check = result(report, "preemption")
    assert code == PASSED, check
    assert check["summary"].startswith("production job admitted on gpu by preempting the sweep job")
    assert any("Preempted" in line for line in check["evidence"]["preempt-low"]["conditions"])


def test_preemption_fails_when_the_high_priority_job_waits(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local", "no_preemption"), tmp_path, only=["preemption"])
    assert code == FAILED
    assert result(report, "preemption")["summary"] == ("time limit reached while waiting for preempt-high to be "
                                                       "admitted")


def test_node_failure_drains_the_named_node_and_always_uncordons_it(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("onprem-lab")
    code, report, _ = run(sim, tmp_path, drain="gpu-a01", only=["node-failure"])
    check = result(report, "node-failure")
    assert code == PASSED, check
    assert check["summary"].startswith("gpu-a01 drained at step 2; the job resumed from step 2")
    assert check["evidence"]["evicted"] and check["evidence"]["uncordoned"] == "gpu-a01"
    assert not sim.store.get("", "nodes", "", "gpu-a01")["spec"].get("unschedulable")

    sim = cluster("onprem-lab", "job_fails_on_drain")
    code, report, _ = run(sim, tmp_path, drain="gpu-a01", only=["node-failure"])
    assert code == FAILED
    assert result(report, "node-failure")["summary"] == "node-failure ended Failed instead of resuming"
    assert not sim.store.get("", "nodes", "", "gpu-a01")["spec"].get("unschedulable")


def test_node_failure_refuses_a_node_outside_the_team_gpu_pools(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("onprem-lab")
    code, report, _ = run(sim, tmp_path, drain="cpu-01", only=["node-failure"])
    assert code == FAILED and result(report, "node-failure")["summary"].startswith("node cpu-01 is in pool cpu")
    assert not sim.store.get("", "nodes", "", "cpu-01")["spec"].get("unschedulable")


def test_a_refused_trainjob_fails_with_the_api_servers_message(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("local")

    def refuse(_: dict[str, Any]) -> None:
        raise Refused('admission webhook "vtrainjob.kb.io" denied the request: runtime not found')

    sim.store.on_create[("trainer.kubeflow.org", "trainjobs")] = refuse
    code, report, _ = run(sim, tmp_path, only=["checkpoint", "restore-drill"])
    assert code == FAILED
    assert result(report, "checkpoint")["summary"] == ('ForbiddenException: HTTP 403 Forbidden: admission webhook '
                                                       '"vtrainjob.kb.io" denied the request: runtime not found')
    assert result(report, "restore-drill")["status"] == "passed"  # one check failing does not stop the others


def test_a_missing_drill_cronjob_fails_the_drill(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("local")
    sim.store.delete("batch", "cronjobs", "velero", "restore-drill")
    code, report, _ = run(sim, tmp_path, only=["restore-drill"])
    assert code == FAILED
    assert result(report, "restore-drill")["summary"].startswith("CronJob velero/restore-drill not found")


def test_the_journal_drill_runs_on_demand_and_reports_the_run_it_found(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local"), tmp_path, only=["journal-drill", "restore-drill"])
    assert code == PASSED, report
    journal = result(report, "journal-drill")
    assert journal["status"] == "passed" and "run 5f0c is in mlpipeline.run_details and ML Metadata" in \
        journal["summary"]
    assert journal["evidence"]["job"].startswith("velero/journal-drill-accept-")


def test_a_failed_journal_drill_fails_alone_with_its_last_log_line(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local", "journal_drill_fails"), tmp_path, only=["journal-drill", "restore-drill"])
    assert code == FAILED
    assert result(report, "journal-drill")["summary"] == (
        "the drill Job failed: drill drill-20261130-120000 FAILED: run 5f0c (started before the backup) is not in "
        "the restored mlpipeline.run_details")
    assert result(report, "restore-drill")["status"] == "passed"


def test_the_journal_drill_is_skipped_without_pipelines_and_fails_without_its_cronjob(cluster: Any,
                                                                                     tmp_path: Path) -> None:
    sim = cluster("local")
    sim.store.delete("batch", "cronjobs", "velero", "journal-drill")
    code, report, _ = run(sim, tmp_path, only=["journal-drill"])
    assert code == FAILED
    assert result(report, "journal-drill")["summary"].startswith("CronJob velero/journal-drill not found")
    raw = raw_platform("local")
    for section in ("pipelines", "models"):
        raw.pop(section)
    for team in raw["teams"].values():
        team.pop("serving", None)
    bare = SimulatedCluster(validate(raw, "local"), capture_of("local"))
    assert bare.store.list("batch", "cronjobs", "velero") and not any(
        c["metadata"]["name"] == "journal-drill" for c in bare.store.list("batch", "cronjobs", "velero"))


def test_a_failed_restore_drill_fails_with_its_last_log_line(cluster: Any, tmp_path: Path) -> None:
    code, report, _ = run(cluster("local", "drill_fails"), tmp_path, only=["restore-drill"])
    assert code == FAILED
    assert result(report, "restore-drill")["summary"].startswith("the drill Job failed: drill drill-20261130-120000 "
                                                                 "FAILED: restore ended PartiallyFailed")


def test_a_right_beyond_the_access_matrix_fails_the_access_check(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("local")
    sim.extra_grants.add(("demo-read", "delete", "namespaces"))  # an analyst who could delete namespaces
    code, report, _ = run(sim, tmp_path, only=["access"])
    check = result(report, "access")
    assert code == FAILED
    assert check["evidence"]["mismatches"] == [
        "analyst trainyard-accept-analyst (group demo-read) can delete core/namespaces cluster-wide, the matrix "
        "says it cannot"]


def test_a_right_the_matrix_grants_but_the_cluster_withholds_fails_the_access_check(cluster: Any,
                                                                                    tmp_path: Path) -> None:
    sim = cluster("local")
    sim.withheld.add(("demo-eng", "delete", "pods"))  # engineers may restart a stuck worker: here they cannot
    code, report, _ = run(sim, tmp_path, only=["access"])
    assert code == FAILED
    assert result(report, "access")["evidence"]["mismatches"] == [
        f"ml-engineer trainyard-accept-ml-engineer (group demo-eng) cannot delete core/pods in {ns}, the matrix says "
        "it can" for ns in ("demo", "demo-models")]  # both of the team's namespaces


def test_a_verify_problem_means_the_suite_cannot_run(cluster: Any, tmp_path: Path) -> None:
    sim = cluster("local")
    sim.withheld.add(("demo-eng", "create", "trainjobs"))  # verify's own access expectations see it
    code, report, _ = run(sim, tmp_path)
    assert code == CANNOT_RUN and report["checks"] == []
    assert report["cannot_run"].startswith("`trainyard verify` found 1 problem(s):")
    assert "ml-engineer" in report["cannot_run"] and "can not create trainjobs in demo" in report["cannot_run"]


@pytest.mark.parametrize(("breakage", "reason"), [
    ("crd", "api group trainer.kubeflow.org: no CRD of this group is served"),
    ("namespace", "namespace demo-accept already exists"),
    ("server", "no cluster reachable at context fake-admin"),
])
def test_missing_prerequisites_exit_2_naming_them(cluster: Any, tmp_path: Path, breakage: str, reason: str) -> None:
    sim = cluster("local")
    if breakage == "crd":
        sim.store.delete("apiextensions.k8s.io", "customresourcedefinitions", "", "things.trainer.kubeflow.org")
    elif breakage == "namespace":
        sim.store.put("", "namespaces", {"metadata": {"name": "demo-accept"}})
    else:
        sim.api.__exit__()
    code, report, _ = run(sim, tmp_path)
    assert code == CANNOT_RUN and reason in report["cannot_run"] and report["checks"] == []
    if breakage == "namespace":  # a namespace accept did not create is left alone
        assert sim.store.get("", "namespaces", "", "demo-accept") is not None


def test_cli_bad_selections_exit_2_and_access_only_exits_0(cluster: Any, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accept", "local", "--only", "everything"]) == 2
    assert "--only: no check named 'everything'" in capsys.readouterr().err
    assert main(["accept", "local", "--only", "node-failure"]) == 2
    assert "--drain-node" in capsys.readouterr().err
    cluster("local")
    assert main(["accept", "local", "--context", CONTEXT, "--only", "access", "--report", str(tmp_path)]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


def test_selection_defaults_and_drain_node() -> None:
    available = checks(platform_of("onprem-lab"))
    assert [c.name for c in select(available, None, "gpu-a01")][-1] == "node-failure"
    assert [c.name for c in select(available, ["gang", "gang"], None)] == ["gang"]
    with pytest.raises(SpecError):
        select(available, ["node-failure"], None)


def test_the_program_saves_its_step_and_resumes_from_it(tmp_path: Path) -> None:
    program = ROOT / "infra" / "accept" / "program.py"

    def start(steps: int) -> str:
        env = {**os.environ, "CHECKPOINT_DIR": str(tmp_path), "ACCEPT_STEPS": str(steps),
               "ACCEPT_STEP_SECONDS": "0", "HOSTNAME": "job-node-0-0"}
        return subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True,
                              check=True).stdout

    first = parse(start(3))
    assert first.starts == [("job-node-0-0", 0)] and first.steps == {"job-node-0-0": 3}
    assert first.done == {"job-node-0-0"}
    second = parse(start(5))
    assert second.starts == [("job-node-0-0", 3)] and second.steps == {"job-node-0-0": 5}


def test_a_team_may_not_declare_another_teams_acceptance_namespace() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["speech"]["namespaces"] = ["speech", "vision-accept"]
    with pytest.raises(SpecError, match="'vision-accept' already belongs to team 'vision \\(its acceptance runs\\)'"):
        validate(raw, "onprem-lab")


def test_without_a_kubeconfig_one_error_line_names_the_file_and_context(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    assert main(["accept", "onprem-lab", "--report", str(tmp_path / "report")]) == CANNOT_RUN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot run:"), err
    assert str(missing) in err[0] and "context lab-admin" in err[0] and "Traceback" not in err[0]
    assert json.loads((tmp_path / "report" / "acceptance-onprem-lab.json").read_text())["cannot_run"] in err[0]
