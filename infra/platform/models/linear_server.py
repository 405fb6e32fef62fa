"""The example pipeline's model server (ClusterServingRuntime trainyard-linear, models/linear_runtime.py): KServe's
v1 protocol over the linear classifier the example's training script writes (model.json: features, classes, feature
scaling, weights), with the standard library only, so it runs on the pinned Python image and no image is built for a
model. GET /v1/models/<name> says it is ready and which artifact it serves (model.json's sha256: what a rollback
checks); POST /v1/models/<name>:predict answers {"predictions": [class, ...]} for {"instances": [...]}, each instance
a list of feature values in the model's order or an object keyed by feature name. GET /metrics serves, in Prometheus'
text format, the histogram KServe's Python model servers export for the predict step (`request_predict_seconds`,
labelled `model_name`, prometheus_client's default buckets: KS@v0.16.0 python/kserve/kserve/metrics.py, timed around
the predict call, failed ones included, as kserve/model.py does), so the predictors' PodMonitor scrapes this runtime
like KServe's and the serving latency alert and dashboard cover it. The runtime runs this file's text with
`python3 -c` (so `__name__` is `__main__`); importing it starts nothing."""

import argparse
import hashlib
import json
import pathlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def predict(model: dict[str, Any], instance: Any) -> str:
    values = [instance[f] for f in model["features"]] if isinstance(instance, dict) else instance
    x = [(float(v) - m) / s for v, m, s in zip(values, model["mean"], model["std"], strict=True)]
    logits = [b + sum(w * v for w, v in zip(ws, x, strict=True))
              for ws, b in zip(model["weight"], model["bias"], strict=True)]
    return str(model["classes"][logits.index(max(logits))])


METRIC = "request_predict_seconds"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)  # prometheus_client's


class Histogram:
    """One model's predict-step latency, cumulative per bucket as Prometheus reads it."""

    def __init__(self, model_name: str) -> None:
        self.labels = f'model_name="{model_name}"'
        self.buckets, self.count, self.total = [0] * len(BUCKETS), 0, 0.0
        self.lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self.lock:
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            self.count += 1
            self.total += seconds

    def text(self) -> str:
        with self.lock:
            lines = [f"# HELP {METRIC} predict request latency", f"# TYPE {METRIC} histogram"]
            bounds, counts = [*map(str, BUCKETS), "+Inf"], [*self.buckets, self.count]
            lines += [f'{METRIC}_bucket{{le="{b}",{self.labels}}} {n}' for b, n in zip(bounds, counts, strict=True)]
            lines += [f"{METRIC}_count{{{self.labels}}} {self.count}", f"{METRIC}_sum{{{self.labels}}} {self.total}"]
        return "\n".join(lines) + "\n"


def handler(name: str, raw: bytes) -> type[BaseHTTPRequestHandler]:
    model = json.loads(raw)
    status = {"name": name, "ready": True, "model_sha256": hashlib.sha256(raw).hexdigest()}
    base = f"/v1/models/{name}"
    latency = Histogram(name)

    class Handler(BaseHTTPRequestHandler):
        def send(self, code: int, data: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def answer(self, code: int, body: dict[str, Any]) -> None:
            self.send(code, json.dumps(body).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self.send(200, latency.text().encode(), "text/plain; version=0.0.4; charset=utf-8")
            elif self.path == base:
                self.answer(200, status)
            elif self.path in ("/", "/v1/models"):
                self.answer(200, {"models": [name]})
            else:
                self.answer(404, {"error": f"no such path; the model is at {base}"})

        def do_POST(self) -> None:
            if self.path != f"{base}:predict":
                self.answer(404, {"error": f"POST {base}:predict"})
                return
            start = time.perf_counter()
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                code, answer = 200, {"predictions": [predict(model, i) for i in body["instances"]], **status}
            except (KeyError, TypeError, ValueError) as error:
                code, answer = 400, {"error": f"{type(error).__name__}: {error}"}
            latency.observe(time.perf_counter() - start)
            self.answer(code, answer)

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", required=True)
    parser.add_argument("--model_dir", default="/mnt/models")
    parser.add_argument("--http_port", type=int, default=8080)
    args = parser.parse_args()
    raw = (pathlib.Path(args.model_dir) / "model.json").read_bytes()
    ThreadingHTTPServer(("", args.http_port), handler(args.model_name, raw)).serve_forever()


if __name__ == "__main__":
    main()
