"""The front door, live: verify's check and accept's `front-door` check against a fake gateway (an injected
client) and, for the HTTP client itself, a real server on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from infra.accept.runner import Failed, Run, Skipped
from infra.accept.web import TOKEN_FILE_ENV, front_door
from infra.components import USERID_HEADER
from infra.live.frontdoor import Answer, HttpsWeb, front_door_findings, to_sign_in
from infra.spec import Platform
from tests.conftest import STACKS, platform_of


def _jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT-shaped token: the fake gateway, not the check, would verify it."""
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{part}.c2ln"


TOKEN = _jwt({"email": "ada@example.com", "groups": ["vision-eng"]})  # onprem-lab's vision engineers
ADMIN_TOKEN = _jwt({"email": "root@example.com", "groups": ["platform-admins"]})


class Gateway:
    """A gateway that behaves (redirects without a token, serves with one), or with one fault."""

    def __init__(self, platform: Platform, fault: str = "") -> None:
        assert platform.front_door is not None
        self.door, self.fault = platform.front_door, fault
        self.asked: list[tuple[str, dict[str, str]]] = []

    def get(self, url: str, headers: Mapping[str, str]) -> Answer:
        self.asked.append((url, dict(headers)))
        if self.fault == "down":
            return Answer(0, "", "connection refused")
        who = {f"Bearer {TOKEN}": "member", f"Bearer {ADMIN_TOKEN}": "admin"}.get(headers.get("Authorization", ""))
        if who and self.fault != "refuses-token":
            # Grafana answers a member in their team's organization only (onprem-lab: vision is org 4);
            # Pipelines lists a team member's own namespace only.
            if "X-Trainyard-Grafana-Bootstrap" in headers and self.fault != "bootstrap-open":
                return Answer(403, "")  # the gateway's header guard
            org = headers.get("X-Grafana-Org-Id")
            if who == "member" and org not in (None, "4") and self.fault != "grafana-open":
                return Answer(403, "")
            # vision's datasource (its label proxy) refuses a query naming another queue
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("query", [""])[0]
            if "cluster_queue=" in query and 'cluster_queue="vision"' not in query \
                    and self.fault != "datasource-open":
                return Answer(400, "")
            if who == "member" and "namespace=" in url and not url.endswith("namespace=vision") \
                    and self.fault != "pipelines-open":
                return Answer(403, "")
            return Answer(200, "")
        if self.fault == "trusts-header" and USERID_HEADER in headers:
            return Answer(200, "")
        if self.fault == "open":
            return Answer(200, "")
        if self.fault == "elsewhere":
            return Answer(302, "https://login.example.invalid/auth")
        return Answer(302, f"{self.door.issuer}/auth?client_id=oauth2-proxy")


@pytest.mark.parametrize("stack", STACKS)
def test_verify_passes_a_gateway_that_behaves(stack: str) -> None:
    platform = platform_of(stack)
    gateway = Gateway(platform)
    assert front_door_findings(platform, gateway) == []
    assert platform.front_door is not None
    assert [url for url, _ in gateway.asked] == [f"{platform.front_door.url}/grafana/"] * 2
    assert gateway.asked[1][1][USERID_HEADER]  # the second request carries the forged identity


@pytest.mark.parametrize(("fault", "says"), [
    ("down", "does not answer (connection refused)"),
    ("open", "not a redirect to sign-in"),
    ("elsewhere", "not a redirect to sign-in"),
    ("trusts-header", "lets forged identities through"),
])
def test_verify_fails_a_gateway_that_misbehaves(fault: str, says: str) -> None:
    platform = platform_of("onprem-lab")
    findings = front_door_findings(platform, Gateway(platform, fault))
    assert len(findings) == (2 if fault in ("open", "elsewhere") else 1)
    assert says in findings[0].message or says in findings[-1].message
    assert all(f.subject.startswith("front door https://") for f in findings)


def test_sign_in_is_the_issuer_dex_or_oauth2_proxy_and_a_redirect() -> None:
    door = platform_of("onprem-lab").front_door
    assert door is not None
    assert to_sign_in(door, Answer(302, f"{door.issuer}/auth?x=1"))
    assert to_sign_in(door, Answer(302, "/oauth2/start?rd=/grafana/"))
    assert not to_sign_in(door, Answer(200, f"{door.issuer}/auth"))  # not a redirect
    assert not to_sign_in(door, Answer(302, f"{door.url}/grafana/login"))  # the UI's own login is not the IdP


def test_no_front_door_no_finding() -> None:
    platform = platform_of("local")
    bare = replace(platform, front_door=None)
    assert front_door_findings(bare, Gateway(platform, "down")) == []


# --- accept ---------------------------------------------------------------------------------------------------

def _run(platform: Platform, web: Any) -> Run:
    return Run(platform, None, "demo-accept", "demo", None, web=web)  # type: ignore[arg-type]


@pytest.fixture
def token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "id-token"
    path.write_text(TOKEN + "\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(path))
    return path


def test_accept_reaches_each_ui_as_the_member_s_rights_say_and_is_refused_another_team_s_views(token: Path) -> None:
    platform = platform_of("onprem-lab")
    gateway = Gateway(platform)
    run = _run(platform, gateway)
    summary = front_door(run)
    assert "reached grafana, pipelines" in summary and "refused: pipelines runs of nlp" in summary
    assert run.evidence["reached"] == ["grafana", "pipelines"] and run.evidence["problems"] == []
    assert run.evidence["refused"] == ["pipelines runs of nlp", "pipelines experiments of nlp",
                                       "grafana bootstrap header", "grafana query for nlp's queue",
                                       "grafana organization of nlp"]
    queries = [urllib.parse.unquote(url) for url, _ in gateway.asked if "/api/v1/query?query=" in url]
    asked = ("kueue_pending_workloads", 'kueue_pending_workloads{cluster_queue="nlp"}')
    assert gateway.door is not None
    assert queries == [f"{gateway.door.url}/grafana/api/datasources/proxy/uid/prometheus/api/v1/query?query={q}"
                       for q in asked]
    # The member's own runs and organization were asked for too: a refusal of everything would not pass.
    assert any(url.endswith("/runs?namespace=vision") for url, _ in gateway.asked)
    assert any(headers.get("X-Grafana-Org-Id") == "4" for _, headers in gateway.asked)


def test_accept_as_a_platform_admin_reaches_every_ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "admin").write_text(ADMIN_TOKEN)
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "admin"))
    platform = platform_of("onprem-lab")
    run = _run(platform, Gateway(platform))
    front_door(run)
    assert run.evidence["reached"] == ["grafana", "pipelines"] and run.evidence["refused"] == []


@pytest.mark.parametrize(("fault", "says"), [("refuses-token", "with the token got HTTP 302"),
                                              ("open", "without a token was not refused"),
                                              ("grafana-open", r"another team's organization \(nlp\) got HTTP 200"),
                                              ("datasource-open", "vision's datasource answered a query for nlp's "
                                                                  "queue with HTTP 200, not refused"),
                                              ("pipelines-open", r"another team's runs \(nlp\) got HTTP 200"),
                                              ("bootstrap-open", "bootstrap header X-Trainyard-Grafana-Bootstrap "
                                                                 "got HTTP 200, not refused")])
def test_accept_fails_when_the_token_is_refused_or_no_token_is_needed(token: Path, fault: str, says: str) -> None:
    platform = platform_of("onprem-lab")
    with pytest.raises(Failed, match=says):
        front_door(_run(platform, Gateway(platform, fault)))


def test_accept_skips_without_a_token_and_fails_on_an_empty_one(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    platform = platform_of("onprem-lab")
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    with pytest.raises(Skipped, match=TOKEN_FILE_ENV):
        front_door(_run(platform, Gateway(platform)))
    (tmp_path / "empty").write_text("\n")
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "empty"))
    with pytest.raises(Failed, match="empty"):
        front_door(_run(platform, Gateway(platform)))


# --- the HTTP client ------------------------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            self.send_response(200)
        else:
            self.send_response(302)
            self.send_header("Location", "/oauth2/start")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_client_reports_redirects_without_following_them(server: str) -> None:
    web = HttpsWeb()
    assert web.get(f"{server}/grafana/", {}) == Answer(302, "/oauth2/start")
    assert web.get(f"{server}/grafana/", {"Authorization": f"Bearer {TOKEN}"}).status == 200
    unreachable = web.get("http://127.0.0.1:9/", {})
    assert unreachable.status == 0 and unreachable.error
