"""`trainyard accept`'s `pipeline` check (issue 30 point 7, docs/acceptance.md): the example pipeline, end to end
through the Kubeflow Pipelines REST API (v2beta1) behind the front door, as a member of the accept team.

Steps, each reported in the evidence: upload the compiled example into the team's namespace; run it with its
declared parameters (their defaults, sent explicitly) in an experiment of that namespace; wait for SUCCEEDED; check
the run records the parameters as sent and each task its output artifacts; check the run's training went through
the team's queue (the Kueue Workloads created in the namespace while it ran, admitted by the team's ClusterQueue);
run it again with the same parameters and compare: same parameters recorded, the same tasks succeeded with the same
outputs, none served from the cache (a cached rerun proves nothing); as a member of another team, be refused the
run and the namespace's run list. Everything created is deleted at the end, whatever happened.

Tokens: a member of the team (engineer) in $TRAINYARD_WEB_TOKEN_FILE, as the `front-door` check; a member of
another team in $TRAINYARD_WEB_OTHER_TOKEN_FILE (without it the refusal step is reported as not checked). The
v2beta1 API returns artifact IDs, not their contents: the comparison covers which artifacts each task recorded,
not the metric values inside them (those live in ML Metadata).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import yaml

from infra.accept.runner import Failed, Run, Skipped
from infra.accept.web import token_from
from infra.kit.paths import ROOT
from infra.live.pipelines import HttpsPipelinesApi, PipelinesApi, base_url, multipart
from infra.platform import pipeline_observability

# The compiled example pipeline (issue 30 point 5 writes it; change here if it lands elsewhere).
PACKAGE = ROOT / "examples" / "pipelines" / "train-and-evaluate" / "pipeline.yaml"
OTHER_TOKEN_FILE_ENV = "TRAINYARD_WEB_OTHER_TOKEN_FILE"
FINAL = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")
REFUSED = (401, 403)
POLL_SECONDS = 15.0


def parameters(package: str) -> dict[str, Any]:
    """The pipeline's root parameters with their defaults (the compiled IR's root.inputDefinitions)."""
    spec = next((doc for doc in yaml.safe_load_all(package) if isinstance(doc, dict) and "root" in doc), None)
    if spec is None:
        raise Failed(f"{PACKAGE}: no pipeline spec (a document with `root`): compile the example with the KFP SDK")
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    missing = [name for name, item in declared.items() if "defaultValue" not in item]
    if missing:
        raise Failed(f"{PACKAGE}: parameter '{missing[0]}' has no default: accept runs the example as it ships")
    return {name: item["defaultValue"] for name, item in sorted(declared.items())}


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


def _tasks(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's tasks by name (the DAG's own driver task, named after the run's root, is not a step)."""
    return {task["display_name"]: task for task in record.get("run_details", {}).get("task_details", [])
            if task.get("display_name") not in ("", "root")}


def _outputs(task: dict[str, Any]) -> dict[str, int]:
    return {name: len(listed.get("artifact_ids", [])) for name, listed in (task.get("outputs") or {}).items()}


def _recorded(record: dict[str, Any], sent: dict[str, Any]) -> list[str]:
    """What the run's record gets wrong: the parameters as sent; every task succeeded (not from the cache) and
    recorded its output artifacts (each step of the example hands one on)."""
    problems = []
    kept = record.get("runtime_config", {}).get("parameters", {})
    if kept != sent:
        problems.append(f"parameters recorded {json.dumps(kept, sort_keys=True)}, sent "
                        f"{json.dumps(sent, sort_keys=True)}")
    tasks = _tasks(record)
    if not tasks:
        problems.append("no task recorded")
    for name, task in sorted(tasks.items()):
        if task.get("state") == "SKIPPED":
            problems.append(f"task {name} was served from the cache, so it proves nothing: compile the example "
                            "with caching off for its steps")
        elif task.get("state") != "SUCCEEDED":
            problems.append(f"task {name} is {task.get('state')}")
        elif not _outputs(task) or any(count == 0 for count in _outputs(task).values()):
            problems.append(f"task {name} recorded no output artifact" if not _outputs(task) else
                            f"task {name} recorded an output with no artifact")
    return problems


def _signature(record: dict[str, Any]) -> dict[str, Any]:
    """What two runs of the same code, data and parameters must share."""
    return {"parameters": record.get("runtime_config", {}).get("parameters", {}),
            "tasks": {name: {"state": task.get("state"), "outputs": _outputs(task)}
                      for name, task in sorted(_tasks(record).items())}}


class Pipeline:
    """One acceptance run of the example: what it created (for the cleanup) and how far it got."""

    def __init__(self, run: Run, session: Session, namespace: str) -> None:
        self.run, self.session, self.namespace = run, session, namespace
        self.steps: list[str] = run.evidence.setdefault("steps", [])
        self.created: list[str] = []  # API paths to DELETE, newest first

    def step(self, line: str) -> None:
        self.steps.append(line)

    def upload(self, name: str) -> str:
        body, kind = multipart("uploadfile", PACKAGE.name, PACKAGE.read_bytes())
        pipeline = self.session.json("POST", f"/pipelines/upload?name={name}&namespace={self.namespace}",
                                     raw=body, kind=kind)
        pipeline_id = pipeline["pipeline_id"]
        self.created.insert(0, f"/pipelines/{pipeline_id}")
        versions = self.session.json("GET", f"/pipelines/{pipeline_id}/versions").get("pipeline_versions", [])
        if not versions:
            raise Failed(f"pipeline {pipeline_id} was uploaded with no version")
        version_id = versions[0]["pipeline_version_id"]
        self.created.insert(0, f"/pipelines/{pipeline_id}/versions/{version_id}")
        self.step(f"upload: pipeline {pipeline_id} version {version_id} in {self.namespace}")
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
            failed = [f"{n} {t.get('state')}" for n, t in _tasks(record).items() if t.get("state") != "SUCCEEDED"]
            raise Failed(f"run {name} ended {record['state']}: {', '.join(failed) or record.get('error')}")
        return record

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
    sent = parameters(PACKAGE.read_text(encoding="utf-8"))
    api = run.pipelines or HttpsPipelinesApi()
    namespace = next(t for t in platform.teams if t.name == run.team).namespaces[0]
    member = Session(api, base_url(door), token_from())
    job = Pipeline(run, member, namespace)
    name = f"trainyard-accept-{run.stamp or 'run'}"
    run.evidence["parameters"] = sent
    try:
        source = job.upload(name)
        first = job.start(source, f"{name}-1", sent)
        problems = _recorded(first, sent)
        if problems:
            raise Failed(f"run record: {problems[0]}")
        job.step(f"record: parameters as sent, {len(_tasks(first))} task(s) succeeded with their artifacts")
        queue = job.queued(first)
        second = job.start(source, f"{name}-2", sent)
        if _signature(second) != _signature(first):
            run.evidence["compared"] = {"first": _signature(first), "rerun": _signature(second)}
            raise Failed("the rerun with the same parameters differs from the first run (evidence: compared)")
        job.step("rerun: same parameters, same tasks succeeded with the same outputs, none from the cache")
        try:
            isolation = job.refused_to(Session(api, base_url(door), token_from(OTHER_TOKEN_FILE_ENV,
                                                                               "another team's member's")),
                                       first["run_id"])
        except Skipped as why:
            isolation = f"isolation not checked ({why})"
            job.step(isolation)
    finally:
        job.clean()
    return f"uploaded, ran twice in {namespace} with the same result; {queue}; {isolation}"
