"""The Kubeflow Pipelines REST API (v2beta1) behind the front door: `{frontDoor.url}/pipeline/apis/v2beta1/...`,
where the gateway verifies the caller's ID token, writes `kubeflow-userid` from it, and the pipelines UI's server
passes `/apis/` on to the API server (the address the KFP SDK's `kfp.Client(host=<url>/pipeline)` uses).

verify's check (live-pipelines-api): the API answers through the gateway and refuses a request without a token and
one with a forged identity header, as the front door's UIs must. `trainyard accept`'s `pipeline` check
(infra/accept/pipeline.py) drives the same API with a team member's token, through an injectable client.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from infra.components import USERID_HEADER
from infra.live.frontdoor import FORGED_USER, TIMEOUT, Web, refused
from infra.platform.kfp import observability as pipeline_observability
from infra.spec import Finding, Platform
from infra.spec.frontdoor.web_access import FrontDoorFacts

API_PATH = "/pipeline/apis/v2beta1"


class Reply(NamedTuple):
    status: int  # 0: no HTTP answer
    body: Any  # the JSON answer, the text when it is not JSON, the bytes of a gRPC-Web answer
    error: str = ""


class PipelinesApi(Protocol):
    def call(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Reply: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect (to sign-in) is an answer, not a place to follow


class HttpsPipelinesApi:
    """JSON over HTTPS with the system's trust store."""

    def call(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Reply:
        opener = urllib.request.build_opener(_NoRedirect)
        request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with opener.open(request, timeout=TIMEOUT) as response:
                return Reply(response.status, _parsed(response.read(), response.headers.get("Content-Type", "")))
        except urllib.error.HTTPError as error:
            kind = error.headers.get("Content-Type", "") if error.headers else ""
            return Reply(error.code, _parsed(error.read() if error.fp else b"", kind))
        except OSError as error:  # DNS, refused, TLS verification, timeout
            return Reply(0, None, " ".join(str(getattr(error, "reason", error)).split())[:200])


def _parsed(data: bytes, kind: str) -> Any:
    if "grpc" in kind:  # ML Metadata's gRPC-Web frames (infra/live/mlmd.py)
        return data
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text[:500]


def base_url(door: FrontDoorFacts) -> str:
    return f"{door.url}{API_PATH}"


def multipart(field: str, filename: str, content: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with one file (the upload endpoint's form field `uploadfile`), and its type."""
    boundary = f"trainyard-{uuid.uuid4().hex}"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
            "Content-Type: application/x-yaml\r\n\r\n").encode()
    return head + content + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def pipeline_api_findings(platform: Platform, web: Web) -> list[Finding]:
    """The API answers through the gateway, and without a token (or with a forged identity header) refuses."""
    door = platform.front_door
    if door is None or not pipeline_observability.pipelines_declared(platform):
        return []
    url = f"{base_url(door)}/healthz"
    where = f"pipelines API {url}"
    anonymous = web.get(url, {})
    if anonymous.status == 0:
        return [Finding("verify", where, f"no answer through the gateway ({anonymous.error})")]
    findings = []
    for what, answer in (("without a token", anonymous),
                         (f"with a forged {USERID_HEADER} header", web.get(url, {USERID_HEADER: FORGED_USER}))):
        if not refused(door, answer):
            findings.append(Finding("verify", where, f"a GET {what} got HTTP {answer.status}, not 401/403 or "
                                    "sign-in: the pipelines API is open around the front door"))
    return findings
