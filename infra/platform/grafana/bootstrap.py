"""Runs inside the Grafana pod, beside Grafana (the chart's own sidecar image, Python's standard library only):
creates each team's Grafana organization in the plan's order, with its datasource (the team's label-enforcing proxy,
grafana/datasources.py) and the team's dashboards, then stays idle. Grafana OSS provisions no organizations from
files (grafana/grafana#12119), so this is done through its HTTP API, as the bootstrap admin, by Grafana's auth proxy
that accepts only 127.0.0.1 (nothing outside the pod can use it).

Grafana keeps its database in the pod's emptyDir, so every pod starts with organization 1 alone and the teams'
organizations get the ids the plan expects (infra/platform/grafana/orgs.py maps the directory groups to those ids);
a different id (a persistent database, an organization made by hand) is refused loudly instead of being used.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

# Grafana's auth proxy header (GF_AUTH_PROXY_HEADER_NAME), accepted from 127.0.0.1 only; the gateway refuses it.
HEADER = "X-Trainyard-Grafana-Bootstrap"
GRAFANA = os.environ.get("GRAFANA_URL", "http://127.0.0.1:3000")
PLAN = os.environ.get("PLAN_FILE", "/etc/grafana/team-orgs/plan.json")
# The sha256 of the plan this pod was made for (its template carries it, so a changed plan restarts Grafana).
PLAN_SHA256 = os.environ.get("PLAN_SHA256", "")
WAIT_SECONDS = int(os.environ.get("WAIT_SECONDS", "600"))
REAPPLY_SECONDS = 3600


def call(base: str, header: dict[str, str], method: str, path: str, body: Any = None,
         org: int | None = None) -> tuple[int, Any]:
    """One API call: (HTTP status, parsed JSON or None); 0 when Grafana does not answer."""
    headers = {**header, "Content-Type": "application/json", "Accept": "application/json"}
    if org is not None:
        headers["X-Grafana-Org-Id"] = str(org)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read() if error.fp else b""
        try:
            return error.code, json.loads(raw) if raw else None
        except ValueError:
            return error.code, None
    except OSError:
        return 0, None


def wait_for(base: str, seconds: float, pause: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if call(base, {}, "GET", "/api/health")[0] == 200:
            return True
        time.sleep(pause)
    return False


def ensure_org(base: str, header: dict[str, str], name: str, expected: int) -> str | None:
    """The organization exists with the expected id; a problem otherwise."""
    status, body = call(base, header, "GET", f"/api/orgs/name/{urllib.parse.quote(name, safe='')}")
    if status == 404:
        status, body = call(base, header, "POST", "/api/orgs", {"name": name})
        found = body.get("orgId") if status == 200 and isinstance(body, dict) else None
    else:
        found = body.get("id") if status == 200 and isinstance(body, dict) else None
    if found is None:
        return f"organization {name}: HTTP {status}"
    if found != expected:
        return f"organization {name} has id {found}, the groups are mapped to {expected}: not used"
    return None


def ensure_datasource(base: str, header: dict[str, str], org: int, datasource: dict[str, Any]) -> int:
    """The organization's datasource is the plan's: made when missing, put back when it differs (an earlier plan's
    URL must not stay in use: it may be one that does not enforce the team's label). The last HTTP status."""
    path = f"/api/datasources/uid/{datasource['uid']}"
    status, found = call(base, header, "GET", path, org=org)
    if status == 404:
        return call(base, header, "POST", "/api/datasources", datasource, org=org)[0]
    if status == 200 and isinstance(found, dict) and any(found.get(key) != value for key, value in datasource.items()):
        return call(base, header, "PUT", path, datasource, org=org)[0]
    return status


def ensure_org_content(base: str, header: dict[str, str], org: int, datasource: dict[str, Any],
                       dashboards: list[dict[str, Any]]) -> list[str]:
    problems = []
    status = ensure_datasource(base, header, org, datasource)
    if status != 200:
        problems.append(f"organization {org}: datasource {datasource['uid']}: HTTP {status}")
    for board in dashboards:
        status, _ = call(base, header, "POST", "/api/dashboards/db", {"dashboard": board, "overwrite": True},
                         org=org)
        if status != 200:
            problems.append(f"organization {org}: dashboard {board.get('uid')}: HTTP {status}")
    return problems


def bootstrap(base: str, plan: dict[str, Any]) -> list[str]:
    """Every team's organization, datasource and dashboards; the problems found (none: done)."""
    header = {HEADER: plan["user"]}
    problems = []
    for org in plan["orgs"]:
        problem = ensure_org(base, header, org["name"], org["id"])
        if problem:
            problems.append(problem)
            continue
        problems += ensure_org_content(base, header, org["id"], org["datasource"], org["dashboards"])
    return problems


def read_plan(path: str, sha256: str) -> dict[str, Any] | None:
    """The plan, when it is the one this pod was made for; None while the mounted file is another (the kubelet
    refreshes a ConfigMap volume up to a minute after the ConfigMap changed)."""
    with open(path, "rb") as file:
        text = file.read()
    return json.loads(text) if hashlib.sha256(text).hexdigest() == sha256 else None


def main() -> int:
    """Until a problem: apply the plan, then again every hour (drift made in Grafana's UI is put back; a changed plan
    changes the pod's PLAN_SHA256, so Grafana restarts with it). A problem ends the container: it restarts,
    visibly."""
    if not wait_for(GRAFANA, WAIT_SECONDS):
        print(f"grafana at {GRAFANA} did not answer in {WAIT_SECONDS}s", file=sys.stderr)
        return 1
    while True:
        plan = read_plan(PLAN, PLAN_SHA256)
        if plan is None:
            print(f"{PLAN} is not the plan this pod was made for (sha256 {PLAN_SHA256}) yet", file=sys.stderr)
            return 1
        problems = bootstrap(GRAFANA, plan)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 1
        print(f"{len(plan['orgs'])} team organization(s) ready")
        time.sleep(REAPPLY_SECONDS)


if __name__ == "__main__":
    sys.exit(main())
