"""The access matrix's web section: each directory group's right behind the front door, from the stack's
`Platform.front_door` grants (infra/spec/frontdoor/web_access.py), the web role the binder binds each person of
the group to (infra/platform/web/binder.py), and each UI's role for it."""

from __future__ import annotations

from infra.kit.tables import markdown_table
from infra.spec.frontdoor.web_access import WEB_CI_ROLE, WEB_ROLES, FrontDoorFacts


def web_rights_section(door: FrontDoorFacts | None) -> list[str]:
    """Markdown lines: one row per group grant, one column per UI (its role for that right)."""
    lines = ["## Web rights (front door)", ""]
    if door is None:
        return [*lines, "The stack declares no front door: nobody has web access.", ""]
    lines += [f"Behind `{door.url}`, signed in through `{door.issuer}`. Derived from the same groups as the kubectl "
              "personas (`infra/spec/frontdoor/web_access.py`). Pipelines authorizes each person by user, not by "
              "group, so the web binder gives each signed-in member of a group a RoleBinding of the web role below "
              "in each namespace of the row, expiring with their session (docs/front-door.md). A team's `ci` "
              f"groups get nothing on the web: each team namespace's `trainyard-ci` ServiceAccount holds "
              f"`{WEB_CI_ROLE}` there, used with a token the cluster issues. Grafana signs each person in from the "
              "verified token itself and maps the same groups to its organizations: one per team, holding that "
              "team's dashboards and one datasource, which returns only that team's series (a label-enforcing "
              "proxy, infra/platform/grafana/datasources.py).", ""]
    rows = [["group", "persona", "team", "right", "namespaces", "web role", *(ui.name for ui in door.uis)]]
    for grant in door.grants:
        where = ", ".join(f"`{ns}`" for ns in grant.namespaces) or "every team's and the platform's"
        rows.append([f"`{grant.group}`", grant.persona, grant.team or "-", grant.right, where,
                     f"`{WEB_ROLES[grant.right]}`", *(ui.roles[grant.right] for ui in door.uis)])
    return [*lines, *markdown_table(rows)]
