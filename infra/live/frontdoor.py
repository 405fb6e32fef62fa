"""The front door, live (docs/front-door.md): the gateway answers on the stack's host, sends an anonymous request
to sign-in, and refuses a forged identity header that comes without a token. Plain HTTPS to the host, through an
injectable client (`Web`), so tests answer for the gateway; redirects are never followed (where one points is the
answer). `trainyard accept`'s `front-door` check (infra/accept/web.py) reuses the client and the sign-in test.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import NamedTuple, Protocol

from infra.components import GROUPS_HEADER, USERID_HEADER
from infra.spec import Finding, Platform
from infra.spec.frontdoor.web_access import DEX_PATH, FrontDoorFacts

TIMEOUT = 20
REDIRECTS = (301, 302, 303, 307, 308)
REFUSED = (401, 403)
FORGED_USER = "trainyard-verify-forged@example.invalid"  # no such person: only a forgery could carry it


class Answer(NamedTuple):
    status: int  # 0: no HTTP answer at all
    location: str  # the Location header of a redirect, else ""
    error: str = ""  # why there was no answer


class Web(Protocol):
    def get(self, url: str, headers: Mapping[str, str]) -> Answer: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx status, which is the answer we want


class HttpsWeb:
    """GET over HTTPS with the system's trust store (the host's certificate must verify, as for a browser)."""

    def get(self, url: str, headers: Mapping[str, str]) -> Answer:
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(urllib.request.Request(url, headers=dict(headers)), timeout=TIMEOUT) as response:
                return Answer(response.status, response.headers.get("Location", ""))
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.headers.get("Location", "") if error.headers else "")
        except OSError as error:  # DNS, refused, TLS verification, timeout
            return Answer(0, "", " ".join(str(getattr(error, "reason", error)).split())[:200])


def to_sign_in(door: FrontDoorFacts, answer: Answer) -> bool:
    """A redirect to the identity provider: its issuer, Dex under the host, or oauth2-proxy's sign-in."""
    if answer.status not in REDIRECTS:
        return False
    targets = (door.issuer, f"{door.url}{DEX_PATH}/", f"{door.url}/oauth2/", "/oauth2/", f"{DEX_PATH}/")
    return answer.location.startswith(targets)


def refused(door: FrontDoorFacts, answer: Answer) -> bool:
    """What a request without a valid token must get: 401/403, or sent to sign-in; never the UI."""
    return answer.status in REFUSED or to_sign_in(door, answer)


def front_door_findings(platform: Platform, web: Web) -> list[Finding]:
    door = platform.front_door
    if door is None:
        return []
    where = f"front door {door.url}"
    page = f"{door.url}{door.uis[0].path if door.uis else '/'}"
    anonymous = web.get(page, {})
    if anonymous.status == 0:
        return [Finding("verify", where, f"the gateway does not answer ({anonymous.error}): is its load balancer "
                        "up and the host in DNS (`trainyard prerequisites`)?")]
    findings = []
    if not to_sign_in(door, anonymous):
        findings.append(Finding("verify", where, f"an anonymous GET {page} got HTTP {anonymous.status}"
                                f"{' to ' + anonymous.location if anonymous.location else ''}, not a redirect to "
                                f"sign-in at {door.issuer}"))
    admins = ",".join(door.platform_admins)
    forged = web.get(page, {USERID_HEADER: FORGED_USER, **({GROUPS_HEADER: admins} if admins else {})})
    if not refused(door, forged):
        findings.append(Finding("verify", where, f"a GET {page} with a forged {USERID_HEADER} header and no token "
                                f"got HTTP {forged.status}, not 401/403 or sign-in: the gateway lets forged "
                                "identities through"))
    return findings
