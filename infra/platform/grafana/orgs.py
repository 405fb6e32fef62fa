"""Each team's Grafana organization (docs/front-door.md, "Signing in to Grafana"): a team member signs in to their
team's organization only, which holds that team's dashboards (its queue, its GPU usage); platform admins are Admin
in every organization and server admins.

- The mapping: Grafana's `auth.jwt` `org_mapping` from the token's groups (`teams.<team>.groups` engineers and
  analysts -> Viewer in the team's organization, by id; `identity.platformAdmins` -> Admin in all, `*`). Everyone is
  a Viewer in a team organization: its dashboards are provisioned read-only, and a Viewer has no Explore, so nobody
  writes free queries there; engineers edit in Pipelines, not in Grafana.
- The organizations: Grafana OSS provisions none from files (grafana/grafana#12119) and resolves org names only at
  its start, so ids are used, and a bootstrap beside Grafana in its pod (bootstrap.py, in the chart's own
  sidecar image) creates them through the API in the teams' sorted order: Grafana's database is the pod's emptyDir,
  so organization 1 is Grafana's own and the teams' get 2, 3, ... on every start; a mismatch is refused, not used.
- The bootstrap signs in as the chart's bootstrap admin through Grafana's auth proxy, which accepts only requests
  from 127.0.0.1 (inside the pod); the gateway also refuses the proxy's header from anyone.
- The datasource: each team organization's only datasource is the team's prom-label-proxy, which answers with the
  team's series alone whatever the query (grafana/datasources.py), so a member's raw request to Grafana's query API
  reads no other team's; organization 1 keeps the chart's unrestricted Prometheus, for platform admins.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.platform.dashboards import team_dashboards
from infra.platform.frontdoor_patches import LAPTOP_GATEWAY_IP
from infra.platform.grafana import bootstrap as grafana_bootstrap
from infra.platform.grafana.datasources import datasource
from infra.platform.grafana.sso import grafana_values
from infra.spec import Platform

FIRST_TEAM_ORG = 2  # organization 1 is Grafana's own: the platform's dashboards, for platform admins
CONFIGMAP = "grafana-team-orgs"
MOUNT = "/etc/grafana/team-orgs"
BOOTSTRAP_HEADER = grafana_bootstrap.HEADER
BOOTSTRAP_USER = "admin"  # the chart's bootstrap user (Secret grafana-admin, key admin-user)
LOCALHOST = "127.0.0.1"
# The grafana subchart 12.11.1's own sidecar image (values sidecar.image): Python, which the bootstrap runs in.
SIDECAR_IMAGE = "quay.io/kiwigrid/k8s-sidecar:2.10.1"
TEAM_ROLE = "Viewer"
ADMIN_ROLE = "Admin"


@dataclass(frozen=True)
class TeamOrg:
    id: int
    team: str
    groups: tuple[str, ...]  # the directory groups whose members are Viewers here


def team_orgs(platform: Platform) -> tuple[TeamOrg, ...]:
    """Every team's organization, in the teams' sorted order (the order the bootstrap creates them in)."""
    door = platform.front_door
    grants = door.grants if door is not None else ()
    return tuple(TeamOrg(FIRST_TEAM_ORG + index, team.name,
                         tuple(sorted({g.group for g in grants if g.team == team.name})))
                 for index, team in enumerate(sorted(platform.teams, key=lambda t: t.name)))


def _escaped(group: str) -> str:
    """A group in org_mapping, whose fields are split on unescaped colons."""
    return group.replace(":", "\\:")


def org_mapping(platform: Platform) -> str:
    """Grafana's org_mapping, as a JSON list (Grafana reads a value starting with `[` as one)."""
    door = platform.front_door
    admins = sorted(set(door.platform_admins)) if door is not None else []
    entries = [f"{_escaped(group)}:{org.id}:{TEAM_ROLE}" for org in team_orgs(platform) for group in org.groups]
    entries += [f"{_escaped(group)}:*:{ADMIN_ROLE}" for group in admins]
    return json.dumps(entries)


def plan(platform: Platform) -> dict[str, Any]:
    """What the bootstrap makes: per organization its id, name, datasource (the team's proxy) and dashboards."""
    queues = {team.name: team.queue for team in platform.teams}
    return {"user": BOOTSTRAP_USER,
            "orgs": [{"id": org.id, "name": org.team, "datasource": datasource(org.team),
                      "dashboards": team_dashboards(platform, queues[org.team], org.team)}
                     for org in team_orgs(platform)]}


def configmap_data(platform: Platform) -> dict[str, str]:
    """The ConfigMap the bootstrap reads: its plan and its program."""
    return {"plan.json": json.dumps(plan(platform), sort_keys=True, indent=1),
            "grafana_bootstrap.py": Path(grafana_bootstrap.__file__).read_text(encoding="utf-8")}


def bootstrap_container(plan_sha256: str) -> dict[str, Any]:
    return {"name": "team-orgs", "image": SIDECAR_IMAGE, "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-u", f"{MOUNT}/grafana_bootstrap.py"],
            "env": [{"name": "GRAFANA_URL", "value": f"http://{LOCALHOST}:3000"},
                    {"name": "PLAN_FILE", "value": f"{MOUNT}/plan.json"},
                    {"name": "PLAN_SHA256", "value": plan_sha256}],
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": CONFIGMAP, "mountPath": MOUNT, "readOnly": True}]}


def front_door_values(platform: Platform) -> dict[str, Any]:
    """The grafana subchart's values behind the front door: the sign-in (grafana/sso.py) and the team
    organizations (the mapping and the localhost-only auth proxy as environment, the bootstrap container, its
    ConfigMap)."""
    door = platform.front_door
    assert door is not None
    values = grafana_values(door)
    if platform.spec.laptop:  # kind resolves no *.localhost to the gateway: Grafana reads Dex's keys through the host
        values["hostAliases"] = [{"ip": LAPTOP_GATEWAY_IP, "hostnames": [door.spec.host]}]
    env = {"GF_AUTH_JWT_ORG_MAPPING": org_mapping(platform),
           "GF_USERS_VIEWERS_CAN_EDIT": "false",  # Explore stays with Editors and Admins
           "GF_AUTH_PROXY_ENABLED": "true", "GF_AUTH_PROXY_HEADER_NAME": BOOTSTRAP_HEADER,
           "GF_AUTH_PROXY_HEADER_PROPERTY": "username", "GF_AUTH_PROXY_AUTO_SIGN_UP": "false",
           "GF_AUTH_PROXY_WHITELIST": LOCALHOST, "GF_AUTH_PROXY_ENABLE_LOGIN_TOKEN": "false"}
    values["env"].update(env)
    values.update({
        # extraContainers is a template string in the chart (tpl'd): our YAML holds no `{{`.
        "extraContainers": yaml.safe_dump([bootstrap_container(plan_sha256(platform))], sort_keys=True),
        "extraConfigmapMounts": [{"name": CONFIGMAP, "configMap": CONFIGMAP, "mountPath": MOUNT, "readOnly": True}]})
    return values


def plan_sha256(platform: Platform) -> str:
    """The plan file's sha256, in the bootstrap's environment: a changed plan (a datasource, a dashboard) changes
    Grafana's pod template, so Grafana restarts and the organizations are rebuilt from it at once (as the chart's own
    checksum annotations do for its config), and the bootstrap applies no other plan file than this one."""
    return hashlib.sha256(configmap_data(platform)["plan.json"].encode()).hexdigest()
