"""Who `trainyard admit --as` submits as: a persona the stack declares (for a team where it is a team's), the
team's CI ServiceAccount, a pipeline's identities (the run's ServiceAccount in a team namespace, the KFP API
server that creates a run's Workflow, the Argo controller that creates its step pods), or the platform's own
deploy identity, resolved to the user name and groups the API server would authenticate the request to (the
identity provider's groups with the stack's groupPrefix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.apiserver.rbac import MASTERS, Identity
from infra.components import PIPELINES
from infra.platform.admission_steps import STEP_ACCOUNT
from infra.platform.rbac import ANALYST, CI, ML_ENGINEER, PLATFORM_ADMIN
from infra.platform.tenancy import CI_SERVICE_ACCOUNT
from infra.spec import Platform, SpecError

AUTHENTICATED = "system:authenticated"
CI_SERVICE_ACCOUNT_PERSONA = "ci-serviceaccount"
PLATFORM = "platform"  # who runs `pulumi up`: cluster-admin through system:masters
TEAM_PERSONAS = {ML_ENGINEER: "engineers", ANALYST: "analysts", CI: "ci"}  # persona -> its key in a team's groups
# A team namespace's ServiceAccounts: persona -> ServiceAccount name (in the team's first namespace).
ACCOUNT_PERSONAS = {CI_SERVICE_ACCOUNT_PERSONA: CI_SERVICE_ACCOUNT, "pipeline-step": STEP_ACCOUNT}
# Kubeflow Pipelines' controllers, as the vendored 26.03 overlay deploys them in `kubeflow`: the API server creates
# a run's Workflow, the Argo workflow controller its step pods.
CONTROLLER_PERSONAS = {"pipelines": "ml-pipeline", "workflow-controller": "argo"}
KFP_NAMESPACE = PIPELINES.namespace
UNTEAMED = (PLATFORM, PLATFORM_ADMIN, *CONTROLLER_PERSONAS)
PERSONAS = (PLATFORM, PLATFORM_ADMIN, *TEAM_PERSONAS, *ACCOUNT_PERSONAS, *CONTROLLER_PERSONAS)


def service_account(namespace: str, name: str) -> Identity:
    """How the API server authenticates a ServiceAccount's token."""
    return Identity(f"system:serviceaccount:{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


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
    if team and (persona in UNTEAMED or team not in teams):
        why = f"{persona} is not a team's persona" if persona in UNTEAMED else \
            f"the stack has no team {team!r} (its teams: {', '.join(teams)})"
        raise SpecError("--as", f"{why}: give {persona}" + ("" if persona in UNTEAMED
                                                            else f"[:TEAM] with TEAM one of {', '.join(teams)}"))
    identity = platform.spec.identity
    if persona == PLATFORM:
        return PLATFORM, Identity("trainyard-platform", (MASTERS, AUTHENTICATED))
    if persona == PLATFORM_ADMIN:
        return PLATFORM_ADMIN, Identity(PLATFORM_ADMIN, (*(identity.group(g) for g in identity.platform_admins),
                                                         AUTHENTICATED))
    if persona in CONTROLLER_PERSONAS:
        return persona, service_account(KFP_NAMESPACE, CONTROLLER_PERSONAS[persona])
    team = team or default_team(platform, submitted)
    if persona in ACCOUNT_PERSONAS:
        namespace = next(t for t in platform.teams if t.name == team).namespaces[0]
        return f"{persona}:{team}", service_account(namespace, ACCOUNT_PERSONAS[persona])
    names = getattr(platform.spec.teams[team].groups, TEAM_PERSONAS[persona])
    return f"{persona}:{team}", Identity(f"{persona}@{team}", (*(identity.group(g) for g in names), AUTHENTICATED))
