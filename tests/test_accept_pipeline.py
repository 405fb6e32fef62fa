"""`trainyard accept`'s `pipeline` check (issue 30 point 7) against the simulated cluster (tests/fake_cluster.py,
reached by the real kubernetes client) and a fake Kubeflow Pipelines API behind the gateway: a run creates its
training TrainJob in the team's namespace on the team's LocalQueue, Kueue's simulation admits it, and the run
succeeds when the TrainJob completes. Each way the platform can misbehave fails the check naming the step.
Also verify's pipelines-API check against a fake gateway."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from kubernetes import client

from infra.accept import pipeline as check
from infra.accept.jobs import Spec, families, trainjob
from infra.accept.kube import Kube
from infra.accept.runner import Check, Failed, Run, Skipped, run_check
from infra.accept.web import TOKEN_FILE_ENV
from infra.components import USERID_HEADER
from infra.live.frontdoor import Answer
from infra.live.pipelines import API_PATH, Reply, pipeline_api_findings
from infra.platform import pipeline_observability
from tests.conftest import capture_of, platform_of
from tests.fake_cluster import TRAINER, FakeClock, SimulatedCluster

STACK = "local"
TOKEN, OTHER = "member-id-token", "other-team-id-token"
PARAMETERS = {"dataset_version": "v3", "epochs": 2, "learning_rate": 0.001}
PACKAGE: dict[str, Any] = {
    "pipelineInfo": {"name": "train-and-evaluate"}, "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.16.0",
    "root": {"inputDefinitions": {"parameters": {
               "dataset_version": {"parameterType": "STRING", "defaultValue": "v3"},
               "epochs": {"parameterType": "NUMBER_INTEGER", "defaultValue": 2},
               "learning_rate": {"parameterType": "NUMBER_DOUBLE", "defaultValue": 0.001}}}}}
TASKS = ("prepare-data", "train", "evaluate")


class FakePipelines:
    """The API server as the gateway passes it on; `faults` switch on the misbehaviours the check must catch."""

    def __init__(self, sim: SimulatedCluster, team: str, faults: tuple[str, ...] = ()) -> None:
        self.sim, self.faults = sim, set(faults)
        platform = sim.platform
        self.team = next(t for t in platform.teams if t.name == team)
        self.namespace = self.team.namespaces[0]
        self.pipelines: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.asked: list[tuple[str, str, str]] = []

    def _trainjob(self, name: str) -> None:
        platform = self.sim.platform
        runtime = next(r for f, r in sorted(families(platform).items()) if f == "torch")
        pool = next(p for p in platform.spec.pools if platform.flavor(p).gpu_resources)
        job = trainjob(platform, Spec(name, runtime, pool, steps=2), platform.queueing.queue(self.team.name).team)
        job["metadata"]["namespace"] = self.namespace
        self.sim.store.create(TRAINER, "trainjobs", job)

    def _record(self, run: dict[str, Any]) -> dict[str, Any]:
        job = self.sim.store.get(TRAINER, "trainjobs", self.namespace, run["job"])
        # off-queue: the run trains without a TrainJob (in its own pods, around Kueue) and ends at once.
        done = "off-queue" in self.faults or (job is not None and any(
            c["type"] == "Complete" for c in job.get("status", {}).get("conditions", [])))
        state = "SUCCEEDED" if done else "RUNNING"
        if done and "fails" in self.faults:
            state = "FAILED"
        second = run["index"] > 1
        tasks = [{"display_name": name, "state": "SKIPPED" if "cached" in self.faults and second else
                  ("FAILED" if state == "FAILED" and name == "train" else "SUCCEEDED" if done else "RUNNING"),
                  "outputs": {} if name == "prepare-data" and "no-artifacts" in self.faults else
                  {f"{name}-out": {"artifact_ids": [len(self.runs) * 10 + 1]}}} for name in TASKS]
        parameters = dict(run["parameters"])
        if "drops-parameter" in self.faults:
            parameters.pop("epochs", None)
        if "differs" in self.faults and second:
            tasks = tasks[:-1]
        return {"run_id": run["id"], "state": state, "created_at": run["created"],
                "finished_at": "2999-01-01T00:00:00Z" if done else None,
                "runtime_config": {"parameters": parameters},
                "run_details": {"task_details": [{"display_name": "root", "state": state}, *tasks]}}

    def call(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Reply:
        parsed = urlparse(url)
        path, query = parsed.path.split(API_PATH, 1)[1], parse_qs(parsed.query)
        who = {f"Bearer {TOKEN}": "member", f"Bearer {OTHER}": "other"}.get(headers.get("Authorization", ""))
        self.asked.append((method, path, who or "anonymous"))
        if who is None:
            return Reply(302, None)
        if who == "other" and "leaks" not in self.faults:
            return Reply(403, {"message": "PermissionDenied: not authorized"})
        if method == "DELETE":
            self.deleted.append(path)
            return Reply(200, {})
        if path == "/pipelines/upload":
            assert body is not None and b"train-and-evaluate" in body and query["namespace"] == [self.namespace]
            self.pipelines["p1"] = {"name": query["name"][0]}
            return Reply(200, {"pipeline_id": "p1", "namespace": self.namespace})
        if path == "/pipelines/p1/versions":
            return Reply(200, {"pipeline_versions": [{"pipeline_version_id": "v1"}]})
        if path == "/experiments":
            assert json.loads(body or b"{}")["namespace"] == self.namespace
            return Reply(200, {"experiment_id": "e1"})
        if path == "/runs" and method == "POST":
            sent = json.loads(body or b"{}")
            run_id = f"r{len(self.runs) + 1}"
            created = "2000-01-01T00:00:00Z"  # before the Workloads the fake cluster stamps with the wall clock
            self.runs[run_id] = {"id": run_id, "index": len(self.runs) + 1, "created": created,
                                 "parameters": sent["runtime_config"]["parameters"], "job": f"pipeline-{run_id}"}
            if "off-queue" not in self.faults:
                self._trainjob(f"pipeline-{run_id}")
            return Reply(200, {"run_id": run_id})
        if path.startswith("/runs/") and path.removeprefix("/runs/") in self.runs:
            return Reply(200, self._record(self.runs[path.removeprefix("/runs/")]))
        if path == "/runs":
            return Reply(200, {"runs": [self._record(r) for r in self.runs.values()]})
        return Reply(404, {"message": f"no route {method} {path}"})


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Pipelines declared, the compiled example in place, the team member's token; returns the token folder."""
    monkeypatch.setattr(pipeline_observability, "pipelines_declared", lambda platform: True)
    package = tmp_path / "pipeline.yaml"
    package.write_text(yaml.safe_dump(PACKAGE) + "---\nplatforms: {kubernetes: {}}\n")
    monkeypatch.setattr(check, "PACKAGE", package)
    (tmp_path / "member").write_text(TOKEN + "\n")
    (tmp_path / "other").write_text(OTHER + "\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "member"))
    monkeypatch.setenv(check.OTHER_TOKEN_FILE_ENV, str(tmp_path / "other"))
    return tmp_path


def _accept(faults: tuple[str, ...] = ()) -> tuple[Any, FakePipelines, SimulatedCluster]:
    platform = platform_of(STACK)
    sim = SimulatedCluster(platform, capture_of(STACK))
    team = platform.teams[0].name
    api = FakePipelines(sim, team, faults)
    with sim.api:
        configuration = client.Configuration()
        configuration.host = sim.api.url
        kube = Kube(client.ApiClient(configuration))
        run = Run(platform, kube, f"{team}-accept", team, FakeClock(sim), stamp="20261201000000", pipelines=api)
        result = run_check(Check("pipeline", check.pipeline, 90 * 60, ""), run)
    return result, api, sim


def test_the_example_runs_twice_on_the_team_queue_and_another_team_is_refused(on: Path) -> None:
    result, api, _ = _accept()
    assert result.status == "passed", result
    steps = result.evidence["steps"]
    assert [line.split(":")[0] for line in steps] == ["upload", "run trainyard-accept-20261201000000-1", "record",
                                                      "queue", "run trainyard-accept-20261201000000-2", "rerun",
                                                      "isolation"]
    assert result.evidence["parameters"] == PARAMETERS  # the package's defaults, sent explicitly
    team = platform_of(STACK).teams[0]
    assert all(line.endswith(f"admitted by {team.queue}") for line in result.evidence["workloads"])
    assert {("GET", "/runs/r1", "other"), ("GET", "/runs", "other")} <= set(api.asked)
    assert sorted(api.deleted) == ["/experiments/e1", "/pipelines/p1", "/pipelines/p1/versions/v1", "/runs/r1",
                                   "/runs/r2"]
    assert "same result" in result.summary and "refused" in result.summary


@pytest.mark.parametrize(("fault", "says"), [
    ("fails", "ended FAILED: train FAILED"),
    ("drops-parameter", "run record: parameters recorded"),
    ("no-artifacts", "task prepare-data recorded no output artifact"),
    ("off-queue", "no Kueue Workload in"),
    ("cached", "differs from the first run"),
    ("differs", "differs from the first run"),
    ("leaks", "another team's member got HTTP 200"),
])
def test_each_misbehaviour_fails_the_check_and_everything_is_deleted(on: Path, fault: str, says: str) -> None:
    result, api, _ = _accept((fault,))
    assert result.status == "failed"
    assert says in result.summary, result.summary
    assert "/pipelines/p1" in api.deleted and "/experiments/e1" in api.deleted


def test_a_record_is_checked_task_by_task() -> None:
    def record(*tasks: dict[str, Any]) -> dict[str, Any]:
        return {"runtime_config": {"parameters": {}}, "run_details": {"task_details": list(tasks)}}

    empty = {"display_name": "train", "state": "SUCCEEDED", "outputs": {"model": {"artifact_ids": []}}}
    assert check._recorded(record(empty), {}) == ["task train recorded an output with no artifact"]
    bare = {"display_name": "train", "state": "SUCCEEDED"}
    assert check._recorded(record(bare), {}) == ["task train recorded no output artifact"]
    good = {"display_name": "train", "state": "SUCCEEDED", "outputs": {"model": {"artifact_ids": [7]}}}
    assert check._recorded(record(good), {}) == []
    assert check._recorded(record(), {}) == ["no task recorded"]


def test_without_the_other_token_the_isolation_step_says_it_was_not_checked(on: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(check.OTHER_TOKEN_FILE_ENV)
    result, _, _ = _accept()
    assert result.status == "passed"
    assert result.evidence["steps"][-1].startswith("isolation not checked (no token: set "
                                                   "TRAINYARD_WEB_OTHER_TOKEN_FILE")


def test_skipped_without_pipelines_and_failed_without_the_example(on: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    platform = platform_of(STACK)
    bare = Run(platform, None, "x", platform.teams[0].name, None)  # type: ignore[arg-type]
    monkeypatch.setattr(check, "PACKAGE", on / "absent.yaml")
    with pytest.raises(Failed, match=r"absent\.yaml is missing"):
        check.pipeline(bare)
    monkeypatch.setattr(pipeline_observability, "pipelines_declared", lambda platform: False)
    with pytest.raises(Skipped, match="declares no pipelines"):
        check.pipeline(bare)


def test_a_parameter_without_a_default_is_refused() -> None:
    package = copy.deepcopy(PACKAGE)
    del package["root"]["inputDefinitions"]["parameters"]["epochs"]["defaultValue"]
    with pytest.raises(Failed, match="parameter 'epochs' has no default"):
        check.parameters(yaml.safe_dump(package))
    assert check.parameters(yaml.safe_dump(PACKAGE)) == PARAMETERS


# --- verify ---------------------------------------------------------------------------------------------------

class Gateway:
    def __init__(self, fault: str = "") -> None:
        self.fault = fault
        self.asked: list[str] = []

    def get(self, url: str, headers: Mapping[str, str]) -> Answer:
        self.asked.append(url)
        if self.fault == "down":
            return Answer(0, "", "connection refused")
        if self.fault == "open" or (self.fault == "trusts-header" and USERID_HEADER in headers):
            return Answer(200, "")
        return Answer(401, "")


@pytest.mark.parametrize(("fault", "findings"), [("", 0), ("down", 1), ("open", 2), ("trusts-header", 1)])
def test_verify_checks_the_pipelines_api_refuses_without_a_token(monkeypatch: pytest.MonkeyPatch, fault: str,
                                                                 findings: int) -> None:
    platform = platform_of("onprem-lab")
    assert pipeline_api_findings(platform, Gateway(fault)) == []  # no pipelines declared: nothing asked
    monkeypatch.setattr(pipeline_observability, "pipelines_declared", lambda platform: True)
    gateway = Gateway(fault)
    found = pipeline_api_findings(platform, gateway)
    assert len(found) == findings, found
    assert platform.front_door is not None
    assert gateway.asked[0] == f"{platform.front_door.url}/pipeline/apis/v2beta1/healthz"
