"""The web binder's server: the program that runs in its pod (Python's standard library only, the interpreter of
the pinned image), shipped in a ConfigMap by infra/platform/web/binder.py. Importable so that tests run the same
decisions the pod makes.

The gateway mirrors every request to a UI (and routes /web-access/) here, after it verified the person's token and
wrote `kubeflow-userid` and `kubeflow-groups` from it. For that person the binder keeps one RoleBinding per team
namespace their groups reach, to the web role of their right there, named and annotated as KFAM names its
contributors (`user-<email>-clusterrole-<edit|view>`, annotations `user`, `role`), labelled as ours, and expiring
with the token that asked (`trainyard.io/expires-at`, at most the session lifetime). Bindings the groups no longer
justify are deleted at once; a sweep every minute deletes the expired ones and those made under another grant
table. So a person removed from a directory group loses web access when their last token with that group
expires, and a group removed from the stack when the new table is rolled out.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CONFIG_PATH = "/etc/web-binder/grants.json"
MANAGED_LABEL = "trainyard.io/web-binding"
EXPIRES = "trainyard.io/expires-at"
TABLE = "trainyard.io/grant-table"  # the grant table's digest the binding was made under
USER, ROLE = "user", "role"  # KFAM's annotations (kfam/bindings.go)
RBAC = "rbac.authorization.k8s.io"
STRENGTH = {"read": 0, "edit": 1, "admin": 2}
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
SWEEP_SECONDS = 60
ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
Config = dict[str, Any]
Binding = dict[str, Any]


def table_digest(config: Config) -> str:
    return hashlib.sha256(json.dumps(config["groups"], sort_keys=True).encode()).hexdigest()[:16]


def kfam_name(user: str, role: str) -> str:
    """KFAM's getBindingName for a User subject and a ClusterRole: non [a-z0-9] runs of the name -> '-', then the
    lower-cased `User-<name>-ClusterRole-<role>` with the same replacement."""
    name = re.sub(r"[^a-z0-9]+", "-", user)
    return re.sub(r"[^a-z0-9]+", "-", f"User-{urllib.parse.quote_plus(name)}-ClusterRole-{role}".lower())


def groups_of(header: str) -> list[str]:
    """The gateway writes a list claim joined with commas."""
    return [group.strip() for group in header.split(",") if group.strip()]


def token_expiry(authorization: str) -> int | None:
    """`exp` of the Bearer token the gateway verified and forwarded (its signature is the gateway's concern)."""
    token = authorization.removeprefix("Bearer ").strip()
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return int(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None


def wanted(config: Config, groups: list[str]) -> dict[str, str]:
    """namespace -> the strongest right the groups give there (nothing for a group the table does not name)."""
    rights: dict[str, str] = {}
    for group in groups:
        for namespace, right in config["groups"].get(group, []):
            if namespace in config["namespaces"] and STRENGTH[right] > STRENGTH.get(rights.get(namespace, ""), -1):
                rights[namespace] = right
    return rights


def binding(config: Config, namespace: str, user: str, right: str, expires: int) -> Binding:
    role = config["kfamRoles"][right]
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
            "metadata": {"name": kfam_name(user, role), "namespace": namespace,
                         "labels": {MANAGED_LABEL: "true", "app.kubernetes.io/managed-by": "trainyard-web-binder"},
                         "annotations": {USER: user, ROLE: role, EXPIRES: time.strftime(TIME_FORMAT,
                                                                                        time.gmtime(expires)),
                                         TABLE: table_digest(config)}},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": config["roles"][right]},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}]}


def expires_at(item: Binding) -> int:
    try:
        return calendar.timegm(time.strptime(item["metadata"]["annotations"][EXPIRES], TIME_FORMAT))
    except (KeyError, ValueError, TypeError):
        return 0


def decide(config: Config, user: str, groups: list[str], token_exp: int | None, now: int,
           existing: list[Binding]) -> tuple[list[Binding], list[Binding]]:
    """(bindings to write, bindings to delete) for one person's request: `existing` are the managed bindings
    naming the user. A binding is rewritten only when the expiry moves or it is missing."""
    limit = now + int(config["sessionSeconds"])
    expires = min(token_exp, limit) if token_exp else limit
    rights = wanted(config, groups) if expires > now else {}
    fresh = [binding(config, ns, user, right, expires) for ns, right in sorted(rights.items())]
    current = {_key(b): b for b in existing}
    digest = table_digest(config)
    write = [b for b in fresh if _key(b) not in current or expires_at(current[_key(b)]) < expires
             or current[_key(b)]["metadata"].get("annotations", {}).get(TABLE) != digest]
    keep = {_key(b) for b in fresh}
    delete = [b for key, b in sorted(current.items()) if key not in keep]
    return write, delete


def _key(item: Binding) -> tuple[str, str]:
    return item["metadata"]["namespace"], item["metadata"]["name"]


def sweep(config: Config, existing: list[Binding], now: int) -> list[Binding]:
    """The managed bindings to delete: expired, or made under another grant table."""
    digest = table_digest(config)
    return [b for b in existing if expires_at(b) <= now
            or b["metadata"].get("annotations", {}).get(TABLE) != digest]


class Api:
    """The API server, as the pod's ServiceAccount (rights: infra/platform/web/binder.py)."""

    def __init__(self) -> None:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        self.base = f"https://{host}:{port}"
        self.context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")

    def call(self, method: str, path: str, body: Any = None, content: str = "application/json") -> Any:
        with open(f"{ACCOUNT}/token") as token:
            headers = {"Authorization": f"Bearer {token.read().strip()}", "Content-Type": content}
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        with urllib.request.urlopen(request, context=self.context, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def managed(self, namespace: str) -> list[Binding]:
        selector = urllib.parse.quote(f"{MANAGED_LABEL}=true")
        path = f"/apis/{RBAC}/v1/namespaces/{namespace}/rolebindings?labelSelector={selector}"
        return list(self.call("GET", path).get("items", []))

    def apply(self, item: Binding) -> None:
        meta = item["metadata"]
        path = (f"/apis/{RBAC}/v1/namespaces/{meta['namespace']}/rolebindings/{meta['name']}"
                "?fieldManager=trainyard-web-binder&force=true")
        self.call("PATCH", path, item, "application/apply-patch+yaml")

    def delete(self, item: Binding) -> None:
        meta = item["metadata"]
        try:
            self.call("DELETE", f"/apis/{RBAC}/v1/namespaces/{meta['namespace']}/rolebindings/{meta['name']}")
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise


class Binder:
    def __init__(self, config: Config, api: Api) -> None:
        self.config, self.api = config, api
        self.seen: dict[str, tuple[frozenset[tuple[str, str]], int]] = {}  # user -> (rights, expiry) last written
        self.lock = threading.Lock()

    def handle(self, user: str, groups: list[str], token_exp: int | None) -> list[Binding]:
        now = int(time.time())
        rights = frozenset(wanted(self.config, groups).items())
        with self.lock:
            last = self.seen.get(user)
            if last is not None and last[0] == rights and token_exp is not None and last[1] >= token_exp > now:
                return []
            existing = [b for ns in self.config["namespaces"] for b in self.api.managed(ns)
                        if b["metadata"].get("annotations", {}).get(USER) == user]
            write, delete = decide(self.config, user, groups, token_exp, now, existing)
            for item in write:
                self.api.apply(item)
            for item in delete:
                self.api.delete(item)
            self.seen[user] = (rights, token_exp or now)
            return write

    def sweep_forever(self) -> None:
        while True:
            try:
                now = int(time.time())
                for namespace in self.config["namespaces"]:
                    for item in sweep(self.config, self.api.managed(namespace), now):
                        self.api.delete(item)
                        with self.lock:  # the person's next request writes afresh
                            self.seen.pop(item["metadata"].get("annotations", {}).get(USER, ""), None)
            except (OSError, urllib.error.URLError, ValueError) as error:
                print(f"sweep failed: {error}", file=sys.stderr, flush=True)
            time.sleep(SWEEP_SECONDS)


def serve(binder: Binder, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path in ("/healthz", "/readyz"):
                return self._reply(200, {"ok": True})
            user = self.headers.get(binder.config["userHeader"], "")
            if not user:
                return self._reply(400, {"error": "no identity"})
            groups = groups_of(self.headers.get(binder.config["groupsHeader"], ""))
            try:
                written = binder.handle(user, groups, token_expiry(self.headers.get("Authorization", "")))
            except (OSError, urllib.error.URLError, ValueError) as error:
                print(f"binding {user} failed: {error}", file=sys.stderr, flush=True)
                return self._reply(503, {"error": "the binder could not reach the API server"})
            self._reply(200, {"user": user, "rights": wanted(binder.config, groups),
                              "written": [b["metadata"]["namespace"] for b in written]})

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:  # no access log: requests carry tokens in headers
            return

    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()


def main() -> None:
    with open(CONFIG_PATH) as handle:
        config = json.load(handle)
    binder = Binder(config, Api())
    threading.Thread(target=binder.sweep_forever, daemon=True).start()
    serve(binder, int(config["port"]))


if __name__ == "__main__":
    main()
