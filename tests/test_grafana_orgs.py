"""Each team's Grafana organization (infra/platform/grafana/orgs.py, grafana_bootstrap.py): the mapping from the
directory groups, read as Grafana reads it; the bootstrap against a fake Grafana; the rendered pod, ConfigMap and
gateway guard."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import jmespath
import pytest
import yaml

from infra.components import ISTIO, MONITORING
from infra.platform.grafana import bootstrap as grafana_bootstrap
from infra.platform.grafana.datasources import PROMETHEUS_URL
from infra.platform.grafana.orgs import (
    BOOTSTRAP_HEADER,
    CONFIGMAP,
    FIRST_TEAM_ORG,
    configmap_data,
    plan,
    team_orgs,
)
from infra.platform.grafana.sso import ADMIN_ROLE
from infra.spec.frontdoor.web_access import GRAFANA, GRAFANA_TEAM_ROLE
from tests.conftest import STACKS, capture_of, kube_objects, platform_of
from tests.test_grafana_sso import _env, _grafana

Obj = dict[str, Any]
ALL = -1  # Grafana's `*` organization


def _split(entry: str) -> list[str]:
    """Grafana's splitOrgMapping: fields split on colons not escaped with a backslash."""
    fields: list[str] = []
    current, index = "", 0
    while index < len(entry):
        if entry[index] == "\\" and entry[index + 1:index + 2] == ":":
            current, index = current + ":", index + 2
            continue
        if entry[index] == ":":
            fields, current = [*fields, current], ""
        else:
            current += entry[index]
        index += 1
    return [*fields, current]


def org_roles(env: dict[str, str], groups: list[str], orgs: list[int], claim: str = "groups") -> dict[int, str]:
    """The organizations and roles Grafana gives a token with these groups (connectors/org_role_mapper.go, with
    role_attribute_strict): org_mapping's matches, `*` for every existing org, the top role of the direct role
    (GrafanaAdmin is Admin) and the mapped one; no match and no direct role is no organization (refused)."""
    rank = {"None": 0, "Viewer": 1, "Editor": 2, "Admin": 3}
    mapped: dict[int, str] = {}
    for entry in json.loads(env["GF_AUTH_JWT_ORG_MAPPING"]):
        group, org, role = _split(entry)
        if group in groups or group == "*":
            for target in orgs if org == "*" else [int(org)]:
                mapped[target] = max(mapped.get(target, "None"), role, key=rank.__getitem__)
    path = env["GF_AUTH_JWT_ROLE_ATTRIBUTE_PATH"]
    direct = "Admin" if path and jmespath.search(path, {claim: groups}) == ADMIN_ROLE else None
    if not mapped:
        return {1: direct} if direct else {}
    return {org: max(role, direct, key=rank.__getitem__) if direct else role for org, role in mapped.items()}


@pytest.mark.parametrize("stack", STACKS)
def test_each_team_member_is_a_viewer_in_their_team_s_organization_only(stack: str) -> None:
    platform = platform_of(stack)
    facts = platform.front_door
    assert facts is not None
    env, orgs = _env(stack), team_orgs(platform)
    ids = [org.id for org in orgs]
    assert ids == list(range(FIRST_TEAM_ORG, FIRST_TEAM_ORG + len(platform.teams)))  # the bootstrap's order
    everything = [1, *ids]
    for grant in facts.grants:
        got = org_roles(env, [grant.group], everything, facts.groups_claim)
        if grant.team:
            own = next(org.id for org in orgs if org.team == grant.team)
            assert got == {own: "Viewer"}, grant  # no other team's organization, no Editor (no Explore)
        else:
            assert got == {org: "Admin" for org in everything}, grant
    assert org_roles(env, ["someone-else"], everything) == {}  # refused
    assert org_roles(env, [], everything) == {}
    assert env["GF_USERS_VIEWERS_CAN_EDIT"] == "false"
    # The access matrix's Grafana column says the same.
    assert GRAFANA.roles["read"] == GRAFANA.roles["edit"] == GRAFANA_TEAM_ROLE


def test_the_mapping_reader_sees_a_group_mapped_to_the_wrong_team() -> None:
    env = dict(_env("onprem-lab"))
    mapping = json.loads(env["GF_AUTH_JWT_ORG_MAPPING"])
    env["GF_AUTH_JWT_ORG_MAPPING"] = json.dumps([*mapping, "vision-read:2:Editor"])
    assert org_roles(env, ["vision-read"], [1, 2, 3, 4]) == {2: "Editor", 4: "Viewer"}


def test_a_group_with_a_colon_is_escaped() -> None:
    assert _split("corp\\:ml-eng:3:Viewer") == ["corp:ml-eng", "3", "Viewer"]


@pytest.mark.parametrize("stack", ["onprem-lab", "aws-prod"])
def test_team_dashboards_show_only_the_team(stack: str) -> None:
    platform = platform_of(stack)
    for org in plan(platform)["orgs"]:
        team = next(t for t in platform.teams if t.name == org["name"])
        assert [b["uid"] for b in org["dashboards"]] == ["trainyard-queues", "trainyard-usage"]
        for board in org["dashboards"]:
            (variable,) = board["templating"]["list"]
            assert variable["type"] == "constant" and variable["query"] in (team.name, team.queue)
            assert all("$team" in t["expr"] for panel in board["panels"] for t in panel["targets"])


# --- the bootstrap, against a fake Grafana ------------------------------------------------------------------------

class FakeGrafana(BaseHTTPRequestHandler):
    orgs: ClassVar[dict[str, int]] = {}
    content: ClassVar[dict[int, list[str]]] = {}
    datasources: ClassVar[dict[tuple[int, str], Any]] = {}  # (organization, uid) -> what Grafana holds
    seen: ClassVar[list[tuple[str, str, str, str]]] = []

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body: Any = json.loads(self.rfile.read(length)) if length else {}
        self.seen.append((method, self.path, self.headers.get(BOOTSTRAP_HEADER, ""),
                          self.headers.get("X-Grafana-Org-Id", "")))
        if self.path == "/api/health":
            return self._answer(200, {})
        if self.headers.get(BOOTSTRAP_HEADER) != "admin":
            return self._answer(401, {})
        org = int(self.headers.get("X-Grafana-Org-Id") or 1)
        if method == "GET" and self.path.startswith("/api/orgs/name/"):
            name = self.path.rsplit("/", 1)[1]
            return self._answer(200, {"id": self.orgs[name]}) if name in self.orgs else self._answer(404, {})
        if method == "POST" and self.path == "/api/orgs":
            self.orgs[body["name"]] = max([1, *self.orgs.values()]) + 1
            return self._answer(200, {"orgId": self.orgs[body["name"]]})
        if self.path.startswith("/api/datasources"):
            uid = body["uid"] if method == "POST" else self.path.rsplit("/", 1)[1]
            held = self.datasources.get((org, uid))
            if method == "GET" or (method == "PUT" and held is None):
                return self._answer(200, held) if held is not None else self._answer(404, {})
            self.datasources[(org, uid)] = body
            self.content.setdefault(org, []).append(f"datasource {uid}" + (" put" if method == "PUT" else ""))
            return self._answer(200, {})
        if method == "POST" and self.path == "/api/dashboards/db":
            self.content.setdefault(org, []).append(f"dashboard {body['dashboard']['uid']}")
            return self._answer(200, {})
        return self._answer(404, {})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def grafana() -> Iterator[str]:
    FakeGrafana.orgs, FakeGrafana.content, FakeGrafana.seen, FakeGrafana.datasources = {}, {}, [], {}
    server = HTTPServer(("127.0.0.1", 0), FakeGrafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_bootstrap_makes_each_team_s_organization_in_order_and_again_changes_nothing(grafana: str) -> None:
    the_plan = plan(platform_of("onprem-lab"))
    assert grafana_bootstrap.wait_for(grafana, 5)
    assert grafana_bootstrap.bootstrap(grafana, the_plan) == []
    assert FakeGrafana.orgs == {"nlp": 2, "speech": 3, "vision": 4}
    for org_id in (2, 3, 4):
        assert FakeGrafana.content[org_id] == ["datasource prometheus", "dashboard trainyard-queues",
                                               "dashboard trainyard-usage"]
    assert 1 not in FakeGrafana.content  # Grafana's own organization is the sidecar's
    posts = len([s for s in FakeGrafana.seen if s[0] == "POST" and s[1] == "/api/orgs"])
    assert grafana_bootstrap.bootstrap(grafana, the_plan) == []
    assert len([s for s in FakeGrafana.seen if s[0] == "POST" and s[1] == "/api/orgs"]) == posts
    assert len(FakeGrafana.content[2]) == 5  # the dashboards are written again (overwrite), the datasource kept


def test_the_bootstrap_puts_each_organization_s_datasource_back_to_its_team_s_proxy(grafana: str) -> None:
    """An organization made under an earlier plan still names Prometheus itself, which enforces no team: the
    bootstrap replaces it with the plan's proxy; one already right is left alone."""
    the_plan = plan(platform_of("onprem-lab"))
    FakeGrafana.orgs = {org["name"]: org["id"] for org in the_plan["orgs"]}
    first, second = the_plan["orgs"][:2]
    FakeGrafana.datasources[(first["id"], "prometheus")] = {**first["datasource"], "url": PROMETHEUS_URL}
    FakeGrafana.datasources[(second["id"], "prometheus")] = dict(second["datasource"])
    assert grafana_bootstrap.bootstrap(grafana, the_plan) == []
    for org in the_plan["orgs"]:
        assert FakeGrafana.datasources[(org["id"], "prometheus")] == org["datasource"]
    assert FakeGrafana.content[first["id"]][0] == "datasource prometheus put"
    assert not any(entry.startswith("datasource") for entry in FakeGrafana.content[second["id"]])
    assert FakeGrafana.content[the_plan["orgs"][2]["id"]][0] == "datasource prometheus"  # made


def test_the_bootstrap_refuses_an_organization_with_another_id(grafana: str) -> None:
    FakeGrafana.orgs = {"someone-made-this": 2}  # a persistent database, or an organization made by hand
    problems = grafana_bootstrap.bootstrap(grafana, plan(platform_of("onprem-lab")))
    assert problems == ["organization nlp has id 3, the groups are mapped to 2: not used",
                        "organization speech has id 4, the groups are mapped to 3: not used",
                        "organization vision has id 5, the groups are mapped to 4: not used"]
    assert 3 not in FakeGrafana.content


def test_the_bootstrap_reports_a_grafana_that_does_not_answer() -> None:
    assert not grafana_bootstrap.wait_for("http://127.0.0.1:9", 0.3, pause=0.1)


# --- rendered -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["onprem-lab", "hybrid-burst"])
def test_the_bootstrap_runs_in_grafana_s_pod_with_the_chart_s_sidecar_image_and_its_configmap(stack: str) -> None:
    pod = _grafana(stack)["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    chart_sidecar = containers["grafana-sc-dashboard"]["image"]
    assert containers["team-orgs"]["image"] == chart_sidecar
    assert containers["team-orgs"]["securityContext"]["allowPrivilegeEscalation"] is False
    maps = [c for c in kube_objects(capture_of(stack), "ConfigMap")
            if c["metadata"]["name"] == CONFIGMAP and c["metadata"]["namespace"] == MONITORING.namespace]
    assert len(maps) == 1
    assert maps[0]["data"] == configmap_data(platform_of(stack))
    assert {v["name"]: v for v in pod["volumes"]}[CONFIGMAP]["configMap"]["name"] == CONFIGMAP


@pytest.mark.parametrize("stack", ["onprem-lab", "aws-prod"])
def test_a_changed_plan_restarts_grafana_because_its_pod_carries_the_plan_s_checksum(stack: str) -> None:
    """The bootstrap's PLAN_SHA256 is the rendered plan file's (any change to the plan changes the pod template, so
    Grafana restarts and rebuilds the organizations at once); another stack's plan gives another one."""
    def plan_sha256_env(of: str) -> str:
        containers = {c["name"]: c for c in _grafana(of)["spec"]["template"]["spec"]["containers"]}
        return {e["name"]: e.get("value") for e in containers["team-orgs"]["env"]}["PLAN_SHA256"]

    (configmap,) = [c for c in kube_objects(capture_of(stack), "ConfigMap")
                    if c["metadata"]["name"] == CONFIGMAP and c["metadata"]["namespace"] == MONITORING.namespace]
    assert plan_sha256_env(stack) == hashlib.sha256(configmap["data"]["plan.json"].encode()).hexdigest()
    assert plan_sha256_env("aws-prod" if stack == "onprem-lab" else "onprem-lab") != plan_sha256_env(stack)


def test_the_bootstrap_applies_only_the_plan_its_pod_was_made_for(tmp_path: Any) -> None:
    """A ConfigMap volume lags the ConfigMap: a pod started for a new plan may still see the old file, which it must
    not apply (it ends, and restarts until the file is the one)."""
    path = tmp_path / "plan.json"
    path.write_text('{"orgs": []}', encoding="utf-8")
    made_for = hashlib.sha256(b'{"orgs": []}').hexdigest()
    assert grafana_bootstrap.read_plan(str(path), made_for) == {"orgs": []}
    path.write_text('{"orgs": [] }', encoding="utf-8")
    assert grafana_bootstrap.read_plan(str(path), made_for) is None
    assert grafana_bootstrap.read_plan(str(path), "") is None


def test_the_gateway_refuses_the_bootstrap_header() -> None:
    guard = next(p for p in kube_objects(capture_of("onprem-lab"), "AuthorizationPolicy")
                 if p["metadata"]["name"] == "deny-unclaimed-identity-headers"
                 and p["metadata"]["namespace"] == ISTIO.namespace)
    assert guard["spec"]["action"] == "DENY"
    assert {"when": [{"key": f"request.headers[{BOOTSTRAP_HEADER.lower()}]", "values": ["*"]}]} in \
        guard["spec"]["rules"]
    assert yaml.safe_load(_env("onprem-lab")["GF_AUTH_PROXY_WHITELIST"]) == "127.0.0.1"
