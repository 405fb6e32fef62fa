"""A Kubernetes API server for tests: an in-memory object store behind the REST paths the official client uses,
served over HTTP on 127.0.0.1, so code under test runs the real client (kubeconfig loading, serialisation,
query parameters, impersonation headers) exactly as against a cluster.

What happens to objects after they are stored (admission by Kueue, pods running) is up to hooks that a
simulator (tests/fake_cluster.py) registers; this module only stores, lists, patches and deletes.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import yaml

Key = tuple[str, str, str, str]  # (api group, resource, namespace, name)
KINDS = {"namespaces": "Namespace", "pods": "Pod", "nodes": "Node", "events": "Event", "configmaps": "ConfigMap",
         "persistentvolumeclaims": "PersistentVolumeClaim", "serviceaccounts": "ServiceAccount", "jobs": "Job",
         "cronjobs": "CronJob",
         "deployments": "Deployment", "customresourcedefinitions": "CustomResourceDefinition",
         "trainjobs": "TrainJob", "workloads": "Workload", "localqueues": "LocalQueue",
         "clusterqueues": "ClusterQueue", "inferenceservices": "InferenceService", "services": "Service"}


@dataclass(frozen=True)
class ApiPath:
    group: str
    version: str
    resource: str
    namespace: str
    name: str
    sub: str


def parse_path(path: str) -> ApiPath | None:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts and parts[0] == "apis" and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":  # /namespaces/NS/RESOURCE[/NAME[/SUB]]
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = [*rest, "", "", ""][:3]
    return ApiPath(group, version, resource, namespace, name, sub)


class Store:
    """Objects by (group, resource, namespace, name), with creation hooks and a lock shared with simulators."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.on_create: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {}
        self.on_delete: dict[tuple[str, str], Callable[[dict[str, Any], bool], None]] = {}

    def put(self, group: str, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        meta["resourceVersion"] = str(next(self.versions))
        obj.setdefault("kind", KINDS.get(resource, resource))
        with self.lock:
            self.objects[(group, resource, meta.get("namespace", ""), meta["name"])] = obj
        return obj

    def create(self, group: str, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            key = (group, resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if key in self.objects:
                raise Conflict(f"{resource} {obj['metadata']['name']} already exists")
            self.put(group, resource, obj)
            hook = self.on_create.get((group, resource))
            if hook:
                hook(obj)
            return obj

    def get(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.get((group, resource, namespace, name))

    def list(self, group: str, resource: str, namespace: str = "") -> list[dict[str, Any]]:
        with self.lock:
            return [o for (g, r, ns, _), o in sorted(self.objects.items()) if g == group and r == resource
                    and (not namespace or ns == namespace)]

    def delete(self, group: str, resource: str, namespace: str, name: str, evicted: bool = False) -> dict[
            str, Any] | None:
        with self.lock:
            obj = self.objects.pop((group, resource, namespace, name), None)
            if obj is None:
                return None
            if resource == "namespaces":
                for key in [k for k in self.objects if k[2] == name]:
                    del self.objects[key]
            hook = self.on_delete.get((group, resource))
            if hook:
                hook(obj, evicted)
            return obj


class Conflict(Exception):
    pass


class Refused(Exception):
    """A hook's refusal, as an admission webhook or policy answers: 403 with its message."""


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386), which is what a dict patch amounts to for the fields accept changes."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value


def matches(obj: dict[str, Any], query: dict[str, list[str]]) -> bool:
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in filter(None, (query.get("labelSelector", [""])[0]).split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in filter(None, (query.get("fieldSelector", [""])[0]).split(",")):
        path, _, value = term.partition("=")
        found: Any = obj
        for part in path.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if (found or "") != value:
            return False
    return True


Authorizer = Callable[[str, list[str], dict[str, Any]], bool]


class FakeApiServer:
    """The store over HTTP. `logs[(namespace, pod)]` is what pods/log returns; `authorize(user, groups, attrs)`
    answers (Self)SubjectAccessReviews; `reachable` False makes every request fail like a dead server."""

    def __init__(self, store: Store, authorize: Authorizer) -> None:
        self.store, self.authorize = store, authorize
        self.logs: dict[tuple[str, str], list[str]] = {}
        self.proxies: dict[str, Any] = {}  # service proxy path -> JSON it answers (Prometheus' targets)
        # Services behind the proxy that answer any method: (method, path after /proxy/, JSON body) -> (status,
        # JSON answer), keyed by the proxy path's prefix /api/v1/namespaces/NS/services/NAME:PORT/proxy/.
        self.services: dict[str, Callable[[str, str, Any], tuple[int, Any]]] = {}
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()  # headers and body go out as two writes: no delayed-ACK stall between them
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def _send(self, code: int, payload: Any, text: bool = False) -> None:
                data = payload.encode() if text else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                server.requests.append((method, url.path))
                body = self._body() if method in ("POST", "PATCH") else None
                try:
                    code, payload, text = server.respond(method, url.path, parse_qs(url.query), body,
                                                         self.headers.get("Impersonate-User"),
                                                         self.headers.get_all("Impersonate-Group") or [])
                except Conflict as error:
                    code, payload, text = 409, status(409, "AlreadyExists", str(error)), False
                except Refused as error:
                    code, payload, text = 403, status(403, "Forbidden", str(error)), False
                self._send(code, payload, text)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path: Path, context: str) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "admin", "user": {"token": "fake-admin"}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "admin"}}]}))
        return path

    def respond(self, method: str, path: str, query: dict[str, list[str]], body: Any, user: str | None,
                groups: list[str]) -> tuple[int, Any, bool]:
        if path.rstrip("/") == "/version":
            return 200, {"major": "1", "minor": "34", "gitVersion": "v1.34.1-fake", "gitCommit": "fake",
                         "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
                         "compiler": "gc", "platform": "linux/amd64"}, False
        if "/proxy/" in path:
            prefix, _, rest = unquote(path).partition("/proxy/")
            if prefix + "/proxy/" in self.services:
                code, answer = self.services[prefix + "/proxy/"](method, rest, body)
                return code, answer, False
            answer = self.proxies.get(unquote(path))
            return (200, answer, False) if answer is not None else (404, status(404, "NotFound", path), False)
        where = parse_path(path)
        if where is None:
            return 404, status(404, "NotFound", path), False
        store, g, r, ns, name = self.store, where.group, where.resource, where.namespace, where.name
        if r in ("subjectaccessreviews", "selfsubjectaccessreviews"):
            spec = body["spec"]
            who, member = (spec.get("user", ""), spec.get("groups", [])) if r == "subjectaccessreviews" else (
                user or "admin", groups)
            return 201, {**body, "status": {"allowed": self.authorize(who, member, spec["resourceAttributes"])}}, False
        if where.sub == "log":
            return 200, "\n".join(self.logs.get((ns, name), [])) + "\n", True
        if where.sub == "eviction":
            found = store.delete(g, r, ns, name, evicted=True)
            return (201, body, False) if found else (404, status(404, "NotFound", name), False)
        if method == "GET" and not name:
            items = [o for o in store.list(g, r, ns) if matches(o, query)]
            return 200, {"apiVersion": where.version, "kind": KINDS.get(r, r) + "List", "metadata": {},
                         "items": items}, False
        if method == "POST":
            body.setdefault("metadata", {})
            if ns:
                body["metadata"]["namespace"] = ns
            if r != "namespaces" and ns and store.get("", "namespaces", "", ns) is None:
                return 404, status(404, "NotFound", f"namespace {ns}"), False
            return 201, store.create(g, r, body), False
        found = store.get(g, r, ns, name)
        if found is None:
            return 404, status(404, "NotFound", f"{r} {name} not found"), False
        if method == "GET":
            return 200, found, False
        if method == "PATCH":
            with store.lock:
                merge(found, body)
                store.put(g, r, found)
            return 200, found, False
        if method == "DELETE":
            store.delete(g, r, ns, name)
            return 200, found if r != "namespaces" else status(200, "", "deleted"), False
        return 405, status(405, "MethodNotAllowed", method), False


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure" if code >= 400 else "Success",
            "code": code, "reason": reason, "message": message}
