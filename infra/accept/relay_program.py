"""The acceptance relay (standard library only): `trainyard accept` runs it in the run's namespace, where the team's
network policies let it reach the team's models namespace, and reaches it through the API server's service proxy.
The API server itself cannot reach a team's pods: their default-deny policies admit only the team's own namespaces.

GET|POST|PATCH /<namespace>/<service>:<port>/<path> is sent on to http://<service>.<namespace>.svc:<port>/<path>
with its body and content type; the answer comes back as it is (502 when no answer came). Only the namespaces in
$RELAY_NAMESPACES are served. GET /healthz answers 200 (the pod's readiness).
"""

import json
import os
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = 8080
TIMEOUT = 30
TARGET = os.environ.get("RELAY_TARGET", "http://{service}.{namespace}.svc:{port}/{path}")


class Relay(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _forward(self) -> None:
        if self.path == "/healthz":
            self._answer(200, b"{}")
            return
        parts = self.path.lstrip("/").split("/", 2)
        allowed = set(filter(None, os.environ.get("RELAY_NAMESPACES", "").split(",")))
        if len(parts) < 3 or parts[0] not in allowed:
            self._answer(403, json.dumps({"error": f"relay: {self.path} is not in {sorted(allowed)}"}).encode())
            return
        namespace, service, path = parts
        name, _, port = service.partition(":")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        url = TARGET.format(service=name, namespace=namespace, port=port or "80", path=path)
        request = urllib.request.Request(url, data=body, method=self.command, headers={
            "Content-Type": self.headers.get("Content-Type", "application/json"), "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                self._answer(response.status, response.read())
        except urllib.error.HTTPError as error:
            self._answer(error.code, error.read())
        except OSError as error:  # refused, reset, timed out: no answer to pass on
            self._answer(502, json.dumps({"error": f"relay: {url}: {error}"}).encode())

    do_GET = do_POST = do_PATCH = _forward


def serve(port: int = PORT) -> ThreadingHTTPServer:
    return ThreadingHTTPServer(("", port), Relay)


if __name__ == "__main__":
    serve().serve_forever()
