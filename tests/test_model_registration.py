"""examples/pipelines/register.py, the pipeline's last step: the model that passed the quality gate becomes a version in
the team's own Model Registry, with its lineage.

- Against a fake registry (an HTTP server on 127.0.0.1) that answers only the Model Registry 0.3.7 REST calls the step
  may make, and refuses a body or query field the API does not define: the names below are written here from
  `api/openapi/model-registry.yaml` at v0.3.7 (kubeflow/model-registry), nothing of it is vendored.
- The step registers a model, a version named after the run with every lineage property, and an artifact at the
  model's place in the team bucket; a rerun (same run id) registers nothing twice; another run adds a version to the
  same model; a registry error or an unreachable registry fails the step with a message naming the call.
- The compiled pipeline runs the step last, behind the quality gate, with every pipeline parameter, the run id as the
  driver resolves it, the trained model and the evaluation's metrics; its registry default is team vision's.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from infra.spec.models.model import ModelsFacts, ModelsSpec, derive_models
from tests.conftest import ALL_STACKS, ROOT, platform_of
from tests.pipelines import example_module

HERE = ROOT / "examples" / "pipelines"
COMPILED = HERE / "train_pipeline.yaml"
API = "/api/model_registry/v1alpha3"
RUN_ID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
OTHER_RUN = "11111111-2222-3333-4444-555555555555"
RESOLVED_RUN_ID = {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}}  # what the driver resolves to the run id
DIGEST = "docker.io/pytorch/pytorch@sha256:" + "ab" * 32

# ---- Model Registry 0.3.7, api/openapi/model-registry.yaml (read at tag v0.3.7) -------------------------------------
# Fields of the create bodies (BaseResourceCreate + the type's own, through their allOf).
BASE_CREATE = {"customProperties", "description", "externalId", "name"}
REGISTERED_MODEL_CREATE = BASE_CREATE | {"owner", "state", "readme", "maturity", "language", "tasks", "provider",
                                         "logo", "license", "licenseLink", "libraryName"}
MODEL_VERSION_CREATE = BASE_CREATE | {"registeredModelId", "state", "author"}
MODEL_ARTIFACT_CREATE = BASE_CREATE | {"artifactType", "modelFormatName", "storageKey", "storagePath",
                                       "modelFormatVersion", "serviceAccountName", "modelSourceKind",
                                       "modelSourceClass", "modelSourceGroup", "modelSourceId", "modelSourceName",
                                       "uri", "state"}
REQUIRED = {"registered_models": {"name"}, "model_versions": {"name", "registeredModelId"}}
# MetadataValue: oneOf by metadataType, each with its one value field.
METADATA_VALUE = {"MetadataStringValue": "string_value", "MetadataDoubleValue": "double_value",
                  "MetadataIntValue": "int_value", "MetadataBoolValue": "bool_value"}
# Query parameters of the find paths (name, externalId, parentResourceId) and of a version's artifact list.
FIND_QUERY = {"name", "externalId", "parentResourceId"}
ARTIFACTS_QUERY = {"filterQuery", "name", "externalId", "artifactType", "pageSize", "orderBy", "sortOrder",
                   "nextPageToken"}


class FakeRegistry:
    """The registry's state and the requests it saw; `fail` makes one (method, path suffix) answer 500."""

    def __init__(self) -> None:
        self.models: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]], dict[str, Any] | None]] = []
        self.problems: list[str] = []
        self.fail: tuple[str, str] | None = None
        self.race = False  # the next find of a registered model misses it: another run creates it meanwhile
        self.lock = threading.Lock()

    def next_id(self) -> str:
        return str(len(self.models) + len(self.versions) + len(self.artifacts) + 1)  # int64 as a string

    def body_problems(self, kind: str, body: dict[str, Any], allowed: set[str]) -> list[str]:
        found = [f"{kind}: field '{f}' is not in the API" for f in sorted(set(body) - allowed)]
        found += [f"{kind}: required field '{f}' missing" for f in sorted(REQUIRED.get(kind, set()) - set(body))]
        for key, value in body.get("customProperties", {}).items():
            field = METADATA_VALUE.get(value.get("metadataType", ""))
            if field is None or set(value) != {"metadataType", field}:
                found.append(f"{kind}: custom property {key} is not a MetadataValue: {value}")
        return found

    def answer(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        parsed = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parsed.query)
        path = parsed.path.removeprefix(API)
        self.requests.append((method, path, query, body))
        if not parsed.path.startswith(API):
            self.problems.append(f"{method} {parsed.path}: not under {API}")
            return 404, {"code": "404", "message": "no such path"}
        if self.fail and method == self.fail[0] and path.endswith(self.fail[1]):
            return 500, {"code": "500", "message": "database is locked"}
        parts = path.strip("/").split("/")
        one = {k: v[0] for k, v in query.items()}
        if method == "GET" and parts in (["registered_model"], ["model_version"]):
            self.check_query(path, query, FIND_QUERY)
            pool = self.models if parts == ["registered_model"] else self.versions
            if self.race and parts == ["registered_model"]:
                self.race = False
                return 404, {"code": "404", "message": "not found"}
            hit = next((e for e in pool.values() if e["name"] == one.get("name") and
                        one.get("parentResourceId") in (None, e.get("registeredModelId"))), None)
            return (200, hit) if hit else (404, {"code": "404", "message": "not found"})
        if method == "POST" and parts in (["registered_models"], ["model_versions"]):
            assert body is not None
            kind = parts[0]
            allowed = REGISTERED_MODEL_CREATE if kind == "registered_models" else MODEL_VERSION_CREATE
            self.problems += self.body_problems(kind, body, allowed)
            pool = self.models if kind == "registered_models" else self.versions
            if any(e["name"] == body.get("name") and e.get("registeredModelId") == body.get("registeredModelId")
                   for e in pool.values()):
                return 409, {"code": "409", "message": "already exists"}
            entity = {**body, "id": self.next_id(), "state": "LIVE"}
            pool[entity["id"]] = entity
            return 201, entity
        if len(parts) == 3 and parts[0] == "model_versions" and parts[2] == "artifacts":
            if parts[1] not in self.versions:
                return 404, {"code": "404", "message": f"no model version {parts[1]}"}
            if method == "GET":
                self.check_query(path, query, ARTIFACTS_QUERY)
                items = [a for a in self.artifacts.values() if a["_version"] == parts[1]
                         and one.get("name") in (None, a["name"])]
                shown = [{k: v for k, v in a.items() if k != "_version"} for a in items]
                return 200, {"items": shown, "size": len(shown), "pageSize": 100, "nextPageToken": ""}
            assert body is not None
            self.problems += self.body_problems("model_artifacts", body, MODEL_ARTIFACT_CREATE)
            if body.get("artifactType") != "model-artifact":
                self.problems.append(f"artifact type {body.get('artifactType')}: the discriminator is model-artifact")
            entity = {**body, "id": self.next_id(), "_version": parts[1]}
            self.artifacts[entity["id"]] = entity
            return 201, {k: v for k, v in entity.items() if k != "_version"}
        self.problems.append(f"{method} {path}: not a call registration makes")
        return 404, {"code": "404", "message": "no such path"}

    def check_query(self, path: str, query: dict[str, list[str]], allowed: set[str]) -> None:
        self.problems += [f"GET {path}: query parameter '{q}' is not in the API" for q in sorted(set(query) - allowed)]


@pytest.fixture
def registry() -> Iterator[tuple[FakeRegistry, str]]:
    state = FakeRegistry()

    class Handler(BaseHTTPRequestHandler):
        def handle_one(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            with state.lock:
                status, answer = state.answer(method, self.path, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.handle_one("GET")

        def do_POST(self) -> None:
            self.handle_one("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def register_module() -> ModuleType:
    return example_module("register.py")


@cache
def compiled() -> dict[str, Any]:
    spec: dict[str, Any] = next(iter(yaml.safe_load_all(COMPILED.read_text(encoding="utf-8"))))
    return spec


def root_parameters() -> dict[str, Any]:
    """The pipeline's parameters as a run sends them: the defaults, and the two its caller sets."""
    declared = compiled()["root"]["inputDefinitions"]["parameters"]
    return {name: item.get("defaultValue", {"queue": "vision", "git_commit": "c0ffee"}.get(name))
            for name, item in declared.items()}


def executor_input(url: str, out: Path, run_id: str = RUN_ID) -> dict[str, Any]:
    """What the KFP launcher hands the step as `{{$}}`: its input parameters, the model and metrics artifacts with the
    metadata the train and evaluate steps recorded as ML Metadata returns it (a list as {"list": [...]}, numbers as
    doubles: KFP 2.16.0 metadata/converter.go), the output file."""
    values = {**root_parameters(), "registry_url": url, "run_id": run_id,
              "dataset_version": "sha256:" + "d" * 64}
    model = {"name": "model", "uri": f"s3://team-bucket/pipelines/vision/{run_id}/train/model",
             "metadata": {"source_sha256": "5" * 64, "trainjob": "vision/train-eval-0f1e2d3c4b5a",
                          "training_images": {"list": [DIGEST]},
                          "step_images": {"list": ["docker.io/library/python@sha256:" + "cd" * 32]}}}
    metrics = {"name": "metrics", "uri": f"s3://team-bucket/pipelines/vision/{run_id}/evaluate/metrics",
               "metadata": {"accuracy": 0.93, "log_loss": 0.21, "test_rows": 360.0, "min_accuracy": 0.8}}
    return {"inputs": {"parameterValues": values,
                       "artifacts": {"model": {"artifacts": [model]}, "metrics": {"artifacts": [metrics]}}},
            "outputs": {"outputFile": str(out)}}


def run(given: dict[str, Any]) -> None:
    register_module().main(["--executor-input", json.dumps(given)])


def posts(state: FakeRegistry) -> list[str]:
    return [path for method, path, _, _ in state.requests if method == "POST"]


def plain(value: dict[str, Any]) -> object:
    return value[METADATA_VALUE[value["metadataType"]]]


# ---- registration against the fake registry -------------------------------------------------------------------------

def test_a_run_registers_a_model_a_version_with_its_lineage_and_the_artifact_in_the_team_bucket(
        registry: tuple[FakeRegistry, str], tmp_path: Path) -> None:
    state, url = registry
    run(executor_input(url, tmp_path / "out.json"))
    assert state.problems == []
    assert [m["name"] for m in state.models.values()] == ["train-eval"]  # the model_name default: the pipeline's
    (version,) = state.versions.values()
    assert version["name"] == RUN_ID and version["registeredModelId"] == next(iter(state.models))
    properties = {key: plain(value) for key, value in version["customProperties"].items()}
    assert {key: properties[key] for key in ("kfp_run_id", "dataset", "dataset_version", "git_commit",
                                             "training_images", "source_sha256")} == {
        "kfp_run_id": RUN_ID, "dataset": "digits", "dataset_version": "sha256:" + "d" * 64, "git_commit": "c0ffee",
        "training_images": DIGEST, "source_sha256": "5" * 64}
    assert {properties[f"metric_{m}"] for m in ("accuracy", "log_loss")} == {0.93, 0.21}
    assert version["customProperties"]["metric_accuracy"]["metadataType"] == "MetadataDoubleValue"
    parameters = {key.removeprefix("param_"): value for key, value in properties.items() if key.startswith("param_")}
    assert set(parameters) == set(compiled()["root"]["inputDefinitions"]["parameters"])  # every one, no other
    assert parameters["epochs"] == 20 and parameters["learning_rate"] == 0.05 and parameters["queue"] == "vision"
    assert "stage" not in properties  # promotion is a reviewed step of its own (docs/model-lifecycle.md)
    (artifact,) = state.artifacts.values()
    assert artifact["uri"] == f"s3://team-bucket/pipelines/vision/{RUN_ID}/train/model"  # where the run wrote it
    assert (artifact["modelSourceKind"], artifact["modelSourceId"]) == ("kfp", RUN_ID)
    recorded = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert recorded["artifacts"]["registration"]["artifacts"][0]["metadata"] == {
        "registered_model_id": next(iter(state.models)), "model_version_id": version["id"],
        "model_artifact_id": artifact["id"], "model_name": "train-eval", "model_version": RUN_ID,
        "uri": artifact["uri"]}


def test_a_rerun_of_the_same_run_registers_nothing_twice(registry: tuple[FakeRegistry, str], tmp_path: Path) -> None:
    state, url = registry
    given = executor_input(url, tmp_path / "out.json")
    run(given)
    first = posts(state)
    assert first == ["/registered_models", "/model_versions", f"/model_versions/{next(iter(state.versions))}/artifacts"]
    run(given)  # a retried step, or a retried run: the same run id
    assert posts(state) == first
    assert (len(state.models), len(state.versions), len(state.artifacts)) == (1, 1, 1) and state.problems == []


def test_another_run_is_another_version_of_the_same_model(registry: tuple[FakeRegistry, str], tmp_path: Path) -> None:
    state, url = registry
    run(executor_input(url, tmp_path / "one.json"))
    run(executor_input(url, tmp_path / "two.json", run_id=OTHER_RUN))
    assert len(state.models) == 1
    assert sorted(v["name"] for v in state.versions.values()) == sorted([RUN_ID, OTHER_RUN])
    assert sorted(a["uri"] for a in state.artifacts.values()) == sorted(
        f"s3://team-bucket/pipelines/vision/{r}/train/model" for r in (RUN_ID, OTHER_RUN))


def test_a_model_another_run_creates_meanwhile_is_found_not_duplicated(registry: tuple[FakeRegistry, str],
                                                                        tmp_path: Path) -> None:
    state, url = registry
    run(executor_input(url, tmp_path / "one.json"))
    state.race = True  # the second run looks before the first one's model is visible, then creates: 409
    run(executor_input(url, tmp_path / "two.json", run_id=OTHER_RUN))
    assert len(state.models) == 1 and len(state.versions) == 2 and state.problems == []
    assert posts(state).count("/registered_models") == 2  # the refused create, then the model found by name


def test_a_registry_error_fails_the_step_with_the_call_and_the_registrys_message(
        registry: tuple[FakeRegistry, str], tmp_path: Path) -> None:
    state, url = registry
    state.fail = ("POST", "/model_versions")
    done = subprocess.run([sys.executable, str(HERE / "register.py"), "--executor-input",
                           json.dumps(executor_input(url, tmp_path / "out.json"))],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert done.stderr.strip() == (f"register: model registry {url}: POST {API}/model_versions answered 500: "
                                   "database is locked")
    assert state.versions == {} and not (tmp_path / "out.json").exists()


def test_an_unreachable_registry_fails_the_step_naming_it(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}"  # nothing listens once the socket is closed
    with pytest.raises(SystemExit) as failed:
        run(executor_input(url, tmp_path / "out.json"))
    assert str(failed.value).startswith(f"register: model registry {url} unreachable (")
    assert "TeamModels.registry_url" in str(failed.value)


def test_without_a_registry_the_step_registers_nothing_and_succeeds(registry: tuple[FakeRegistry, str],
                                                                     tmp_path: Path) -> None:
    """A stack without `models` runs the example with registry_url '' (accept sends it so): no call, no failure."""
    state, _ = registry
    run(executor_input("", tmp_path / "out.json"))
    assert state.requests == []
    recorded = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert recorded["artifacts"]["registration"]["artifacts"][0]["metadata"] == {}


def test_the_fake_refuses_a_field_the_api_does_not_define(registry: tuple[FakeRegistry, str]) -> None:
    """The oracle above can fail: a misspelt field or a value that is not a MetadataValue is a problem."""
    state, _ = registry
    state.answer("POST", f"{API}/model_versions", {"name": "v", "registeredModelID": "1",
                                                   "customProperties": {"x": {"string_value": "y"}}})
    assert state.problems == ["model_versions: field 'registeredModelID' is not in the API",
                              "model_versions: required field 'registeredModelId' missing",
                              "model_versions: custom property x is not a MetadataValue: {'string_value': 'y'}"]


def test_a_recorded_list_reads_the_same_from_ml_metadata_or_as_written() -> None:
    joined = register_module().joined
    assert joined({"list": [DIGEST, "b"]}) == joined([DIGEST, "b"]) == f"{DIGEST},b"
    assert joined(None) == "" and joined("one") == "one"


def test_custom_property_values_keep_their_type() -> None:
    value = register_module().metadata_value
    assert value(True) == {"metadataType": "MetadataBoolValue", "bool_value": True}
    assert value(20) == {"metadataType": "MetadataIntValue", "int_value": "20"}  # int64 is a string in JSON
    assert value(0.05) == {"metadataType": "MetadataDoubleValue", "double_value": 0.05}
    assert value(["a", "b"]) == {"metadataType": "MetadataStringValue", "string_value": '["a", "b"]'}


# ---- the step in the compiled pipeline ------------------------------------------------------------------------------

def test_the_register_step_runs_last_behind_the_quality_gate_with_every_parameter() -> None:
    spec = compiled()
    inner = spec["components"]["comp-condition-1"]["dag"]["tasks"]
    gate = inner["condition-2"]
    assert gate["triggerPolicy"]["condition"] == "inputs.parameter_values['pipelinechannel--evaluate-passed'] == 'true'"
    tasks = spec["components"]["comp-condition-2"]["dag"]["tasks"]
    assert set(tasks) == {"release", "register"} and tasks["register"]["dependentTasks"] == ["release"]
    step = tasks["register"]
    assert step["inputs"]["artifacts"] == {"model": {"componentInputArtifact": "pipelinechannel--train-model"},
                                           "metrics": {"componentInputArtifact": "pipelinechannel--evaluate-metrics"}}
    assert gate["inputs"]["artifacts"]["pipelinechannel--evaluate-metrics"]["taskOutputArtifact"] == \
        {"outputArtifactKey": "metrics", "producerTask": "evaluate"}
    parameters = step["inputs"]["parameters"]
    for name in spec["root"]["inputDefinitions"]["parameters"]:  # a parameter added later must reach the registry
        assert parameters[name] == {"componentInputParameter": f"pipelinechannel--{name}"}, name
    assert parameters["run_id"] == RESOLVED_RUN_ID
    assert parameters["dataset_version"] == {"componentInputParameter": "pipelinechannel--prepare-dataset_version"}
    assert set(parameters) - set(spec["root"]["inputDefinitions"]["parameters"]) == set(register_module().RUN_INPUTS)
    container = spec["deploymentSpec"]["executors"]["exec-register"]["container"]
    assert container["args"] == ["--executor-input", "{{$}}"]
    assert step["retryPolicy"]["maxRetryCount"] == 2 and step["cachingOptions"] == {}  # idempotent, never cached


def test_the_run_id_reaches_every_step_as_an_input_the_driver_resolves() -> None:
    """KFP 2.16.0's driver resolves {{$.pipeline_job_uuid}} as a task input's constant, and the launcher leaves it
    untouched in a container's args: in args it would reach the step as the placeholder's own text."""
    spec = compiled()
    for name, executor in spec["deploymentSpec"]["executors"].items():
        assert "{{$.pipeline_job_uuid}}" not in json.dumps(executor["container"]["args"]), name
    tasks = {**spec["components"]["comp-condition-1"]["dag"]["tasks"],
             **spec["components"]["comp-condition-2"]["dag"]["tasks"]}
    assert {name for name, task in tasks.items() if "run_id" in task["inputs"].get("parameters", {})} == \
        {"train", "release", "register"}
    for name in ("train", "release"):
        assert tasks[name]["inputs"]["parameters"]["run_id"] == RESOLVED_RUN_ID


def vision_models(stack: str) -> ModelsFacts:
    """Team vision's registry and artifact prefix on a stack: its own `models` facts, or the ones the spec derives
    from its storage where it declares none yet."""
    platform = platform_of(stack)
    spec = ModelsSpec.model_validate({"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}})
    facts = platform.models or derive_models(spec, platform.storage, {t.name: None for t in platform.teams})
    assert facts is not None
    return facts


@pytest.mark.parametrize("stack", [s for s in ALL_STACKS if any(t.name == "vision" for t in platform_of(s).teams)])
def test_the_registry_default_is_team_visions_and_its_artifacts_are_in_its_bucket(stack: str) -> None:
    defaults = compiled()["root"]["inputDefinitions"]["parameters"]
    team = vision_models(stack).team("vision")
    assert defaults["registry_url"]["defaultValue"] == team.registry_url
    platform = platform_of(stack)
    runs_in = next(t for t in platform.teams if t.name == "vision").namespaces[0]  # where its pipeline runs
    store = platform.pipelines.store(runs_in) if platform.pipelines else None
    if team.artifacts:  # the run's model lands under the team's pipeline root, inside the bucket it may serve from
        assert store is not None and store.root.startswith(team.artifacts)
    else:
        assert store is None
