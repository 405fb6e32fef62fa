"""`trainyard accept`'s `serve` and `rollback` checks (issue 31 point 5) against the simulated cluster with KServe and
the team's registry (tests/serving_cluster.py), reached by the real kubernetes client: a prediction answered, the
rollback measured with no failed prediction, and each misbehaviour failing the check; everything accept made is
removed or archived whatever happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infra.accept import serving as check
from infra.accept.kube import Kube
from infra.accept.runner import Check, Failed, Result, Run, Skipped, run_check
from infra.spec import Platform, validate
from tests.conftest import raw_platform
from tests.fake_cluster import FakeClock, SimulatedCluster
from tests.serving_cluster import READY_STEPS, ServingCluster

STACK, TEAM = "onprem-lab", "vision"
V1, V2 = [1], [2]


def _platform(serving: dict[str, Any] | None = None, models: bool = True) -> Platform:
    raw = raw_platform(STACK)
    if models:
        raw["models"] = {"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}}
        raw["teams"][TEAM]["serving"] = serving or {"pool": "cpu", "cpu": "2", "memory": "4Gi"}
    else:  # the repository's stacks declare models: take them away
        raw.pop("models", None)
        for team in raw["teams"].values():
            team.pop("serving", None)
    return validate(raw, STACK)


def _run(name: str, faults: tuple[str, ...] = (), platform: Platform | None = None,
         models: dict[str, Any] | None = None) -> tuple[Result, ServingCluster]:
    platform = platform or _platform()
    assert platform.models is not None
    team = platform.models.team(TEAM)
    sim = SimulatedCluster(platform)
    sim.store.put("", "namespaces", {"metadata": {"name": f"{TEAM}-accept"}})  # the suite makes it
    prefix = f"{team.artifacts}{check.MODEL}"
    fake = ServingCluster(sim, team, models if models is not None else {f"{prefix}/v1/": V1, f"{prefix}/v2/": V2},
                          faults)
    with sim.api:
        configuration = client.Configuration()
        configuration.host = sim.api.url
        run = Run(platform, Kube(client.ApiClient(configuration)), f"{TEAM}-accept", TEAM, FakeClock(sim),
                  stamp="20261201000000")
        limit = {"serve": 15 * 60, "rollback": 30 * 60}[name]
        result = run_check(Check(name, getattr(check, name), limit, ""), run)
    return result, fake


def test_serve_registers_serves_and_gets_a_prediction() -> None:
    result, fake = _run("serve")
    assert result.status == "passed", result
    assert [line.split(":")[0] for line in result.evidence["steps"]] == ["register", "apply", "ready", "predict",
                                                                         "clean"]
    assert "predicted [1]" in result.summary
    versions = [body for (kind, _), body in fake.entities.items() if kind == "model_versions"]
    assert [v["name"] for v in versions] == ["v1"]
    artifact = fake.artifacts[next(k for k, v in fake.entities.items() if v is versions[0])[1]][0]
    assert artifact["uri"] == "s3://trainyard-lab-vision-datasets/trainyard-accept/v1/"  # inside the team bucket
    assert fake.leftovers() == []


def test_the_inference_service_carries_the_registry_ids_and_serves_in_the_models_namespace() -> None:
    platform = _platform()
    assert platform.models is not None
    serving = check.Serving(Run(platform, None, "x", TEAM, None, stamp="1"),  # type: ignore[arg-type]
                            platform.models.team(TEAM), None, "serve")  # type: ignore[arg-type]
    serving.model_id = "7"
    manifest = serving.manifest(check.Version("v1", "8", "s3://b/models/trainyard-accept/v1/"))
    assert manifest["metadata"]["namespace"] == "vision-models"
    assert manifest["metadata"]["labels"][check.REGISTERED_MODEL_LABEL] == "7"
    assert manifest["metadata"]["labels"][check.MODEL_VERSION_LABEL] == "8"
    assert manifest["spec"]["predictor"]["model"]["storageUri"] == "s3://b/models/trainyard-accept/v1/"
    assert manifest["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"


def test_rollback_returns_to_v1_measures_the_time_and_no_prediction_fails() -> None:
    result, fake = _run("rollback")
    assert result.status == "passed", result
    steps = [line.split(":")[0] for line in result.evidence["steps"]]
    assert steps == ["register", "apply", "ready", "predict", "register", "switch to v2", "predict",
                     "rollback to v1", "clean"]
    timings = result.evidence["timings"]
    # The new pod is ready READY_STEPS steps (one per poll) after the patch; then only it serves.
    assert timings["rollback to v1 (s)"] == timings["switch to v2 (s)"] == READY_STEPS * check.SWITCH_POLL
    assert "rolled back to v1 in 3.0s" in result.summary
    uris = [uri for uri in fake.answered]
    assert "503" not in uris and "500" not in uris
    assert uris[-1].endswith("/v1/")  # v1 answered last
    assert any(uri.endswith("/v2/") for uri in uris)  # v2 answered in between
    assert fake.leftovers() == []


@pytest.mark.parametrize(("name", "fault", "says"), [
    ("serve", "predict-fails", "prediction from v1: HTTP 500"),
    ("rollback", "predict-fails", "prediction from v1: HTTP 500"),
    ("rollback", "ignores-rollback", "time limit reached while waiting for rollback to v1: v1 alone serving"),
    ("rollback", "drops-old", "prediction(s) failed during the switches"),
    ("serve", "registry-down", "model registry in vision-models: POST /api/model_registry/v1alpha3/registered_models: "
                               "HTTP 503"),
])
def test_each_misbehaviour_fails_the_check_and_everything_is_removed(name: str, fault: str, says: str) -> None:
    result, fake = _run(name, (fault,))
    assert result.status == "failed", result
    assert says in result.summary, result.summary
    assert fake.leftovers() == []


def test_a_model_that_was_never_published_times_out_waiting_and_is_removed() -> None:
    result, fake = _run("serve", models={})
    assert result.status == "failed"
    assert "waiting for InferenceService accept-serve-20261201000000 Ready, serving v1" in result.summary
    assert fake.leftovers() == []


def test_without_the_cleanup_the_leftovers_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle of the cleanup can fail: a check that skips it leaves the InferenceService and LIVE entries."""
    monkeypatch.setattr(check.Serving, "clean", lambda self: None)
    result, fake = _run("serve")
    assert result.status == "passed"
    assert fake.leftovers() == ["InferenceService accept-serve-20261201000000", *(
        f"pod {p['metadata']['name']}" for p in fake.sim.store.list("", "pods", "vision-models")),
        "model_versions/2 LIVE", "registered_models/1 LIVE"]


def test_skipped_without_models_or_budget_and_refused_without_room_for_a_switch() -> None:
    bare = _platform(models=False)
    with pytest.raises(Skipped, match="declares no models"):
        check.serve(Run(bare, None, "x", TEAM, None))  # type: ignore[arg-type]
    raw = raw_platform(STACK)
    raw["models"] = {"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}}
    raw["teams"][TEAM].pop("serving", None)  # the stack's own budget for the team, taken away
    no_budget = validate(raw, STACK)
    with pytest.raises(Skipped, match="no serving budget"):
        check.rollback(Run(no_budget, None, "x", TEAM, None))  # type: ignore[arg-type]
    # Two pods of 250m and 512Mi: exactly that fits, one unit less does not.
    check.room_for_a_switch(_models(_platform({"pool": "cpu", "cpu": "500m", "memory": "1Gi"})))
    with pytest.raises(Failed, match=r"cpu 499m\) cannot hold two predictor pods"):
        check.room_for_a_switch(_models(_platform({"pool": "cpu", "cpu": "499m", "memory": "1Gi"})))
    with pytest.raises(Failed, match="memory 1023Mi"):
        check.room_for_a_switch(_models(_platform({"pool": "cpu", "cpu": "1", "memory": "1023Mi"})))


def _models(platform: Platform) -> Any:
    assert platform.models is not None
    return platform.models.team(TEAM)


def test_the_report_carries_the_rollback_timings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import kube_config

    from infra.accept.suite import accept, checks, select
    from infra.commands.common import ROOT

    platform = _platform()
    assert platform.models is not None
    sim = SimulatedCluster(platform)
    prefix = f"{platform.models.team(TEAM).artifacts}{check.MODEL}"
    ServingCluster(sim, platform.models.team(TEAM), {f"{prefix}/v1/": V1, f"{prefix}/v2/": V2})
    monkeypatch.setattr("infra.accept.suite.prerequisites", lambda p, c, connect: (connect(c), "v1.34.1-fake"))
    with sim.api:
        monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION",
                            str(sim.api.kubeconfig(tmp_path / "kubeconfig", "fake-admin")))
        code = accept(platform, context="fake-admin", team=TEAM,
                      chosen=select(checks(platform), ["serve", "rollback"], None),
                      drain_node=None, report_dir=tmp_path, root=ROOT, clock=FakeClock(sim), render=None)
    report = json.loads((tmp_path / f"acceptance-{STACK}.json").read_text())
    assert code == 0, report
    assert report["versions"]["kserve"] == "0.16.0" and report["versions"]["model-registry"] == "0.3.7"
    markdown = (tmp_path / f"acceptance-{STACK}.md").read_text()
    assert "- rollback to v1 (s): 3.0" in markdown and "| rollback | PASS |" in markdown
    assert "| serve | PASS |" in markdown  # both in one run: one registered model and InferenceService each


def test_the_relay_program_forwards_within_its_namespaces_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """infra/accept/relay_program.py itself, over real sockets: a request for the served namespace reaches the
    service with its method and body and comes back as answered; another namespace is refused; no answer is 502."""
    import threading
    import urllib.error
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from infra.accept import relay_program

    seen: list[tuple[str, str, bytes]] = []

    class Service(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            seen.append((self.command, self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(201)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    target = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    monkeypatch.setattr(relay_program, "TARGET", f"http://127.0.0.1:{target.server_address[1]}/{{namespace}}/"
                                                 "{service}/{port}/{path}")
    monkeypatch.setenv("RELAY_NAMESPACES", "vision-models")
    server = relay_program.serve(0)
    for httpd in (target, server):
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def send(path: str) -> int:
        request = urllib.request.Request(f"{base}{path}", data=b'{"a": 1}', method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code

    try:
        assert send("/vision-models/iris-predictor:80/v1/models/iris:predict") == 201
        assert seen == [("POST", "/vision-models/iris-predictor/80/v1/models/iris:predict", b'{"a": 1}')]
        assert send("/nlp-models/iris-predictor:80/v1/models/iris:predict") == 403
        monkeypatch.setattr(relay_program, "TARGET", "http://127.0.0.1:1/{path}")
        assert send("/vision-models/x:80/y") == 502
        assert len(seen) == 1
    finally:
        server.shutdown()
        target.shutdown()


def test_the_relay_pod_passes_pod_security_restricted() -> None:
    from infra.accept import relay as relay_module
    from infra.apiserver.podsecurity import baseline, restricted
    from infra.platform.web.binder import RESTRICTED_POD

    pod = next(o for o in relay_module.objects(["vision-models"]) if o["kind"] == "Pod")
    assert baseline(pod) == restricted(pod) == []
    del pod["spec"]["securityContext"]["seccompProfile"]
    assert restricted(pod)  # the check can fail
    assert "seccompProfile" in RESTRICTED_POD  # on the relay's own copy: the web binder's pods keep theirs
