"""`trainyard accept`'s `pipeline` check (issue 30 point 7, docs/acceptance.md): the example pipeline, end to end
through the Kubeflow Pipelines REST API (v2beta1) behind the front door, as a member of the accept team.

Steps, each reported in the evidence: upload the compiled example into the team's namespace, with caching off
for its tasks (as the SDK's `enable_caching=False` does: a step served from the cache proves nothing, and every
accept run sends the same parameters); run it with its declared parameters (their defaults, sent explicitly) in an
experiment of that namespace; wait for SUCCEEDED; check the run records the parameters as sent, no task failed, and
ML Metadata holds its artifacts (each LIVE, with a URI: infra/live/mlmd.py); check the run's training went through
the team's queue (the Kueue Workloads created in the namespace while it ran, admitted by the team's ClusterQueue);
run it again with the same parameters and compare: the same parameters, the same tasks in the same states, the same
artifacts with the same properties (logged metrics included; doubles to a relative 1e-6); as a member of another
team, be refused the run and the namespace's run list. Everything created through the API is deleted at the end,
whatever happened (the artifacts stay in the team's store and in ML Metadata, like any run's).

Tokens: a member of the team (engineer) in $TRAINYARD_WEB_TOKEN_FILE, as the `front-door` check; a member of
another team in $TRAINYARD_WEB_OTHER_TOKEN_FILE (without it the refusal step is reported as not checked).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import yaml

from infra.accept.runner import Failed, Run, Skipped
from infra.accept.web import token_from
from infra.kit.paths import ROOT
from infra.live.mlmd import LIVE, Artifact, Mlmd, MlmdError
from infra.live.pipelines import HttpsPipelinesApi, PipelinesApi, base_url, multipart
from infra.platform.kfp import observability as pipeline_observability

# The compiled example pipeline (issue 30 point 5 writes it; change here if it lands elsewhere).
PACKAGE = ROOT / "examples" / "pipelines" / "train_pipeline.yaml"
OTHER_TOKEN_FILE_ENV = "TRAINYARD_WEB_OTHER_TOKEN_FILE"
FINAL = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")
REFUSED = (401, 403)
POLL_SECONDS = 15.0
RELATIVE_TOLERANCE = 1e-6  # logged doubles of two runs of the same code, data and parameters


# The parameters the example leaves to its caller (examples/pipelines/submit.py): the code's commit, the team's queue;
# and the one whose default is one team's (vision's registry), which accept sets to its own team's.
CALLER_PARAMETERS = ("git_commit", "queue")
TEAM_PARAMETERS = ("registry_url",)


def parameters(package: str, supplied: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The pipeline's root parameters with their defaults (the compiled IR's root.inputDefinitions), and for those
    the example leaves to its caller, the values `supplied` (the commit under test, the team's LocalQueue); a
    supplied team parameter replaces its default (the team's own registry)."""
    supplied = supplied or {}
    spec = next((doc for doc in yaml.safe_load_all(package) if isinstance(doc, dict) and "root" in doc), None)
    if spec is None:
        raise Failed(f"{PACKAGE}: no pipeline spec (a document with `root`): compile the example with the KFP SDK")
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    missing = [name for name, item in declared.items() if "defaultValue" not in item
               and not (name in CALLER_PARAMETERS and supplied.get(name))]
    if missing:
        raise Failed(f"{PACKAGE}: parameter '{missing[0]}' has no default: accept runs the example as it ships")
    return {name: supplied[name] if name in supplied and (name in TEAM_PARAMETERS or "defaultValue" not in item)
            else item["defaultValue"] if "defaultValue" in item else supplied[name]
            for name, item in sorted(declared.items())}


def without_cache(package: str) -> bytes:
    """The package with every task's cachingOptions.enableCache false (root's DAG and each component's)."""
    docs = list(yaml.safe_load_all(package))
    for doc in docs:
        if not isinstance(doc, dict) or "root" not in doc:
            continue
        dags = [doc["root"].get("dag", {}), *(c.get("dag", {}) for c in doc.get("components", {}).values())]
        for dag in dags:
            for task in dag.get("tasks", {}).values():
                task["cachingOptions"] = {"enableCache": False}
    return yaml.safe_dump_all(docs, sort_keys=False).encode()


class Session:
    """Calls as one person (a bearer token); a refusal or no answer fails the check naming the step."""

    def __init__(self, api: PipelinesApi, base: str, token: str) -> None:
        self.api, self.base, self.token = api, base, token

    def status(self, method: str, path: str, body: bytes | None = None, kind: str = "application/json") -> tuple[
            int, Any]:
        headers = {"Authorization": f"Bearer {self.token}", **({"Content-Type": kind} if body is not None else {})}
        reply = self.api.call(method, f"{self.base}{path}", headers, body)
        if reply.status == 0:
            raise Failed(f"{method} {path}: no answer through the front door ({reply.error})")
        return reply.status, reply.body

    def json(self, method: str, path: str, payload: Any = None, *, raw: bytes | None = None,
             kind: str = "application/json") -> Any:
        body = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else None)
        status, answer = self.status(method, path, body, kind)
        if not 200 <= status < 300:
            message = answer.get("message", answer) if isinstance(answer, dict) else answer
            raise Failed(f"{method} {path}: HTTP {status}: {message}")
        return answer or {}


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _tasks(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, state) of the run's tasks (KFP 2.16 reports the workflow's nodes), sorted."""
    return sorted((str(task.get("display_name", "")), str(task.get("state", "")))
                  for task in record.get("run_details", {}).get("task_details", []) or [])


def _recorded(record: dict[str, Any], sent: dict[str, Any], artifacts: list[Artifact]) -> list[str]:
    """What the run's record gets wrong: the parameters as sent, no task failed, its artifacts in ML Metadata."""
    problems = []
    kept = record.get("runtime_config", {}).get("parameters", {})
    if kept != sent:
        problems.append(f"parameters recorded {json.dumps(kept, sort_keys=True)}, sent "
                        f"{json.dumps(sent, sort_keys=True)}")
    problems += [f"task {name} is {state}" for name, state in _tasks(record) if state not in ("SUCCEEDED", "SKIPPED")]
    if not artifacts:
        problems.append("ML Metadata holds no artifact of the run")
    problems += [f"artifact {a.id} is not LIVE with a URI (state {a.state}, uri '{a.uri}')" for a in artifacts
                 if a.state != LIVE or not a.uri]
    return problems


# What names the run rather than describing its result: the run id, the TrainJob it submitted, the URIs under its own
# pipeline root, the model version the registry gave it (examples/pipelines/steps.py, register.py). A rerun differs
# there by design; everything else it records must be the same.
RUN_IDENTITY = frozenset({"run_id", "trainjob", "model", "uri", "model_source_uri", "model_version",
                          "model_version_id", "model_artifact_id"})


def _same(one: Any, other: Any) -> bool:
    if isinstance(one, float) and isinstance(other, float):
        return math.isclose(one, other, rel_tol=RELATIVE_TOLERANCE)
    if isinstance(one, dict) and isinstance(other, dict):
        keys = (set(one) | set(other)) - RUN_IDENTITY
        return all(_same(one.get(key), other.get(key)) for key in keys)
    return bool(one == other)


def _keyed(artifacts: list[Artifact]) -> dict[str, Artifact]:
    """The artifacts by type and display name (the URIs differ: each run writes under its own id)."""
    return {f"{a.type_id}/{a.properties.get('display_name', a.id)}": a for a in artifacts}


def difference(first: tuple[dict[str, Any], list[Artifact]], rerun: tuple[dict[str, Any], list[Artifact]]) -> \
        str | None:
    """The first way the rerun differs from the first run, or None."""
    (one, one_artifacts), (two, two_artifacts) = first, rerun
    params = [r.get("runtime_config", {}).get("parameters", {}) for r in (one, two)]
    if params[0] != params[1]:
        return f"parameters {json.dumps(params[1], sort_keys=True)} vs {json.dumps(params[0], sort_keys=True)}"
    if _tasks(one) != _tasks(two):
        changed = sorted(set(_tasks(two)) ^ set(_tasks(one)))
        return f"tasks differ: {', '.join(f'{n} {s}' for n, s in changed[:4])}"
    a, b = _keyed(one_artifacts), _keyed(two_artifacts)
    if sorted(a) != sorted(b):
        return f"artifacts {sorted(b)} vs {sorted(a)}"
    for key in sorted(a):
        for name in sorted((set(a[key].properties) | set(b[key].properties)) - RUN_IDENTITY):
            if not _same(a[key].properties.get(name), b[key].properties.get(name)):
                return (f"artifact {key}: {name} = {b[key].properties.get(name)!r} in the rerun, "
                        f"{a[key].properties.get(name)!r} in the first run")
    return None


class Pipeline:
    """One acceptance run of the example: what it created (for the cleanup) and how far it got."""

    def __init__(self, run: Run, session: Session, namespace: str) -> None:
        self.run, self.session, self.namespace = run, session, namespace
        self.steps: list[str] = run.evidence.setdefault("steps", [])
        self.created: list[str] = []  # API paths to DELETE, newest first

    def step(self, line: str) -> None:
        self.steps.append(line)

    def upload(self, name: str) -> str:
        body, kind = multipart("uploadfile", PACKAGE.name, without_cache(PACKAGE.read_text(encoding="utf-8")))
        pipeline = self.session.json("POST", f"/pipelines/upload?name={name}&namespace={self.namespace}",
                                     raw=body, kind=kind)
        pipeline_id = pipeline["pipeline_id"]
        self.created.insert(0, f"/pipelines/{pipeline_id}")
        versions = self.session.json("GET", f"/pipelines/{pipeline_id}/versions").get("pipeline_versions", [])
        if not versions:
            raise Failed(f"pipeline {pipeline_id} was uploaded with no version")
        version_id = versions[0]["pipeline_version_id"]
        self.created.insert(0, f"/pipelines/{pipeline_id}/versions/{version_id}")
        self.step(f"upload: pipeline {pipeline_id} version {version_id} in {self.namespace}, caching off")
        experiment = self.session.json("POST", "/experiments", {"display_name": name, "namespace": self.namespace})
        self.created.insert(0, f"/experiments/{experiment['experiment_id']}")
        return json.dumps({"experiment_id": experiment["experiment_id"], "pipeline_version_reference": {
            "pipeline_id": pipeline_id, "pipeline_version_id": version_id}})

    def start(self, source: str, name: str, sent: dict[str, Any]) -> dict[str, Any]:
        """Create a run and wait for it to end; Failed unless it SUCCEEDED."""
        created = self.session.json("POST", "/runs", {**json.loads(source), "display_name": name,
                                                      "runtime_config": {"parameters": sent}})
        run_id = created["run_id"]
        self.created.insert(0, f"/runs/{run_id}")

        def ended() -> dict[str, Any] | None:
            record: dict[str, Any] = self.session.json("GET", f"/runs/{run_id}")
            return record if record.get("state") in FINAL else None

        record = self.run.wait(f"run {name} ({run_id}) to end", ended, POLL_SECONDS)
        self.step(f"run {name}: {run_id} {record['state']} ({record.get('created_at')} .. "
                  f"{record.get('finished_at')})")
        if record["state"] != "SUCCEEDED":
            failed = [f"{n} {state}" for n, state in _tasks(record) if state not in ("SUCCEEDED", "SKIPPED")]
            raise Failed(f"run {name} ended {record['state']}: {', '.join(failed) or record.get('error')}")
        return record

    def journal(self, mlmd: Mlmd, record: dict[str, Any]) -> list[Artifact]:
        try:
            found = mlmd.run_artifacts(record["run_id"])
        except MlmdError as error:
            raise Failed(f"ML Metadata for run {record['run_id']}: {error}") from None
        self.run.evidence.setdefault("artifacts", {})[record["run_id"]] = [
            f"{a.properties.get('display_name', a.id)} {a.uri}" for a in found]
        return found

    def queued(self, record: dict[str, Any]) -> str:
        """The Workloads made in the namespace while the run ran: at least one, each admitted by the team's queue."""
        start, end = _time(record["created_at"]), _time(record["finished_at"])
        queue = next(t.queue for t in self.run.platform.teams if t.name == self.run.team)
        during = [w for w in self.run.kube.workloads(self.namespace)
                  if start <= _time(w["metadata"]["creationTimestamp"]) <= end]
        admitted = {w["metadata"]["name"]: (w.get("status", {}).get("admission") or {}).get("clusterQueue")
                    for w in during}
        self.run.evidence["workloads"] = [f"{name} admitted by {cq or '(none)'}" for name, cq in admitted.items()]
        if not admitted:
            raise Failed(f"no Kueue Workload in {self.namespace} while the run ran: its training did not go "
                         f"through the team's queue {queue}")
        stray = [name for name, cq in admitted.items() if cq != queue]
        if stray:
            raise Failed(f"Workload {stray[0]} was admitted by {admitted[stray[0]] or 'no queue'}, not {queue}")
        line = f"queue: {len(admitted)} Workload(s) admitted by ClusterQueue {queue}"
        self.step(line)
        return line

    def refused_to(self, other: Session, run_id: str) -> str:
        for method, path in (("GET", f"/runs/{run_id}"), ("GET", f"/runs?namespace={self.namespace}")):
            status, _ = other.status(method, path)
            if status not in REFUSED:
                raise Failed(f"another team's member got HTTP {status} for {method} {path}, not 401/403")
        line = f"isolation: another team's member is refused the run and the list of {self.namespace}"
        self.step(line)
        return line

    def clean(self) -> None:
        for path in self.created:
            status, _ = self.session.status("DELETE", path)
            if not 200 <= status < 300 and status != 404:
                self.run.evidence.setdefault("left behind", []).append(f"DELETE {path}: HTTP {status}")


def pipeline(run: Run) -> str:
    platform = run.platform
    if not pipeline_observability.pipelines_declared(platform):
        raise Skipped("the stack declares no pipelines")
    door = platform.front_door
    if door is None:
        raise Skipped("no front door: the Pipelines API is reached through it")
    if not PACKAGE.is_file():
        raise Failed(f"{PACKAGE} is missing: compile the example pipeline (examples/pipelines)")
    team = next(t for t in platform.teams if t.name == run.team)
    # Its model goes to the team's own registry; none on a stack without `models` (the step registers nothing).
    registry = platform.models.team(team.name).registry_url if platform.models else ""
    sent = parameters(PACKAGE.read_text(encoding="utf-8"), {"git_commit": run.commit, "queue": team.local_queues[0],
                                                            "registry_url": registry})
    api = run.pipelines or HttpsPipelinesApi()
    namespace = team.namespaces[0]
    token = token_from()
    member, mlmd = Session(api, base_url(door), token), Mlmd(api, door.url, token)
    job = Pipeline(run, member, namespace)
    name = f"trainyard-accept-{run.stamp or 'run'}"
    run.evidence["parameters"] = sent
    try:
        source = job.upload(name)
        first = job.start(source, f"{name}-1", sent)
        first_artifacts = job.journal(mlmd, first)
        problems = _recorded(first, sent, first_artifacts)
        if problems:
            raise Failed(f"run record: {problems[0]}")
        job.step(f"record: parameters as sent, {len(_tasks(first))} task(s), {len(first_artifacts)} artifact(s) "
                 "in ML Metadata")
        queue = job.queued(first)
        second = job.start(source, f"{name}-2", sent)
        changed = difference((first, first_artifacts), (second, job.journal(mlmd, second)))
        if changed:
            raise Failed(f"the rerun with the same parameters differs from the first run: {changed}")
        job.step("rerun: same parameters, same tasks and states, same artifacts and properties")
        try:
            other = token_from(OTHER_TOKEN_FILE_ENV, "another team's member's")
            isolation = job.refused_to(Session(api, base_url(door), other), first["run_id"])
        except Skipped as why:
            isolation = f"isolation not checked ({why})"
            job.step(isolation)
    finally:
        job.clean()
    return f"uploaded, ran twice in {namespace} with the same result; {queue}; {isolation}"
