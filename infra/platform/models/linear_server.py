"""The example pipeline's model server (ClusterServingRuntime trainyard-linear, models/linear_runtime.py): KServe's
v1 protocol over the linear classifier the example's training script writes (model.json: features, classes, feature
scaling, weights), with the standard library only, so it runs on the pinned Python image and no image is built for a
model. GET /v1/models/<name> says it is ready and which artifact it serves (model.json's sha256: what a rollback
checks); POST /v1/models/<name>:predict answers {"predictions": [class, ...]} for {"instances": [...]}, each instance
a list of feature values in the model's order or an object keyed by feature name. The runtime runs this file's text
with `python3 -c` (so `__name__` is `__main__`); importing it starts nothing."""

import argparse
import hashlib
import json
import pathlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def predict(model: dict[str, Any], instance: Any) -> str:
    values = [instance[f] for f in model["features"]] if isinstance(instance, dict) else instance
    x = [(float(v) - m) / s for v, m, s in zip(values, model["mean"], model["std"], strict=True)]
    logits = [b + sum(w * v for w, v in zip(ws, x, strict=True))
              for ws, b in zip(model["weight"], model["bias"], strict=True)]
    return str(model["classes"][logits.index(max(logits))])


def handler(name: str, raw: bytes) -> type[BaseHTTPRequestHandler]:
    model = json.loads(raw)
    status = {"name": name, "ready": True, "model_sha256": hashlib.sha256(raw).hexdigest()}
    base = f"/v1/models/{name}"

    class Handler(BaseHTTPRequestHandler):
        def answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == base:
                self.answer(200, status)
            elif self.path in ("/", "/v1/models"):
                self.answer(200, {"models": [name]})
            else:
                self.answer(404, {"error": f"no such path; the model is at {base}"})

        def do_POST(self) -> None:
            if self.path != f"{base}:predict":
                self.answer(404, {"error": f"POST {base}:predict"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.answer(200, {"predictions": [predict(model, i) for i in body["instances"]], **status})
            except (KeyError, TypeError, ValueError) as error:
                self.answer(400, {"error": f"{type(error).__name__}: {error}"})

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
