"""GPU usage per team, queue and pool as recording rules, and the alert on admitted GPUs left idle
(docs/observability.md "GPU usage and cost"). Every recorded series carries `team`, `cluster_queue` and `pool`:

- trainyard:gpus_admitted:team_pool  GPUs (or shares of a shared GPU) Kueue has admitted to the team's
  ClusterQueue from each pool (kueue_cluster_queue_resource_usage; a ResourceFlavor is named after its pool and a
  ClusterQueue after its team);
- trainyard:gpus_busy:team_pool      GPUs held by pods of the team's namespaces whose utilisation
  (DCGM_FI_DEV_GPU_UTIL, per cent) is at or above observability.usage.busyThreshold; the exporter names the
  holding pod in exported_namespace / exported_pod (our monitor keeps honorLabels off);
- trainyard:gpus_idle:team_pool      admitted minus busy, never below zero;
- trainyard:gpus_idle:pod            per holding pod (`exported_namespace`, `exported_pod`): its GPUs below the
  threshold, which the usage report ranks as the worst workloads; with `team` and `cluster_queue` as the other
  series, the label a team's Grafana datasource enforces (grafana/datasources.py).

A sample is a GPU count at one instant: GPU-hours are its integral over time (`trainyard report usage`, the usage
dashboard). Without the DCGM exporter only the admitted series is recorded and no idle alert exists."""

from __future__ import annotations

from typing import Any

from infra.platform.alerts import NOT_FOLLOWER, POOL_SERIES, alert
from infra.spec import Platform

ADMITTED = "trainyard:gpus_admitted:team_pool"
BUSY = "trainyard:gpus_busy:team_pool"
IDLE = "trainyard:gpus_idle:team_pool"
IDLE_POD = "trainyard:gpus_idle:pod"
KEYS = "team, cluster_queue, pool"


def _pool_label(expr: str, source: str) -> str:
    return f'label_replace({expr}, "pool", "$1", "{source}", "(.+)")'


def _held(namespaces: tuple[str, ...], comparison: str) -> str:
    """The team's GPUs whose utilisation passes `comparison` (e.g. `>= 10`), with their node's pool."""
    selector = f'exported_namespace=~"{"|".join(namespaces)}"'
    return f"(DCGM_FI_DEV_GPU_UTIL{{{selector}}} {comparison})"


def usage_rules(platform: Platform) -> list[dict[str, Any]]:
    teams = [team for team in platform.teams if any(platform.flavor(pool).gpu_resources for pool in team.quota)]
    resources = sorted({r for flavor in platform.flavors for r in flavor.gpu_resources})
    if not teams or not resources:
        return []
    queues = "|".join(team.queue for team in teams)
    usage = (f'kueue_cluster_queue_resource_usage{{cluster_queue=~"{queues}", resource=~"{"|".join(resources)}",'
             f" {NOT_FOLLOWER}}}")
    # A team's ClusterQueue is named after the team (spec/derive.py): `team` is the queue's name.
    rules: list[dict[str, Any]] = [{
        "record": ADMITTED,
        "expr": f'label_replace(sum by (cluster_queue, pool) ({_pool_label(usage, "flavor")}), "team", "$1", '
                '"cluster_queue", "(.+)")'}]
    if not platform.observability.dcgm:
        return rules
    threshold = platform.observability.usage.busy_threshold
    in_pool = f"* on (node) group_left ({POOL_SERIES}) kube_node_labels"
    for team in teams:
        labels = {"team": team.name, "cluster_queue": team.queue}
        busy = _pool_label(f"{_held(team.job_namespaces, f'>= {threshold}')} {in_pool}", POOL_SERIES)
        rules.append({"record": BUSY, "expr": f"count by (pool) ({busy})", "labels": labels})
        rules.append({"record": IDLE_POD, "labels": labels,
                      "expr": f"count by (exported_namespace, exported_pod) "
                              f"({_held(team.job_namespaces, f'< {threshold}')})"})
    rules.append({"record": IDLE, "expr": f"clamp_min({ADMITTED} - on ({KEYS}) ({BUSY} or {ADMITTED} * 0), 0)"})
    return rules


def idle_alerts(platform: Platform) -> list[dict[str, Any]]:
    if not platform.observability.dcgm:
        return []
    usage = platform.observability.usage
    return [alert("TeamGPUsIdle", f"{IDLE} > 0", "warning",
                  f"team {{{{ $labels.team }}}} holds {{{{ $value }}}} admitted GPU(s) of pool {{{{ $labels.pool }}}}"
                  f" below {usage.busy_threshold}% utilisation for over {usage.idle_alert_after}",
                  for_=usage.idle_alert_after)]
