"""docs/stacks/<stack>.md: the facts of one stack (pools, capacity, teams, versions, objects, diagrams)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from infra.kit.tables import markdown_table
from infra.offline.clusters import split
from infra.offline.engine import Capture
from infra.offline.plan import objects
from infra.review.burst import DATA_HEADER, burst_rows, data_rows
from infra.review.summary import capacity_rows
from infra.spec import Platform
from infra.spec.audit import POLICY_DOC, POLICY_FILE, destination
from infra.spec.base import format_amount
from infra.spec.clouds import CLOUDS


def _pools(platform: Platform) -> list[str]:
    rows = [["pool", "capacity from", "nodes", "capacity type", "fabric", "topology", "taints"]]
    for name, pool in platform.spec.pools.items():
        flavor = platform.flavor(name)
        nodes = ", ".join(pool.nodes) if pool.nodes else "-"
        fabric: str = pool.fabric
        if pool.fabric_request:
            fabric += f" ({pool.fabric_request[1]} x {pool.fabric_request[0]} per node)"
        rows.append([
            name, flavor.origin, nodes, flavor.capacity_type, fabric,
            " > ".join(flavor.topology_levels.values()) or "-",
            ", ".join(f"{t['key']}:{t['effect']}" for t in flavor.taints) or "-",
        ])
    return markdown_table(rows)


def _prerequisites(platform: Platform) -> list[str]:
    """What the platform needs from the cluster and who provides it (infra/spec/prerequisites.py)."""
    prerequisites = platform.prerequisites
    rows = [["need", "needed by", "provided by", "how"]]
    for need in prerequisites.needs:
        provision = prerequisites.provided.get(need.capability)
        rows.append([f"`{need.capability}`", need.who, provision.by if provision else "**nothing**",
                     provision.how if provision else "-"])
    return markdown_table(rows)


def _audit(platform: Platform) -> list[str]:
    """Where the API audit trail lands and, on an existing cluster, the flags the site's API server runs with."""
    audit, kind = platform.spec.audit, platform.spec.cluster.kind
    where = destination(audit, kind, platform.cluster_name)
    lines = [f"Entries land in {CLOUDS[kind].audit_store} `{where}`, kept {audit.retention_days} days "
             "(docs/access.md: where to look, how the access review reads it)."]
    if kind == "existing":
        lines.append(f"The site's kube-apiserver runs with `--audit-policy-file={audit.policy_file or POLICY_FILE}` "
                     f"(a copy of [{POLICY_DOC}](../audit-policy.yaml)), `--audit-log-path={where}` and "
                     f"`--audit-log-maxage={audit.retention_days}`; `trainyard verify` reads them.")
    return [" ".join(lines), ""]


def _gpu_ceiling(platform: Platform, team: str) -> str:
    """The namespace GPU ceiling and, per pool, guaranteed + what the queue may borrow there."""
    reach, gpus = platform.queueing.reach(team), {r for f in platform.flavors for r in f.gpu_resources}
    total = ", ".join(f"{format_amount(r, v)} {r}" for r, v in reach.items() if r in gpus and v)
    parts = ", ".join(f"{e.flavor} {format_amount(r, e.nominal.get(r, Decimal(0)))} + "
                      f"{format_amount(r, e.reach[r] - e.nominal.get(r, Decimal(0)))}"
                      for e in platform.queueing.queue(team).flavors for r in e.borrowing)
    return f"{total} ({parts})" if total else "-"


def _teams(platform: Platform) -> list[str]:
    rows = [["team", "namespaces", "guaranteed per flavor", "GPU ceiling per namespace (guaranteed + borrowable)",
             "fair-share weight", "engineers", "analysts"]]
    for team in platform.teams:
        spec = platform.spec.teams[team.name]
        quota = "; ".join(
            f"{flavor}: " + ", ".join(f"{format_amount(r, v)} {r}" for r, v in resources.items() if v)
            for flavor, resources in team.quota.items()
        )
        rows.append([team.name, ", ".join(team.namespaces), quota, _gpu_ceiling(platform, team.name),
                     f"{team.weight.normalize():f}",
                     ", ".join(spec.groups.engineers) or "-", ", ".join(spec.groups.analysts) or "-"])
    return markdown_table(rows)


def _charts(capture: Capture) -> list[str]:
    rows = [["release", "chart archive", "version", "content digest", "namespace"]]
    for record in capture.resources:
        if record.type.startswith("kubernetes:helm.sh/"):
            inputs = record.inputs
            digest, _, archive = str(inputs.get("chart", "")).removeprefix(".charts/").rpartition("/")
            rows.append([record.name, archive, str(inputs.get("version", "")), f"sha256:{digest[:16]}…",
                         str(inputs.get("namespace", ""))])
    return markdown_table(rows)


def _objects(capture: Capture) -> list[str]:
    ours = Counter(obj["kind"] for record, obj in objects(capture) if not record.chart)
    charts = Counter(obj["kind"] for record, obj in objects(capture) if record.chart)
    return markdown_table([["kind", "declared", "from charts"],
                   *([kind, str(ours[kind]), str(charts[kind])] for kind in sorted(ours | charts))])


def _schedules(capture: Capture) -> list[str]:
    rows = [["schedule", "cron", "ttl", "namespaces"]]
    for _, obj in objects(capture):
        if obj["kind"] == "Schedule" and obj["apiVersion"].startswith("velero.io/"):
            spec: dict[str, Any] = obj["spec"]
            template = spec.get("template", {})
            rows.append([obj["metadata"]["name"], f"`{spec.get('schedule')}`", str(template.get("ttl", "-")),
                         ", ".join(template.get("includedNamespaces", [])) or "-"])
    return markdown_table(rows) if len(rows) > 1 else ["No Velero schedules in this stack.", ""]


def _diagram(platform: Platform) -> list[str]:
    cohort = platform.spec.queueing.cohort
    lines = ["```mermaid", "flowchart LR"]
    for flavor in platform.flavors:
        capacity = ", ".join(f"{format_amount(r, flavor.capacity[r])} {r}" for r in flavor.gpu_resources) or "CPU"
        lines.append(f'  pool_{flavor.pool}["pool {flavor.pool}<br/>{capacity}"] --> flavor_{flavor.name}'
                     f'(["flavor {flavor.name}"])')
        lines.append(f"  flavor_{flavor.name} --> cohort_{cohort}")
    lines.append(f'  cohort_{cohort}{{"cohort {cohort}"}}')
    for team in platform.teams:
        lines.append(f'  cohort_{cohort} --> cq_{team.name}["ClusterQueue {team.queue}"]')
        for namespace in team.namespaces:
            node = f'lq_{namespace.replace("-", "_")}'
            lines.append(f'  cq_{team.name} --> {node}["{namespace}/LocalQueue {team.queue}"]')
    return [*lines, "```", ""]


def _sections(platform: Platform, capture: Capture, level: str) -> list[str]:
    """One cluster's facts, under headings of `level` ("##" for a single cluster)."""
    return [
        f"{level} Pools", "", *_pools(platform),
        f"{level} Cluster prerequisites", "", "`trainyard plan` fails on a need nothing provides; `trainyard verify` "
        "checks them on the live cluster (docs/prerequisites.md).", "", *_prerequisites(platform),
        f"{level} API audit trail", "", *_audit(platform),
        f"{level} Capacity and guaranteed quota per flavor", "",
        "What teams are guaranteed is their ClusterQueue's nominal quota; the rest is the cohort's shared pool.", "",
        *markdown_table(capacity_rows(platform)),
        f"{level} Queues", "", *_diagram(platform),
        f"{level} Teams", "", *_teams(platform),
        f"{level} Versions and charts", "", *_charts(capture),
        f"{level} Backup schedules", "", *_schedules(capture),
        f"{level} Kubernetes objects", "", *_objects(capture),
    ]


def _burst(platform: Platform, capture: Capture) -> list[str]:
    """The clusters, the burst path, then each cluster's facts (docs/hybrid.md explains the design)."""
    hybrid = platform.hybrid
    assert hybrid is not None
    parts = split(platform, capture)
    rows = [["cluster", "role", "kind", "name", "pools", "link from the manager", "resources"]]
    for name, member in hybrid.clusters.items():
        link = hybrid.links.get(name)
        rows.append([name, member.member.role if member.member else "-", member.spec.cluster.kind,
                     member.cluster_name, ", ".join(f.name for f in member.flavors),
                     f"{link.network} from {link.source}" if link else "-", str(len(parts[name][1].resources))])
    diagram = ["```mermaid", "flowchart LR"]
    for row in burst_rows(platform):
        team, worker = row[0], row[3].split(" ")[0]
        ns, cq, w = (f"{part.replace('-', '_')}_{suffix}" for part, suffix in
                     ((team, "ns"), (f"{team}_{worker}", "cq"), (worker, "w")))
        diagram += [f'  {ns}["{team} namespaces<br/>{row[1]}"] --> {cq}["{row[2].split(" (")[0]}<br/>on '
                    f'{hybrid.manager}"]', f'  {cq} -- "MultiKueue check {worker}" --> {w}["{worker} worker"]']
    lines = ["## Clusters", "", *markdown_table(rows), "## Burst path", "",
             "Jobs submitted to the LocalQueue named after a worker are admitted on the manager and run on the "
             "worker (docs/hybrid.md).", "", *markdown_table([["team", "submit to", "on the manager", "worker",
                                                        "guaranteed there", "link", "credentials"],
                                                       *burst_rows(platform)]), *diagram, "```", "",
             "## Burst data", "", "Where dispatched jobs find their data and images on each worker (ConfigMap "
             "`trainyard-data` in each bursting team namespace there; docs/hybrid.md).", "",
             *markdown_table([DATA_HEADER, *data_rows(platform)])]
    for name, (member, part) in parts.items():
        lines += [f"## Cluster `{name}` ({member.member.role if member.member else ''})", "",
                  *_sections(member, part, "###")]
    return lines


def stack_page(platform: Platform, capture: Capture) -> str:
    spec = platform.spec
    if platform.hybrid is None:
        where, body = f"- Cluster: `{platform.cluster_name}` ({spec.cluster.kind})", _sections(platform, capture, "##")
    else:
        where = "- Clusters: " + ", ".join(f"`{name}` ({member.spec.cluster.kind} `{member.cluster_name}`)"
                                            for name, member in platform.hybrid.clusters.items())
        body = _burst(platform, capture)
    lines = [
        f"# Stack `{platform.stack}`", "",
        f"Generated by `trainyard docs` from `stacks/Pulumi.{platform.stack}.yaml` (do not edit by hand).", "",
        where,
        f"- Identity group prefix: `{spec.identity.group_prefix or '(none)'}`",
        f"- Resources declared: {len(capture.resources)}", "",
        *body,
    ]
    return "\n".join(lines).rstrip() + "\n"
