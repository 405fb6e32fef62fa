"""`trainyard accept`'s `front-door` check: signed in as a team member, each UI of the stack's front door answers as
that person's rights say, another team's views are refused, and the same request without the token is refused
(docs/acceptance.md says how to supply the token).

The token is a team member's OIDC ID token from the stack's issuer (Dex or the corporate provider), in the file
named by $TRAINYARD_WEB_TOKEN_FILE: a file, so it stays out of the shell history and the process list. The gateway
verifies it as the vendored `dex-jwt` RequestAuthentication does and turns its claims into the identity headers;
the check reads the token's groups (without verifying it: the gateway and the UIs do that) only to know whose views
are the person's own and whose are another team's.

- Pipelines: the UI answers; the person's own namespace's runs are listed, another team's runs and experiments are
  refused (the API server's SubjectAccessReview against the web binder's RoleBindings).
- Grafana: the person's own team organization answers (`X-Grafana-Org-Id`, infra/platform/grafana/orgs.py), another
  team's is refused, and the bootstrap's admin header is refused at the gateway even with the person's token. Its
  datasource (the team's label proxy, infra/platform/grafana/datasources.py) answers a raw query for the team's own
  queue and refuses one for another team's queue.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

from infra.accept.runner import Failed, Run, Skipped
from infra.live.frontdoor import Answer, HttpsWeb, Web, refused
from infra.live.pipelines import API_PATH
from infra.platform.dashboards import DATASOURCE
from infra.platform.grafana.datasources import LABEL
from infra.platform.grafana.orgs import BOOTSTRAP_HEADER, BOOTSTRAP_USER, team_orgs
from infra.spec.frontdoor.web_access import GRAFANA, PIPELINES_UI, FrontDoorFacts

TOKEN_FILE_ENV = "TRAINYARD_WEB_TOKEN_FILE"
OTHER_TEAM_VIEWS = ("runs", "experiments")  # Pipelines' namespaced lists, asked for another team's namespace
GRAFANA_ORG_HEADER = "X-Grafana-Org-Id"  # Grafana answers in that organization, if the person is a member
GRAFANA_SEARCH = "api/search"  # the organization's dashboards
# A raw query through the organization's datasource (Grafana's datasource proxy, which a Viewer may call)
GRAFANA_QUERY = f"api/datasources/proxy/uid/{DATASOURCE['uid']}/api/v1/query?query="
QUEUE_METRIC = "kueue_pending_workloads"


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


def claims_of(token: str) -> dict[str, Any]:
    """The token's claims, unverified (a token that is not a JWT has none)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _groups(door: FrontDoorFacts, token: str) -> list[str]:
    groups = claims_of(token).get(door.groups_claim, [])
    return [str(g) for g in groups] if isinstance(groups, list) else []


def _said(answer: Answer) -> str:
    return f"HTTP {answer.status}{' to ' + answer.location if answer.location else ''} {answer.error}".rstrip()


def _pipelines(web: Web, door: FrontDoorFacts, bearer: dict[str, str], own: list[str],
               others: list[str]) -> tuple[list[str], list[str]]:
    """(refusals seen, problems): the person's own runs listed, another team's runs and experiments refused."""
    seen, problems = [], []
    api = f"{door.url}{API_PATH}"
    for namespace in own[:1]:
        answer = web.get(f"{api}/runs?namespace={namespace}", bearer)
        if not 200 <= answer.status < 300:
            problems.append(f"pipelines: the person's own runs in {namespace} got {_said(answer)}")
    for namespace in others[:1]:
        for view in OTHER_TEAM_VIEWS:
            answer = web.get(f"{api}/{view}?namespace={namespace}", bearer)
            if refused(door, answer):
                seen.append(f"pipelines {view} of {namespace}")
            else:
                problems.append(f"pipelines: another team's {view} ({namespace}) got {_said(answer)}, not refused")
    return seen, problems


def _query(metric: str, queue: str | None = None) -> str:
    selector = f'{metric}{{{LABEL}="{queue}"}}' if queue else metric
    return GRAFANA_QUERY + urllib.parse.quote(selector, safe="")


def _grafana(web: Web, door: FrontDoorFacts, bearer: dict[str, str], own: list[tuple[int, str]],
             others: list[tuple[int, str]], queues: dict[str, str]) -> tuple[list[str], list[str]]:
    """(refusals seen, problems): the person's team organization answers, another team's is refused, and so is the
    bootstrap's admin header even with the person's valid token (the gateway's header guard); in the person's
    organization a raw query answers for the own queue and is refused (HTTP 4xx: the label proxy's
    -error-on-replace) for another team's."""
    seen, problems = [], []
    base = f"{door.url}{GRAFANA.path}"
    url = f"{base}{GRAFANA_SEARCH}"
    forged = web.get(url, {**bearer, BOOTSTRAP_HEADER: BOOTSTRAP_USER})
    if refused(door, forged):
        seen.append("grafana bootstrap header")
    else:
        problems.append(f"grafana: the bootstrap header {BOOTSTRAP_HEADER} got {_said(forged)}, not refused")
    for org, team in own[:1]:
        in_org = {**bearer, GRAFANA_ORG_HEADER: str(org)}
        answer = web.get(url, in_org)
        if not 200 <= answer.status < 300:
            problems.append(f"grafana: the person's own organization ({team}) got {_said(answer)}")
        answer = web.get(f"{base}{_query(QUEUE_METRIC)}", in_org)
        if not 200 <= answer.status < 300:
            problems.append(f"grafana: a query of {team}'s datasource for its own queue got {_said(answer)}")
        for _, other in others[:1]:
            answer = web.get(f"{base}{_query(QUEUE_METRIC, queues[other])}", in_org)
            if 400 <= answer.status < 500:
                seen.append(f"grafana query for {other}'s queue")
            else:
                problems.append(f"grafana: {team}'s datasource answered a query for {other}'s queue with "
                                f"{_said(answer)}, not refused")
    for org, team in others[:1]:
        answer = web.get(url, {**bearer, GRAFANA_ORG_HEADER: str(org)})
        if refused(door, answer):
            seen.append(f"grafana organization of {team}")
        else:
            problems.append(f"grafana: another team's organization ({team}) got {_said(answer)}, not refused")
    return seen, problems


def front_door(run: Run) -> str:
    door = run.platform.front_door
    if door is None or not door.uis:
        raise Skipped("the stack declares no front door" if door is None else "no web UI behind the front door")
    token = token_from()
    web = run.web or HttpsWeb()
    bearer = {"Authorization": f"Bearer {token}"}
    groups = _groups(door, token)
    admin = any(group in door.platform_admins for group in groups)
    own = sorted({ns for group in groups for ns, _ in door.bindings_of(group)})
    others = [ns for ns in door.team_namespaces if ns not in own]
    reached, refusals, problems = [], [], []
    for ui in door.uis:
        url = f"{door.url}{ui.path}"
        signed_in = web.get(url, bearer)
        if 200 <= signed_in.status < 300:
            reached.append(ui.name)
        else:
            problems.append(f"{ui.name}: GET {url} with the token got {_said(signed_in)}")
        if not refused(door, web.get(url, {})):
            problems.append(f"{ui.name}: GET {url} without a token was not refused")
    checks = []
    if PIPELINES_UI in door.uis and not admin:
        checks.append(_pipelines(web, door, bearer, own, others))
    if GRAFANA in door.uis and not admin:
        teams = {team for group in groups for grant in door.grants_of(group) for team in [grant.team] if team}
        orgs = [(org.id, org.team) for org in team_orgs(run.platform)]
        checks.append(_grafana(web, door, bearer, [o for o in orgs if o[1] in teams],
                               [o for o in orgs if o[1] not in teams], {t.name: t.queue for t in run.platform.teams}))
    for seen, found in checks:
        refusals += seen
        problems += found
    run.evidence.update({"groups": groups, "reached": reached, "refused": refusals, "problems": problems})
    if problems:
        raise Failed(f"{len(problems)} problem(s): {problems[0]}")
    return (f"signed in with the token, reached {', '.join(reached) or 'nothing'}"
            f"{'; refused: ' + ', '.join(refusals) if refusals else ''}; without it refused")
