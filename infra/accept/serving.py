"""`trainyard accept`'s `serve` and `rollback` checks (issue 31 point 5, docs/acceptance.md): a registered model
version served by KServe in the team's models namespace, asked for a prediction, and rolled back by the documented
step while it keeps answering.

`serve`: register a model (`trainyard-accept-<check>-<stamp>`) and its version v1 in the team's registry, with its
artifact at `<team artifacts>trainyard-accept/v1/`; apply an InferenceService (Standard mode) serving that
storageUri, carrying the registry's ids as labels; wait until it is Ready and every ready predictor pod carries v1's id;
ask a prediction (KServe v1 protocol) on the predictor's cluster-local Service. Both the registry and the predictor are
reached through the run's relay (relay.py), a pod in the run's namespace that the team's network policies admit.

`rollback`: as `serve`, then register v2 and switch the InferenceService to it, then back to v1 by the rollback step
of docs/models.md (storageUri and the model-version-id label, one merge patch). Through each switch a prediction is
asked every SWITCH_POLL seconds: every one must be answered (the old version serves until the new one is ready); the
switch is over when every ready predictor pod carries the new version's id and the answer is the one that version
gave alone. The time from the patch to that moment is the report's rollback time.

Everything accept creates is removed at the end, whatever happened: the InferenceService is deleted, the registered
model and its versions archived (the registry's API deletes nothing). The model files are the operator's, published
once (docs/acceptance.md): accept cannot write the team's bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.accept.registry import Registry
from infra.accept.relay import Relayed, relay
from infra.accept.runner import RUN_LABEL, Failed, Run, Skipped
from infra.platform.models.observability import ISVC_LABEL, MODEL_LABEL, VERSION_LABEL
from infra.spec.base import parse_quantity
from infra.spec.models.model import TeamModels

MODEL = "trainyard-accept"  # the model's folder under the team's artifacts prefix: trainyard-accept/<version>/
MODEL_FORMAT = "sklearn"  # served by KServe's sklearn ClusterServingRuntime (KServe v1 protocol)
# What accept asks: one row of four features (KServe's sklearn iris example takes this shape).
INSTANCES: dict[str, Any] = {"instances": [[6.8, 2.8, 4.8, 1.4]]}
# The registry's ids on an InferenceService (and, copied by KServe, on its pods), and KServe's label on the pods.
REGISTERED_MODEL_LABEL, MODEL_VERSION_LABEL, ISVC_POD_LABEL = MODEL_LABEL, VERSION_LABEL, ISVC_LABEL
# One predictor pod's requests (= limits); a switch runs the old and the new pod side by side.
POD_CPU, POD_MEMORY = "250m", "512Mi"
SWITCH_POLL = 1.0  # seconds between predictions during a switch: the resolution of the measured time
READY_POLL = 5.0
PREDICTOR_PORT = 80  # the predictor Service's port (KServe: CommonDefaultHttpPort, to the container's 8080)


@dataclass
class Version:
    name: str
    id: str
    uri: str
    answer: Any = None  # what it predicted while it served alone


@dataclass
class Switch:
    seconds: float = 0.0
    asked: int = 0
    failures: list[str] = field(default_factory=list)
    answers: dict[str, int] = field(default_factory=dict)  # the version that answered -> count


def models_of(run: Run) -> TeamModels:
    models = run.platform.models
    if models is None:
        raise Skipped("the stack declares no models")
    team = models.team(run.team)
    if team.serving is None:
        raise Skipped(f"team {run.team} has no serving budget (teams.{run.team}.serving)")
    if not team.artifacts:
        raise Skipped(f"team {run.team} has no bucket for model artifacts (this stack serves from pvc://): serve "
                      "by hand (docs/models.md)")
    return team


def room_for_a_switch(team: TeamModels) -> None:
    """A switch runs two predictor pods at once: the budget must hold both (beside what already serves)."""
    budget = team.serving
    assert budget is not None
    short = [f"{what} {have}" for what, have, need in (("cpu", budget.cpu, POD_CPU), ("memory", budget.memory,
                                                                                          POD_MEMORY))
             if parse_quantity(have) < 2 * parse_quantity(need)]
    if short:
        raise Failed(f"teams.{team.team}.serving ({', '.join(short)}) cannot hold two predictor pods of {POD_CPU} "
                     f"CPU and {POD_MEMORY} (a switch runs the old and the new side by side)")


def _ready(pod: dict[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []) or [])


class Serving:
    """One acceptance InferenceService and its registered model: what was made (for the cleanup) and the steps."""

    def __init__(self, run: Run, team: TeamModels, relayed: Relayed, check: str) -> None:
        self.run, self.team, self.namespace, self.relayed = run, team, team.namespace, relayed
        self.registry = Registry(relayed, self.namespace)
        # One name per check and run: registered model names are unique for good (archiving keeps the name), and a
        # deleted InferenceService may still be going while the next check starts.
        self.name = f"accept-{check}-{run.stamp or 'run'}"
        self.steps: list[str] = run.evidence.setdefault("steps", [])
        self.model_id: str | None = None
        self.versions: list[Version] = []
        self.applied = False

    def step(self, line: str) -> None:
        self.steps.append(line)

    def register(self, name: str) -> Version:
        if self.model_id is None:
            self.model_id = self.registry.register_model(f"{MODEL}-{self.name.removeprefix('accept-')}",
                                                         "trainyard accept: removed at the end of the run")
        uri = f"{self.team.artifacts}{MODEL}/{name}/"
        version = Version(name, self.registry.register_version(self.model_id, name, uri, MODEL_FORMAT), uri)
        self.versions.append(version)
        self.step(f"register: model {self.model_id} version {name} = {version.id}, artifact {uri}")
        return version

    def manifest(self, version: Version) -> dict[str, Any]:
        resources = {"cpu": POD_CPU, "memory": POD_MEMORY}
        return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": {
                    RUN_LABEL: "true", REGISTERED_MODEL_LABEL: str(self.model_id),
                    MODEL_VERSION_LABEL: version.id},
                    "annotations": {"serving.kserve.io/deploymentMode": "Standard"}},
                "spec": {"predictor": {"model": {"modelFormat": {"name": MODEL_FORMAT}, "storageUri": version.uri,
                                                 "resources": {"requests": resources, "limits": resources}}}}}

    def apply(self, version: Version) -> None:
        self.run.kube.create(self.namespace, self.manifest(version))
        self.applied = True
        self.step(f"apply: InferenceService {self.namespace}/{self.name} serving {version.name} ({version.uri})")

    def pods(self) -> list[dict[str, Any]]:
        return self.run.kube.pods(self.namespace, f"{ISVC_POD_LABEL}={self.name}")

    def serving_only(self, version: Version) -> bool:
        """Every ready predictor pod carries the version's id, and there is one."""
        ready = [p for p in self.pods() if _ready(p)]
        return bool(ready) and all(p["metadata"].get("labels", {}).get(MODEL_VERSION_LABEL) == version.id
                                   for p in ready)

    def wait_ready(self, version: Version) -> None:
        def ready() -> bool | None:
            isvc = self.run.kube.inference_service(self.namespace, self.name)
            conditions = (isvc or {}).get("status", {}).get("conditions", []) or []
            up = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            return True if up and self.serving_only(version) else None

        self.run.wait(f"InferenceService {self.name} Ready, serving {version.name}", ready, READY_POLL)
        self.step(f"ready: InferenceService Ready, its predictor pods carry {MODEL_VERSION_LABEL}={version.id}")

    def predict(self) -> tuple[int, Any]:
        return self.relayed.call("POST", self.namespace, f"{self.name}-predictor:{PREDICTOR_PORT}",
                                 f"v1/models/{self.name}:predict", INSTANCES)

    def answer_of(self, version: Version) -> Any:
        """The prediction while the version serves alone (recorded as that version's answer)."""
        status, answer = self.predict()
        if status != 200 or not isinstance(answer, dict) or "predictions" not in answer:
            raise Failed(f"prediction from {version.name}: HTTP {status}: {answer}")
        version.answer = answer["predictions"]
        self.step(f"predict: POST /v1/models/{self.name}:predict answered {version.answer} from {version.name}")
        return version.answer

    def switch(self, to: Version, label: str) -> Switch:
        """The rollback step (storageUri and model-version-id label in one merge patch), then a prediction every
        SWITCH_POLL seconds until only `to` serves and answers as it did alone (when its answer is known)."""
        patch = {"metadata": {"labels": {MODEL_VERSION_LABEL: to.id}},
                 "spec": {"predictor": {"model": {"storageUri": to.uri}}}}
        clock, record = self.run.clock, Switch()
        by_answer = {repr(v.answer): v.name for v in self.versions if v.answer is not None}
        started = clock.now()
        self.run.kube.patch_inference_service(self.namespace, self.name, patch)

        def done() -> bool | None:
            record.asked += 1
            status, answer = self.predict()
            if status != 200 or not isinstance(answer, dict) or "predictions" not in answer:
                record.failures.append(f"t+{clock.now() - started:.1f}s HTTP {status}: {str(answer)[:120]}")
                return None
            # Before `to` has answered alone its answer is unknown: a new answer is taken as its.
            who = by_answer.get(repr(answer["predictions"]), to.name if to.answer is None else "unknown")
            record.answers[who] = record.answers.get(who, 0) + 1
            answered = to.answer is None or repr(answer["predictions"]) == repr(to.answer)
            return True if answered and self.serving_only(to) else None

        self.run.wait(f"{label}: {to.name} alone serving", done, SWITCH_POLL)
        record.seconds = round(clock.now() - started, 1)
        self.step(f"{label}: {to.name} serving alone {record.seconds}s after the patch; {record.asked} "
                  f"prediction(s) asked, {len(record.failures)} failed; answers by version {record.answers}")
        return record

    def clean(self) -> None:
        left: list[str] = self.run.evidence.setdefault("left behind", [])
        if self.applied:
            self.run.kube.delete_inference_service(self.namespace, self.name)
            if self.run.kube.inference_service(self.namespace, self.name) is not None:
                left.append(f"InferenceService {self.namespace}/{self.name} still there after its deletion")
        for kind, entity in [*(("model_versions", v.id) for v in self.versions),
                             *((("registered_models", self.model_id),) if self.model_id else ())]:
            status = self.registry.archive(kind, entity)
            if not 200 <= status < 300:
                left.append(f"{kind}/{entity} not archived: HTTP {status}")
        self.step(f"clean: InferenceService deleted, {len(self.versions)} version(s) and the model archived"
                  + (f" ({len(left)} left behind)" if left else ""))


def _served(run: Run, check: str, then: Callable[[Serving, Version], str]) -> str:
    team = models_of(run)
    room_for_a_switch(team)
    serving = Serving(run, team, relay(run, [team.namespace]), check)
    try:
        first = serving.register("v1")
        serving.apply(first)
        serving.wait_ready(first)
        serving.answer_of(first)
        return then(serving, first)
    finally:
        serving.clean()


def serve(run: Run) -> str:
    def answered(serving: Serving, v1: Version) -> str:
        return (f"registered {MODEL} v1 in {serving.namespace}'s registry, served by InferenceService "
                f"{serving.name}; predicted {v1.answer}")

    return _served(run, "serve", answered)


def rollback(run: Run) -> str:
    def rolled_back(serving: Serving, v1: Version) -> str:
        v2 = serving.register("v2")
        forward = serving.switch(v2, "switch to v2")
        serving.answer_of(v2)
        back = serving.switch(v1, "rollback to v1")
        run.evidence["timings"] = {"switch to v2 (s)": forward.seconds, "rollback to v1 (s)": back.seconds,
                                   "poll (s)": SWITCH_POLL}
        failed = forward.failures + back.failures
        if failed:
            raise Failed(f"{len(failed)} prediction(s) failed during the switches (the old version must serve until "
                         f"the new one is ready): {failed[0]}")
        if v1.answer == v2.answer:
            serving.step("note: v1 and v2 answer alike; the version is proven by the predictor pods' label")
        return (f"v1 -> v2 in {forward.seconds}s, rolled back to v1 in {back.seconds}s (from the patch to v1 alone "
                f"answering); {forward.asked + back.asked} predictions during the switches, none failed")

    return _served(run, "rollback", rolled_back)
