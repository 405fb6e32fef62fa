"""`trainyard accept`'s `front-door` check: signed in as a team member, each UI of the stack's front door answers,
and the same request without the token is refused (docs/acceptance.md says how to supply the token).

The token is a team member's OIDC ID token from the stack's issuer (Dex or the corporate provider), in the file
named by $TRAINYARD_WEB_TOKEN_FILE: a file, so it stays out of the shell history and the process list. The gateway
verifies it as the vendored `dex-jwt` RequestAuthentication does and turns its claims into the identity headers.

Another team's views: a UI that shows per-team views is asked for another team's and must refuse. Grafana has none
today: it does not read the identity yet (its local login is in use behind the gateway, no per-team folders), so
every signed-in person reaches all of it; the check says so in its summary and evidence instead of claiming a
refusal it did not see.
"""

from __future__ import annotations

import os
from pathlib import Path

from infra.accept.runner import Failed, Run, Skipped
from infra.live.frontdoor import HttpsWeb, refused

TOKEN_FILE_ENV = "TRAINYARD_WEB_TOKEN_FILE"
NO_TEAM_VIEWS = {"grafana": "Grafana has no per-team view yet (it does not read the identity; every signed-in "
                            "person reaches all of it)"}


def token_from(env: str = TOKEN_FILE_ENV, whose: str = "a team member's") -> str:
    """The ID token in the file $env names (Skipped without the variable; Failed for an unreadable or empty file)."""
    path = os.environ.get(env)
    if not path:
        raise Skipped(f"no token: set {env} to a file holding {whose} OIDC ID token")
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise Failed(f"{env}={path}: cannot read the token ({error.strerror})") from None
    if not token:
        raise Failed(f"{env}={path}: the file is empty")
    return token


def front_door(run: Run) -> str:
    door = run.platform.front_door
    if door is None or not door.uis:
        raise Skipped("the stack declares no front door" if door is None else "no web UI behind the front door")
    token = token_from()
    web = run.web or HttpsWeb()
    reached, problems = [], []
    for ui in door.uis:
        url = f"{door.url}{ui.path}"
        signed_in = web.get(url, {"Authorization": f"Bearer {token}"})
        anonymous = web.get(url, {})
        if not 200 <= signed_in.status < 300:
            problems.append(f"{ui.name}: GET {url} with the token got HTTP {signed_in.status}"
                            f"{' to ' + signed_in.location if signed_in.location else ''} {signed_in.error}".rstrip())
        else:
            reached.append(ui.name)
        if not refused(door, anonymous):
            problems.append(f"{ui.name}: GET {url} without a token got HTTP {anonymous.status}, not refused")
    other_views = [NO_TEAM_VIEWS[ui.name] for ui in door.uis if ui.name in NO_TEAM_VIEWS]
    run.evidence.update({"reached": reached, "problems": problems, "other-team views": other_views})
    if problems:
        raise Failed(f"{len(problems)} problem(s): {problems[0]}")
    return (f"signed in with the token, reached {', '.join(reached)}; without it refused"
            + (f"; another team's views: none to refuse: {'; '.join(other_views)}" if other_views else ""))
