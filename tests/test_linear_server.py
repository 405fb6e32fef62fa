"""The example runtime's model server (infra/platform/models/linear_server.py), run in-process on a free port: it
answers predictions and serves at /metrics the predict-step histogram KServe's Python servers export, under the
name, label and buckets the serving rules read, where the predictors' PodMonitor scrapes (without it every
predictor of the example runtime would be a target down)."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from infra.platform.models import linear_server, observability
from infra.platform.models.linear_runtime import LINEAR_RUNTIME
from infra.spec.metrics import MODELS_CATALOG, series_names
from tests.conftest import capture_of, kube_objects

MODEL = {"features": ["a", "b"], "classes": ["no", "yes"], "mean": [0.0, 0.0], "std": [1.0, 1.0],
         "weight": [[1.0, 0.0], [0.0, 1.0]], "bias": [0.0, 0.0]}
LINE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), linear_server.handler("train-eval", json.dumps(MODEL).encode()))
    # A short poll: shutdown() waits for the loop's next poll.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _post(url: str, body: object) -> int:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    found = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = LINE.match(line)
        assert match, line
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match[2]))
        found.append((match[1], labels, float(match[3])))
    return found


def test_predictions_good_and_bad_are_timed_in_kserves_histogram(server: str) -> None:
    predict = f"{server}/v1/models/train-eval:predict"
    assert _post(predict, {"instances": [[0.0, 2.0], {"a": 3.0, "b": 1.0}]}) == 200
    assert _post(predict, {"instances": [[1.0]]}) == 400  # one feature short: timed too, as KServe times failures
    samples = _scrape(server)
    (histogram,) = [m for m in MODELS_CATALOG if m.name == linear_server.METRIC]
    assert histogram.kind == "histogram" and {name for name, _, _ in samples} == set(series_names(histogram))
    assert all(labels.get("model_name") == "train-eval" for _, labels, _ in samples)
    buckets = [(labels["le"], value) for name, labels, value in samples if name.endswith("_bucket")]
    counts = [value for _, value in buckets]
    assert counts == sorted(counts) and buckets[-1] == ("+Inf", 2.0)  # cumulative, every request counted
    assert [v for n, _, v in samples if n.endswith("_count")] == [2.0]
    assert next(v for n, _, v in samples if n.endswith("_sum")) > 0
    # The latency threshold is a bucket bound, so a p95 of exactly the threshold is computable (and silent).
    assert str(observability.LATENCY_P95_SECONDS) in [le for le, _ in buckets]


def test_it_serves_where_the_podmonitor_scrapes() -> None:
    objects = kube_objects(capture_of("onprem-lab"))
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor" and o["metadata"]["name"] == "kserve-predictors"]
    (runtime,) = [o for o in objects if o["kind"] == "ClusterServingRuntime"
                  and o["metadata"]["name"] == LINEAR_RUNTIME]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    container = runtime["spec"]["containers"][0]
    assert (endpoint["portNumber"], endpoint["path"]) == (container["ports"][0]["containerPort"], "/metrics")
    assert f"--http_port={endpoint['portNumber']}" in container["args"]
    assert "/metrics" in container["command"][-1]  # the server's text, as the runtime runs it
