"""Grafana dashboards as data, one per concern: GPUs per pool, queues per team, GPU usage per team, backups.
Grafana's sidecar (kube-prometheus-stack 88.5.3: grafana.sidecar.dashboards.label `grafana_dashboard`, value "1",
all namespaces) loads each from a labelled ConfigMap. Panels query the default Prometheus datasource (uid
`prometheus`) and read only catalog metrics (infra/spec/metrics.py), which the offline checks prove."""

from __future__ import annotations

import json
from typing import Any

from infra.components import VELERO
from infra.platform.alerts import GPU_UTIL_BY_POOL, NOT_FOLLOWER, POOL_SERIES
from infra.platform.backup import DRILL
from infra.platform.usage_rules import ADMITTED, BUSY, IDLE, IDLE_POD
from infra.spec import Platform

SIDECAR_LABEL = {"grafana_dashboard": "1"}
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
GPU_RESOURCES = 'resource=~"nvidia_com_gpu|nvidia_com_mig_.*"'
KUEUE_GPUS = 'resource=~"nvidia.com/.*"'  # Kueue keeps resource names as Kubernetes spells them
IN_POOL = f'kube_node_labels{{{POOL_SERIES}=~"$pool"}}'


def _panel(index: int, title: str, unit: str, *queries: tuple[str, str]) -> dict[str, Any]:
    """A time series panel, two per row, 8 units high."""
    return {
        "id": index + 1, "type": "timeseries", "title": title, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + n), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
                    for n, (expr, legend) in enumerate(queries)],
    }


def _dashboard(uid: str, title: str, panels: list[tuple[str, str, list[tuple[str, str]]]],
               variables: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "tags": ["trainyard"], "timezone": "utc", "schemaVersion": 39, "version": 1,
        "editable": False, "time": {"from": "now-24h", "to": "now"}, "refresh": "1m",
        "templating": {"list": variables},
        "panels": [_panel(i, t, unit, *queries) for i, (t, unit, queries) in enumerate(panels)],
    }


def _variable(name: str, query: str) -> dict[str, Any]:
    return {"name": name, "type": "query", "datasource": DATASOURCE, "query": {"query": query, "refId": name},
            "definition": query, "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2}


def gpu_dashboard(platform: Platform) -> dict[str, Any]:
    """Allocatable vs requested GPUs per pool (kube-state-metrics) everywhere; utilisation, memory, temperature,
    XIDs and throttling per pool where the DCGM exporter runs."""
    per_pool = f"* on (node) group_left ({POOL_SERIES}) {IN_POOL}"
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("GPUs allocatable per pool", "short", [
            (f"sum by ({POOL_SERIES}) (kube_node_status_allocatable{{{GPU_RESOURCES}}} {per_pool})",
             f"{{{{{POOL_SERIES}}}}}")]),
        ("GPUs requested by running pods per pool", "short", [
            (f"sum by ({POOL_SERIES}) (kube_pod_container_resource_requests{{{GPU_RESOURCES}}} {per_pool})",
             f"{{{{{POOL_SERIES}}}}}")]),
    ]
    if platform.observability.dcgm:
        panels += [
            ("GPU utilisation per pool (%)", "percent", [
                (f'{GPU_UTIL_BY_POOL}{{{POOL_SERIES}=~"$pool"}}', f"{{{{{POOL_SERIES}}}}}")]),
            ("Tensor core activity per node", "percentunit", [
                (f"avg by (node) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE {per_pool})", "{{node}}")]),
            ("GPU memory used per node (MiB)", "decmbytes", [
                (f"sum by (node) (DCGM_FI_DEV_FB_USED {per_pool})", "{{node}}")]),
            ("Hottest GPU per node (C)", "celsius", [
                (f"max by (node) (DCGM_FI_DEV_GPU_TEMP {per_pool})", "{{node}}")]),
            ("Power per node (W)", "watt", [(f"sum by (node) (DCGM_FI_DEV_POWER_USAGE {per_pool})", "{{node}}")]),
            ("Last XID per GPU (sticky until the exporter restarts)", "short", [
                (f"max by (node, gpu, err_code) (DCGM_FI_DEV_XID_ERRORS {per_pool}) > 0", "{{node}} gpu {{gpu}}")]),
            ("Throttled share of time (thermal, power)", "percentunit", [
                (f"max by (node) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[$__rate_interval]) {per_pool}) / 1e9",
                 "thermal {{node}}"),
                (f"max by (node) (rate(DCGM_FI_DEV_POWER_VIOLATION[$__rate_interval]) {per_pool}) / 1e9",
                 "power {{node}}")]),
            ("ECC and NVLink errors (last hour)", "short", [
                (f"sum by (node) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) {per_pool})", "ECC DBE {{node}}"),
                (f"sum by (node) (increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[1h]) {per_pool})",
                 "NVLink CRC {{node}}")]),
        ]
    pool = _variable("pool", f"label_values(kube_node_labels, {POOL_SERIES})")
    return _dashboard("trainyard-gpus", "Trainyard / GPUs per pool", panels, [pool])


def queue_dashboard(platform: Platform) -> dict[str, Any]:
    cq = f'cluster_queue=~"$team", {NOT_FOLLOWER}'
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Pending workloads per team", "short", [
            (f'sum by (cluster_queue, status) (kueue_pending_workloads{{{cq}}})', "{{cluster_queue}} {{status}}")]),
        ("Admitted (running) workloads per team", "short", [
            (f"sum by (cluster_queue) (kueue_admitted_active_workloads{{{cq}}})", "{{cluster_queue}}")]),
        ("GPU usage vs quota per team and pool", "short", [
            (f"sum by (cluster_queue, flavor) (kueue_cluster_queue_resource_usage{{{cq}, {KUEUE_GPUS}}})",
             "used {{cluster_queue}}/{{flavor}}"),
            (f"sum by (cluster_queue, flavor) (kueue_cluster_queue_nominal_quota{{{cq}, {KUEUE_GPUS}}})",
             "quota {{cluster_queue}}/{{flavor}}")]),
        ("Admission wait p95 per team", "s", [
            ("histogram_quantile(0.95, sum by (le, cluster_queue)"
             f" (rate(kueue_admission_wait_time_seconds_bucket{{{cq}}}[$__rate_interval])))", "{{cluster_queue}}")]),
        ("Evictions per team and reason", "short", [
            (f"sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total{{{cq}}}[1h]))",
             "{{cluster_queue}} {{reason}}")]),
        ("Inactive ClusterQueues", "short", [
            (f'max by (cluster_queue) (kueue_cluster_queue_status{{{cq}, status!="active"}}) == 1',
             "{{cluster_queue}}")]),
    ]
    team = _variable("team", "label_values(kueue_pending_workloads, cluster_queue)")
    return _dashboard("trainyard-queues", "Trainyard / Queues per team", panels, [team])


# A day's GPU-hours: the recorded GPU counts sampled every 5 minutes over the day, each sample worth 1/12 hour; a
# 30-day window samples hourly. Panels step by their window (`interval`), so each point is one day or one window.
WINDOWS = (("day", "1d", "5m", 12), ("30 days", "30d", "1h", 1))


def _gpu_hours(series: str, window: str, step: str, per_hour: int, by: str = "team, pool") -> str:
    return f'sum by ({by}) (sum_over_time({series}{{team=~"$team"}}[{window}:{step}])) / {per_hour}'


def usage_dashboard(platform: Platform) -> dict[str, Any]:
    """GPU-hours admitted, busy and idle per team and pool, per day and per 30 days; the idle share; the pods
    that left most GPU-hours idle (the recorded series of usage_rules.py)."""
    kinds = [("admitted", ADMITTED)] + ([("busy", BUSY), ("idle", IDLE)] if platform.observability.dcgm else [])
    panels: list[tuple[str, str, list[tuple[str, str]]]] = []
    intervals = []
    for label, window, step, per_hour in WINDOWS:
        for kind, series in kinds:
            panels.append((f"GPU-hours {kind} per team and pool, per {label}", "short",
                           [(_gpu_hours(series, window, step, per_hour), "{{team}}/{{pool}}")]))
            intervals.append(window)
    if platform.observability.dcgm:
        window, step, per_hour = WINDOWS[0][1:]
        panels += [
            ("Idle share of admitted GPU-hours per team, per day", "percentunit", [
                (f"{_gpu_hours(IDLE, window, step, per_hour, 'team')} / "
                 f"{_gpu_hours(ADMITTED, window, step, per_hour, 'team')}", "{{team}}")]),
            ("Workloads with the most idle GPU-hours, per day", "short", [
                (f"topk(10, {_gpu_hours(IDLE_POD, window, step, per_hour, 'team, exported_namespace, exported_pod')})",
                 "{{team}} {{exported_namespace}}/{{exported_pod}}")])]
        intervals += [window, window]
    team = _variable("team", f"label_values({ADMITTED}, team)")
    board = _dashboard("trainyard-usage", "Trainyard / GPU usage per team", panels, [team])
    board["time"] = {"from": "now-90d", "to": "now"}
    for panel, interval in zip(board["panels"], intervals, strict=True):
        panel["interval"] = interval
    return board


def backup_dashboard(platform: Platform) -> dict[str, Any]:
    tiers = "|".join(schedule.tier for schedule in platform.backup.schedules)
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Age of the last successful backup per tier", "s", [
            (f'time() - velero_backup_last_successful_timestamp{{schedule=~"{tiers}"}}', "{{schedule}}")]),
        ("Last backup status per tier (1 ok, 0 failed)", "short", [
            (f'velero_backup_last_status{{schedule=~"{tiers}"}}', "{{schedule}}")]),
        ("Backups per day", "short", [
            (f'sum by (schedule) (increase(velero_backup_success_total{{schedule=~"{tiers}"}}[1d]))',
             "ok {{schedule}}"),
            (f'sum by (schedule) (increase(velero_backup_failure_total{{schedule=~"{tiers}"}}[1d]))',
             "failed {{schedule}}")]),
        ("Backup location available", "short", [
            ("velero_backup_location_status_gauge", "{{backup_location_name}}")]),
        ("Age of the last successful restore drill", "s", [
            (f'time() - kube_cronjob_status_last_successful_time{{namespace="{VELERO.namespace}", cronjob="{DRILL}"}}',
             "restore drill")]),
    ]
    return _dashboard("trainyard-backups", "Trainyard / Backups", panels, [])


def dashboards(platform: Platform) -> dict[str, str]:
    """ConfigMap name -> dashboard JSON (sorted keys: renders stay byte-identical)."""
    built = {"trainyard-dashboard-gpus": gpu_dashboard(platform),
             "trainyard-dashboard-queues": queue_dashboard(platform),
             "trainyard-dashboard-usage": usage_dashboard(platform),
             "trainyard-dashboard-backups": backup_dashboard(platform)}
    return {name: dashboard_json(board) for name, board in built.items()}


def dashboard_json(board: dict[str, Any]) -> str:
    """A dashboard as its ConfigMap holds it (sorted keys: renders stay byte-identical)."""
    return json.dumps(board, sort_keys=True, indent=1)


def team_dashboards(platform: Platform, queue: str, team: str) -> list[dict[str, Any]]:
    """A team's own views, for its Grafana organization (grafana/orgs.py): its queue and its GPU usage, with the
    `team` variable fixed to it (a hidden constant: the organization holds no other team's)."""
    boards = [(queue_dashboard(platform), queue), (usage_dashboard(platform), team)]
    for board, value in boards:
        board["templating"]["list"] = [{"name": "team", "type": "constant", "query": value, "hide": 2}]
    return [board for board, _ in boards]
