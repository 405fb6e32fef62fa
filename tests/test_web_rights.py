"""The web rights of the access matrix (issue 29 point 3): what each persona gets behind the front door, and what
it must not: analysts never edit, a team's groups get nothing in another team's namespaces, CI groups nothing."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from infra.apiserver.rbac import access_matrix
from infra.apiserver.web_rights import web_rights_section
from infra.spec import Platform
from infra.spec.frontdoor.web_access import GRAFANA_TEAM_ROLE, WebGrant
from tests.conftest import STACKS, capture_of, platform_of


def violations(platform: Platform, grants: Iterable[WebGrant]) -> list[str]:
    """What the web grants must never do, each broken grant named."""
    teams = platform.spec.teams
    own = {team.name: set(team.namespaces) for team in platform.teams}
    analysts = {g for name in teams for g in teams[name].groups.analysts}
    ci = {g for name in teams for g in teams[name].groups.ci}
    found = []
    for grant in grants:
        if grant.persona == "platform-admin":
            continue
        others = set().union(*(ns for name, ns in own.items() if name != grant.team))
        if grant.group in analysts and grant.right != "read":
            found.append(f"analyst group {grant.group} gets {grant.right}")
        trespass = sorted(set(grant.namespaces) & others)
        if trespass:
            found.append(f"{grant.group} of {grant.team} gets {grant.right} in {trespass}")
        if set(grant.namespaces) != own.get(grant.team, set()):
            found.append(f"{grant.group} of {grant.team}: {grant.namespaces} are not exactly its namespaces")
        if grant.group in ci:
            found.append(f"ci group {grant.group} signs in on the web")
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_no_analyst_edits_and_no_team_reaches_another_on_the_web(stack: str) -> None:
    platform = platform_of(stack)
    door = platform.front_door
    assert door is not None
    assert [g for g in door.grants if g.persona == "analyst"], "no analyst grant: nothing checked"
    assert violations(platform, door.grants) == []
    # read is a Viewer in the team's Grafana organization (no edit, no Explore: tests/test_grafana_orgs.py), and the
    # binder's read role for Pipelines (get/list, no create: tests/test_web_binder.py)
    assert {ui.roles["read"] for ui in door.uis} <= {GRAFANA_TEAM_ROLE, "trainyard-web-read"}


def test_the_rules_fail_an_analyst_that_edits_or_a_grant_in_another_team() -> None:
    platform = platform_of("onprem-lab")
    edits = WebGrant("nlp-read", "nlp", "analyst", "edit", ("nlp", "nlp-models"))
    trespass = WebGrant("nlp-eng", "nlp", "ml-engineer", "edit", ("nlp", "nlp-models", "vision"))
    assert violations(platform, [edits]) == ["analyst group nlp-read gets edit"]
    assert violations(platform, [trespass])[0] == "nlp-eng of nlp gets edit in ['vision']"


def test_the_matrix_lists_each_group_with_its_right() -> None:
    door = platform_of("onprem-lab").front_door
    assert door is not None
    rows = [line for line in web_rights_section(door) if line.startswith("| `")]
    assert len(rows) == len(door.grants)
    for grant in door.grants:
        row = next(r for r in rows if r.startswith(f"| `{grant.group}` | {grant.persona} |"))
        assert f"| {grant.right} |" in row
    analyst_rows = [r for r in rows if "| analyst |" in r]
    assert analyst_rows and not [r for r in analyst_rows if "edit" in r or "Editor" in r or "Admin" in r]


def test_no_front_door_no_web_right() -> None:
    assert "nobody has web access" in "\n".join(web_rights_section(None))
    assert "## Web rights (front door)" in access_matrix(capture_of("onprem-lab"), platform_of("onprem-lab").front_door)
