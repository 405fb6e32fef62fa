"""Who `trainyard admit --as` submits as: a persona the stack declares (for a team where it is a team's), the
team's CI ServiceAccount, or the platform's own deploy identity, resolved to the user name and groups the API
server would authenticate the request to (the identity provider's groups with the stack's groupPrefix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.apiserver.rbac import MASTERS, Identity
from infra.platform.rbac import ANALYST, CI, ML_ENGINEER, PLATFORM_ADMIN
from infra.platform.tenancy import CI_SERVICE_ACCOUNT
from infra.spec import Platform, SpecError

AUTHENTICATED = "system:authenticated"
CI_SERVICE_ACCOUNT_PERSONA = "ci-serviceaccount"
PLATFORM = "platform"  # who runs `pulumi up`: cluster-admin through system:masters
TEAM_PERSONAS = {ML_ENGINEER: "engineers", ANALYST: "analysts", CI: "ci"}  # persona -> its key in a team's groups
PERSONAS = (PLATFORM, PLATFORM_ADMIN, *TEAM_PERSONAS, CI_SERVICE_ACCOUNT_PERSONA)


def team_of(platform: Platform, namespace: str) -> str | None:
    return next((team.name for team in platform.teams if namespace in team.namespaces), None)


def default_team(platform: Platform, submitted: Sequence[dict[str, Any]]) -> str:
    """The team of the first submitted object in a team namespace, else the stack's first team."""
    for obj in submitted:
        team = team_of(platform, str(obj.get("metadata", {}).get("namespace", "")))
        if team:
            return team
    return platform.teams[0].name


def resolve(platform: Platform, value: str | None, submitted: Sequence[dict[str, Any]]) -> tuple[str, Identity]:
    """(how to name it, the identity) for `--as PERSONA[:TEAM]`; unknown persona or team is bad input."""
    persona, _, team = (value or ML_ENGINEER).partition(":")
    if persona not in PERSONAS:
        raise SpecError("--as", f"unknown persona {persona!r}: give one of {', '.join(PERSONAS)} (optionally :TEAM)")
    teams = [t.name for t in platform.teams]
    if team and (persona in (PLATFORM, PLATFORM_ADMIN) or team not in teams):
        why = f"{persona} is not a team's persona" if persona in (PLATFORM, PLATFORM_ADMIN) else \
            f"the stack has no team {team!r} (its teams: {', '.join(teams)})"
        raise SpecError("--as", f"{why}: give {persona}" + ("" if persona in (PLATFORM, PLATFORM_ADMIN)
                                                            else f"[:TEAM] with TEAM one of {', '.join(teams)}"))
    identity = platform.spec.identity
    if persona == PLATFORM:
        return PLATFORM, Identity("trainyard-platform", (MASTERS, AUTHENTICATED))
    if persona == PLATFORM_ADMIN:
        return PLATFORM_ADMIN, Identity(PLATFORM_ADMIN, (*(identity.group(g) for g in identity.platform_admins),
                                                         AUTHENTICATED))
    team = team or default_team(platform, submitted)
    if persona == CI_SERVICE_ACCOUNT_PERSONA:
        namespace = next(t for t in platform.teams if t.name == team).namespaces[0]
        return f"{persona}:{team}", Identity(f"system:serviceaccount:{namespace}:{CI_SERVICE_ACCOUNT}", (
            "system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))
    names = getattr(platform.spec.teams[team].groups, TEAM_PERSONAS[persona])
    return f"{persona}:{team}", Identity(f"{persona}@{team}", (*(identity.group(g) for g in names), AUTHENTICATED))
