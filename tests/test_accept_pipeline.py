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
from infra.live.mlmd import SERVICE, decode, encode, frame
from infra.live.pipelines import API_PATH, Reply, pipeline_api_findings
from infra.platform.kfp import observability as pipeline_observability
from tests.conftest import capture_of, platform_of
from tests.fake_cluster import TRAINER, FakeClock, SimulatedCluster

STACK = "local"
TOKEN, OTHER = "member-id-token", "other-team-id-token"
PARAMETERS = {"dataset_version": "v3", "epochs": 2, "learning_rate": 0.001}
PACKAGE: dict[str, Any] = {
    "pipelineInfo": {"name": "train-and-evaluate"}, "schemaVersion": "2.1.0", "sdkVersion": "kfp-2.16.0",
    "components": {"comp-train": {"executorLabel": "exec-train"}},
    "root": {"dag": {"tasks": {name: {"taskInfo": {"name": name}, "cachingOptions": {}} for name in (
        "prepare-data", "train", "evaluate")}}, "inputDefinitions": {"parameters": {
               "dataset_version": {"parameterType": "STRING", "defaultValue": "v3"},
               "epochs": {"parameterType": "NUMBER_INTEGER", "defaultValue": 2},
               "learning_rate": {"parameterType": "NUMBER_DOUBLE", "defaultValue": 0.001}}}}}
TASKS = ("prepare-data", "train", "evaluate")
# The artifacts the example's run records in ML Metadata: (type id, display name, logged properties).
ARTIFACTS: tuple[tuple[int, str, dict[str, Any]], ...] = (
    (11, "dataset", {}), (12, "model", {"framework": "torch"}), (13, "metrics", {"accuracy": 0.9125}))


def _trailer(status: int = 0, message: str = "") -> bytes:
    text = f"grpc-status:{status}\r\n" + (f"grpc-message:{message}\r\n" if message else "")
    return b"\x80" + len(text).to_bytes(4, "big") + text.encode()


def _property(key: str, value: Any) -> bytes:
    kind = 2 if isinstance(value, float) else 3 if isinstance(value, str) else 1
    return encode([(1, key), (2, encode([(kind, value)]))])


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
                  ("FAILED" if state == "FAILED" and name == "train" else "SUCCEEDED" if done else "RUNNING")}
                 for name in TASKS]
        parameters = dict(run["parameters"])
        if "drops-parameter" in self.faults:
            parameters.pop("epochs", None)
        if "differs" in self.faults and second:
            tasks = tasks[:-1]
        return {"run_id": run["id"], "state": state, "created_at": run["created"],
                "finished_at": "2999-01-01T00:00:00Z" if done else None,
                "runtime_config": {"parameters": parameters},
                "run_details": {"task_details": [{"display_name": "train-and-evaluate", "state": state}, *tasks]}}

    def _mlmd(self, method: str, body: bytes) -> Reply:
        """ML Metadata's answers as gRPC-Web frames: the run's context, then its artifacts."""
        request = dict(decode(body[5:]))
        if method == "GetContextByTypeAndName":
            run_id = bytes(request[2]).decode()  # type: ignore[arg-type]
            if request[1] != b"system.PipelineRun" or run_id not in self.runs or "no-context" in self.faults:
                return Reply(200, _trailer(5, "context not found"))
            return Reply(200, frame(encode([(1, encode([(1, 100 + self.runs[run_id]["index"]), (3, run_id)]))]))
                         + _trailer())
        if method == "GetArtifactsByContext":
            index = int(request[1]) - 100  # type: ignore[arg-type]
            found = b""
            for type_id, name, extra in ([] if "no-artifacts" in self.faults else ARTIFACTS):
                props = {**extra, "display_name": name}
                if "metric-drifts" in self.faults and index > 1 and "accuracy" in props:
                    props["accuracy"] = 0.9311
                artifact = encode([(1, index * 10 + type_id), (2, type_id), (3, f"s3://team/run{index}/{name}"),
                                   (6, 2), *((5, _property(k, v)) for k, v in props.items())])
                found += encode([(1, artifact)])
            return Reply(200, frame(found) + _trailer())
        return Reply(200, _trailer(12, f"no method {method}"))

    def call(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Reply:
        parsed = urlparse(url)
        who = {f"Bearer {TOKEN}": "member", f"Bearer {OTHER}": "other"}.get(headers.get("Authorization", ""))
        if parsed.path.startswith(f"/{SERVICE.strip('/')}/"):
            assert headers["Content-Type"] == "application/grpc-web+proto" and who == "member" and body
            return self._mlmd(parsed.path.rsplit("/", 1)[1], body)
        path, query = parsed.path.split(API_PATH, 1)[1], parse_qs(parsed.query)
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
            assert body.count(b"enableCache: false") == len(TASKS)  # uploaded with caching off
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
    """Pipelines declared, the compiled example in place, the team member's token; returns the token folder. The
    stack's run is taken first: made with the switch on, it would be cached on disk for every other test."""
    capture_of(STACK)
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
    ("no-artifacts", "ML Metadata holds no artifact of the run"),
    ("no-context", "ML Metadata for run r1: grpc-status 5 context not found"),
    ("metric-drifts", "accuracy = 0.9311 in the rerun, 0.9125 in the first run"),
    ("off-queue", "no Kueue Workload in"),
    ("cached", "tasks differ: evaluate SKIPPED"),
    ("differs", "differs from the first run"),
    ("leaks", "another team's member got HTTP 200"),
])
def test_each_misbehaviour_fails_the_check_and_everything_is_deleted(on: Path, fault: str, says: str) -> None:
    result, api, _ = _accept((fault,))
    assert result.status == "failed"
    assert says in result.summary, result.summary
    assert "/pipelines/p1" in api.deleted and "/experiments/e1" in api.deleted


def test_a_record_is_checked_task_and_artifact_by_artifact() -> None:
    from infra.live.mlmd import Artifact

    record = {"runtime_config": {"parameters": {"a": 1}}, "run_details": {"task_details": [
        {"display_name": "train", "state": "SUCCEEDED"}, {"display_name": "branch", "state": "SKIPPED"}]}}
    good = Artifact(1, 2, "s3://bucket/run/model", 2, {"display_name": "model"})
    assert check._recorded(record, {"a": 1}, [good]) == []
    assert check._recorded(record, {"a": 1}, []) == ["ML Metadata holds no artifact of the run"]
    gone = Artifact(1, 2, "s3://bucket/run/model", 4, {})
    assert check._recorded(record, {"a": 1}, [gone]) == [
        "artifact 1 is not LIVE with a URI (state 4, uri 's3://bucket/run/model')"]
    failed = {**record, "run_details": {"task_details": [{"display_name": "train", "state": "FAILED"}]}}
    assert check._recorded(failed, {"a": 2}, [good]) == ['parameters recorded {"a": 1}, sent {"a": 2}',
                                                         "task train is FAILED"]


def test_doubles_compare_to_a_relative_tolerance_at_its_edge() -> None:
    from infra.live.mlmd import Artifact

    record = {"runtime_config": {"parameters": {}}, "run_details": {"task_details": []}}

    def metrics(value: float) -> tuple[dict[str, Any], list[Artifact]]:
        return record, [Artifact(1, 3, "u", 2, {"display_name": "metrics", "accuracy": value})]

    assert check.difference(metrics(1.0), metrics(1.0 + 0.9e-6)) is None
    assert check.difference(metrics(1.0), metrics(1.0 + 1.1e-6)) is not None


def test_a_rerun_differs_only_where_it_names_its_own_run() -> None:
    """The run id, its TrainJob, its URIs and the registry version it got differ between two runs by design; the
    lineage's data, code and metrics may not, at any depth of a recorded struct."""
    from infra.live.mlmd import Artifact

    record = {"runtime_config": {"parameters": {}}, "run_details": {"task_details": []}}

    def run(run_id: str, commit: str = "c0ffee") -> tuple[dict[str, Any], list[Artifact]]:
        lineage = {"run_id": run_id, "model": f"s3://b/{run_id}/model", "git_commit": commit, "dataset_version": "d1"}
        registration = {"model_version_id": run_id[-1], "model_version": run_id, "registered_model_id": "1"}
        return record, [Artifact(1, 3, f"s3://b/{run_id}/lineage", 2, {"display_name": "lineage", "lineage": lineage,
                                                                       "trainjob": f"vision/{run_id}"}),
                        Artifact(2, 3, f"s3://b/{run_id}/reg", 2, {"display_name": "registration", **registration})]

    assert check.difference(run("run-1"), run("run-2")) is None
    changed = check.difference(run("run-1"), run("run-2", commit="bad"))
    assert changed is not None and "lineage" in changed


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
    # the parameters the example leaves to its caller: taken from what accept supplies, refused when it has none
    package["root"]["inputDefinitions"]["parameters"]["queue"] = {"parameterType": "STRING"}
    package["root"]["inputDefinitions"]["parameters"]["epochs"]["defaultValue"] = 2
    assert check.parameters(yaml.safe_dump(package), {"queue": "lq-vision"}) == {**PARAMETERS, "queue": "lq-vision"}
    with pytest.raises(Failed, match="parameter 'queue' has no default"):
        check.parameters(yaml.safe_dump(package), {"queue": ""})


def test_the_run_registers_in_its_own_teams_registry_not_the_default_teams() -> None:
    """registry_url defaults to team vision's registry; accept's run is another team's, whose registry it names
    (empty on a stack without models: the step then registers nothing). Other defaults stay as they ship."""
    package = copy.deepcopy(PACKAGE)
    package["root"]["inputDefinitions"]["parameters"]["registry_url"] = {
        "parameterType": "STRING", "defaultValue": "http://model-registry-service.vision-models.svc.cluster.local:8080"}
    own = "http://model-registry-service.demo-models.svc.cluster.local:8080"
    sent = check.parameters(yaml.safe_dump(package), {"registry_url": own, "epochs": 99})
    assert sent == {**PARAMETERS, "registry_url": own}
    assert check.parameters(yaml.safe_dump(package), {"registry_url": ""})["registry_url"] == ""


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
    monkeypatch.setattr(pipeline_observability, "pipelines_declared", lambda platform: False)
    assert pipeline_api_findings(platform, Gateway(fault)) == []  # no pipelines declared: nothing asked
    monkeypatch.undo()
    gateway = Gateway(fault)
    found = pipeline_api_findings(platform, gateway)
    assert len(found) == findings, found
    assert platform.front_door is not None
    assert gateway.asked[0] == f"{platform.front_door.url}/pipeline/apis/v2beta1/healthz"


def test_an_artifact_decodes_from_its_wire_bytes_written_by_hand() -> None:
    """ml_metadata.Artifact{id: 5, type_id: 2, uri: "s3://b", state: LIVE, custom_properties: {acc: 0.5}}, encoded
    by hand from metadata_store.proto's field numbers (not by this code's encoder)."""
    from infra.live.mlmd import artifact, unframe

    wire = bytes.fromhex("0805" "1002" "1a06" + b"s3://b".hex() + "2a10" "0a03" + b"acc".hex()
                         + "1209" "11" "000000000000e03f" "3002")
    found = artifact(wire)
    assert (found.id, found.type_id, found.uri, found.state, found.properties) == (5, 2, "s3://b", 2, {"acc": 0.5})
    assert unframe(frame(wire) + _trailer()) == wire
    with pytest.raises(Exception, match="grpc-status 7 denied"):
        unframe(_trailer(7, "denied"))
