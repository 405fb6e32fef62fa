"""The example pipeline's model server (ClusterServingRuntime trainyard-linear, infra/platform/models/linear_runtime.py):
KServe's v1 protocol over the linear classifier the example's training script writes (model.json: features, classes,
feature scaling, weights), with the standard library only, so it runs on the pinned Python image and no image is built
for a model. GET /v1/models/<name> says it is ready and which artifact it serves (model.json's sha256: what a rollback
checks); POST /v1/models/<name>:predict answers {"predictions": [class, ...]} for {"instances": [...]}, each instance
a list of feature values in the model's order or an object keyed by feature name."""

import argparse
import hashlib
import json
import pathlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

parser = argparse.ArgumentParser()
parser.add_argument("--model_name", required=True)
parser.add_argument("--model_dir", default="/mnt/models")
parser.add_argument("--http_port", type=int, default=8080)
args = parser.parse_args()
RAW = (pathlib.Path(args.model_dir) / "model.json").read_bytes()
MODEL = json.loads(RAW)
STATUS = {"name": args.model_name, "ready": True, "model_sha256": hashlib.sha256(RAW).hexdigest()}
BASE = f"/v1/models/{args.model_name}"


def predict(instance: Any) -> str:
    values = [instance[f] for f in MODEL["features"]] if isinstance(instance, dict) else instance
    x = [(float(v) - m) / s for v, m, s in zip(values, MODEL["mean"], MODEL["std"], strict=True)]
    logits = [b + sum(w * v for w, v in zip(ws, x, strict=True))
              for ws, b in zip(MODEL["weight"], MODEL["bias"], strict=True)]
    return str(MODEL["classes"][logits.index(max(logits))])


class Handler(BaseHTTPRequestHandler):
    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == BASE:
            self.answer(200, STATUS)
        elif self.path in ("/", "/v1/models"):
            self.answer(200, {"models": [args.model_name]})
        else:
            self.answer(404, {"error": f"no such path; the model is at {BASE}"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path != f"{BASE}:predict":
            self.answer(404, {"error": f"POST {BASE}:predict"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.answer(200, {"predictions": [predict(i) for i in body["instances"]], **STATUS})
        except (KeyError, TypeError, ValueError) as error:
            self.answer(400, {"error": f"{type(error).__name__}: {error}"})


ThreadingHTTPServer(("", args.http_port), Handler).serve_forever()
