"""The platform's alert and recording rules, built from the spec: one group per concern. Every alert has a
severity, a summary, a description and a runbook_url pointing at its own section of docs/operations.md (the
section's heading is the alert name, so the anchor is the lowercased name). Every metric read is in
infra/spec/metrics.py; rules that need an exporter this stack does not run (the DCGM exporter) are left out.

Thresholds are starting points from ../shared/reference/observability.md §3; pool GPU counts and backup windows
come from the spec (Flavor.capacity, the tiers' crons)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from infra.components import GPU_OPERATOR, KUEUE, TRAINER, VELERO
from infra.platform.backup import DRILL
from infra.platform.kfp.journal_drill import NAME as JOURNAL_DRILL
from infra.platform.storage import KEYS_ACCOUNT as KEY_COPIER
from infra.platform.storage import KEYS_SCHEDULE_MINUTES as KEY_COPY_MINUTES
from infra.spec import Platform
from infra.spec.backup import cron_interval_hours
from infra.spec.observability import RELATIVE_RUNBOOK
from infra.spec.pools import POOL_LABEL

DCGM_JOB = GPU_OPERATOR.scrape_jobs[0]
# XIDs that mean the GPU needs a reset or replacement (NVIDIA XID catalogue); application XIDs (13, 31, 43, 45)
# are the job's own fault and stay out.
CRITICAL_XIDS = "48|61|62|63|64|74|79|92|94|95|119|120|140"
NOT_FOLLOWER = 'replica_role!="follower"'
PENDING_HOURS = 2
ADMISSION_WAIT_P95_HOURS = 4
PVC_FREE_RATIO = 0.10
KEY_COPY_STALE_RUNS = 3  # the bucket keys' copier failed this many runs in a row
# (namespace, deployment) of the controllers whose webhooks fail closed: one down blocks every submission.
CONTROLLERS = (
    (KUEUE.namespace, "kueue-controller-manager"),
    (TRAINER.namespace, "kubeflow-trainer-controller-manager"),
    (TRAINER.namespace, "jobset-controller"),
)
# Webhook names of Kueue (kubebuilder's *.kb.io), Trainer and JobSet.
PLATFORM_WEBHOOKS = r".*\\.kb\\.io|.*\\.trainer\\.kubeflow\\.org|.*jobset\\.x-k8s\\.io|.*--v1-pod\\.x-k8s\\.io"
POOL_SERIES = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", POOL_LABEL)  # kube_node_labels{label_trainyard_io_pool}
GPU_UTIL_BY_POOL = "trainyard:gpu_utilisation:avg_by_pool"

# Each alert's description: what it breaks (docs/operations.md, the alert's Impact), so the page says why it matters
# before the runbook is opened.
DESCRIPTIONS = {
    "GPUXidCritical": "Jobs on that GPU crash or hang, and the next gang scheduled there fails again.",
    "GPUEccDoubleBitErrors": "The job on that GPU gets corrupted results or crashes.",
    "GPURowRemapFailure": "Memory errors will keep coming on that GPU.",
    "GPUNVLinkErrors": "Collective operations of multi-GPU jobs on that node are slow or fail.",
    "GPUThermalThrottling": "A whole gang runs at the speed of its slowest GPU.",
    "DCGMExporterDown": "The GPU hardware alerts cannot fire for those nodes.",
    "TeamGPUsIdle": "The GPUs are neither working nor free for other teams, and they are billed to the team.",
    "GPUAllocatableBelowPool": "Kueue admits jobs against quota that has no hardware: they stay Pending.",
    "GPUNodeNotReady": "Its pods are lost after the eviction timeout; gangs using it fail and are requeued.",
    "KueuePendingTooLong": "The team's jobs are starved.",
    "KueueClusterQueueInactive": "All of that team's jobs wait.",
    "KueueAdmissionWaitHigh": "Jobs wait hours for admission: slow iteration, deadlines slip.",
    "KueuePodsReadyTimeoutEvictions": "GPU time is lost to restarts; jobs are deactivated after repeated requeues.",
    "TrainingControllerUnavailable": "No TrainJob, JobSet, queue or runtime can be created or changed; nothing is "
                                     "admitted.",
    "AdmissionWebhookCallsFailing": "Submissions are rejected with \"failed calling webhook\".",
    "ControllerReconcileErrors": "Objects stop converging: jobs not started, statuses stale.",
    "VeleroBackupFailed": "That tier's recovery point grows with every missed run.",
    "VeleroBackupLocationUnavailable": "No backup is written and no restore is possible.",
    "VeleroNoRecentBackup": "The data at risk grows beyond the tier's recovery point objective.",
    "RestoreDrillFailed": "The backups are not proven restorable.",
    "RestoreDrillStale": "Restores are unproven for longer than the policy says.",
    "PVCNearlyFull": "Checkpoint writes fail when it fills (the job loses its progress).",
    "BucketKeysNotCopied": "Pipeline runs in the team's other namespaces fail at their first artifact and predictors "
                           "cannot download their model, until the team bucket's keys reach them.",
    # The pipeline layer's (infra/platform/kfp/observability.py).
    "PipelineRunsFailed": "The team's runs record no model, metrics or release for those runs.",
    "PipelineStepPendingTooLong": "The run waits without end, holding its earlier steps' quota and the team's "
                                  "attention.",
    "PipelineRunTooLong": "A stuck run holds its namespace's quota and its recurring successors may pile up behind "
                          "it.",
    "PipelineAPIServerDown": "Nobody can upload, start, list or read a pipeline run; finished runs go unrecorded.",
    "PipelineWorkflowControllerDown": "No pipeline step starts or finishes: every team's runs stop where they are.",
    # Serving's (infra/platform/models/observability.py).
    "InferenceServiceNotReady": "Its clients' predictions fail (HTTP 503 or no answer) until a predictor is ready.",
    "InferenceServicePredictorRestarting": "The requests the model server held failed; with one replica every "
                                           "request fails until it is back, and a failing download stops a rollout.",
    "InferenceServiceLatencyHigh": "Its clients wait or time out; requests pile up on the predictor.",
    "ModelVersionMismatch": "What answers is not the version the registry says is in production: an unreviewed "
                            "rollback, a promotion never rolled out, or a rollout stuck.",
    "ModelRegistryUnreachable": "The team cannot register or read versions, and version mismatches go unseen.",
}


def ksm_resource(resource: str) -> str:
    """kube-state-metrics' sanitised resource name: nvidia.com/gpu -> nvidia_com_gpu."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def anchor(alert: str) -> str:
    return alert.lower()


def alert(name: str, expr: str, severity: str, summary: str, for_: str | None = None,
          labels: dict[str, str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **(labels or {})}
    rule["annotations"] = {"summary": summary, "description": DESCRIPTIONS[name]}
    return rule


def _gpu_hardware(platform: Platform) -> list[dict[str, Any]]:
    by = "node, gpu, UUID"
    return [
        alert("GPUXidCritical",
              f'max by ({by}, err_code) (DCGM_FI_DEV_XID_ERRORS{{err_code=~"{CRITICAL_XIDS}"}}) > 0', "critical",
              "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $labels.err_code }}: reset or replace"),
        alert("GPUEccDoubleBitErrors", f"sum by ({by}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])) > 0",
              "critical", "GPU {{ $labels.gpu }} on {{ $labels.node }} had uncorrectable ECC errors"),
        alert("GPURowRemapFailure", f"max by ({by}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0", "critical",
              "GPU {{ $labels.gpu }} on {{ $labels.node }} could not remap a memory row: replace it"),
        alert("GPUNVLinkErrors",
              f"sum by ({by}) (increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[15m])) > 0", "warning",
              "NVLink CRC errors on GPU {{ $labels.gpu }} of {{ $labels.node }}", for_="15m"),
        alert("GPUThermalThrottling",
              f"max by ({by}) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[10m])) > 0.1 * 1e9", "warning",
              "GPU {{ $labels.gpu }} on {{ $labels.node }} spends over 10% of its time thermally throttled",
              for_="30m"),
        alert("DCGMExporterDown",
              'count(max by (node) (kube_node_status_capacity{resource=~"nvidia_com_gpu|nvidia_com_mig_.*"}) > 0)'
              f' > (count(up{{job="{DCGM_JOB}"}} == 1) or vector(0))', "critical",
              "GPU nodes without a working DCGM exporter: their GPU faults go unseen", for_="10m"),
    ]


def _gpu_capacity(platform: Platform) -> list[dict[str, Any]]:
    rules = []
    gpu_pools = [flavor for flavor in platform.flavors if flavor.gpu_resources]
    for flavor in gpu_pools:
        for resource in flavor.gpu_resources:
            declared = int(flavor.capacity[resource])
            if declared <= 0:
                continue  # an autoscaled pool that may scale to zero promises nothing
            in_pool = f'kube_node_labels{{{POOL_SERIES}="{flavor.pool}"}}'
            expr = (f'(sum(kube_node_status_allocatable{{resource="{ksm_resource(resource)}"}} '
                    f"* on (node) group_left () {in_pool}) or vector(0)) < {declared}")
            rules.append(alert("GPUAllocatableBelowPool", expr, "critical",
                               f"pool {flavor.pool} offers fewer than its {declared} {resource}",
                               for_="10m", labels={"pool": flavor.pool, "resource": resource}))
    if gpu_pools:
        pools = "|".join(flavor.pool for flavor in gpu_pools)
        rules.append(alert(
            "GPUNodeNotReady",
            'kube_node_status_condition{condition="Ready",status="true"} == 0'
            f' and on (node) kube_node_labels{{{POOL_SERIES}=~"{pools}"}}'
            " and on (node) kube_node_spec_unschedulable == 0",
            "critical", "GPU node {{ $labels.node }} is NotReady and not cordoned", for_="5m"))
    return rules


def _queueing(platform: Platform) -> list[dict[str, Any]]:
    return [
        alert("KueuePendingTooLong",
              f'sum by (cluster_queue) (kueue_pending_workloads{{status="active", {NOT_FOLLOWER}}}) > 0'
              " and on (cluster_queue) sum by (cluster_queue)"
              f" (increase(kueue_admitted_workloads_total{{{NOT_FOLLOWER}}}[{PENDING_HOURS}h])) == 0",
              "warning", f"ClusterQueue {{{{ $labels.cluster_queue }}}} has work waiting and admitted nothing "
              f"for {PENDING_HOURS}h", for_="30m"),
        alert("KueueClusterQueueInactive",
              f'max by (cluster_queue) (kueue_cluster_queue_status{{status!="active", {NOT_FOLLOWER}}}) == 1',
              "critical", "ClusterQueue {{ $labels.cluster_queue }} is inactive: it admits nothing", for_="15m"),
        alert("KueueAdmissionWaitHigh",
              "histogram_quantile(0.95, sum by (le, cluster_queue)"
              f" (rate(kueue_admission_wait_time_seconds_bucket{{{NOT_FOLLOWER}}}[6h])))"
              f" > {ADMISSION_WAIT_P95_HOURS} * 3600",
              "warning", "ClusterQueue {{ $labels.cluster_queue }}: 95% of admissions waited up to "
              "{{ $value | humanizeDuration }}", for_="1h"),
        alert("KueuePodsReadyTimeoutEvictions",
              "sum by (cluster_queue) (increase(kueue_evicted_workloads_total"
              f'{{reason="PodsReadyTimeout", {NOT_FOLLOWER}}}[1h])) > 3',
              "warning", "ClusterQueue {{ $labels.cluster_queue }}: jobs admitted but their pods do not start"),
    ]


def _controllers(platform: Platform) -> list[dict[str, Any]]:
    rules = [
        alert("TrainingControllerUnavailable",
              f'(max(kube_deployment_status_replicas_available{{namespace="{namespace}",'
              f' deployment="{deployment}"}}) or vector(0)) < 1',
              "critical", f"{deployment} has no available replica: its fail-closed webhooks block submissions",
              for_="5m", labels={"deployment": deployment, "namespace": namespace})
        for namespace, deployment in CONTROLLERS
    ]
    rules += [
        alert("AdmissionWebhookCallsFailing",
              'sum by (name) (rate(apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",'
              f' name=~"{PLATFORM_WEBHOOKS}"}}[5m])) > 0',
              "critical", "the API server cannot call webhook {{ $labels.name }}: submissions fail", for_="10m"),
        alert("ControllerReconcileErrors",
              "sum by (namespace, job, controller) (rate(controller_runtime_reconcile_errors_total[15m])) > 0.1",
              "warning", "controller {{ $labels.controller }} ({{ $labels.job }}) keeps failing to reconcile",
              for_="30m"),
    ]
    return rules


def _backup(platform: Platform) -> list[dict[str, Any]]:
    facts = platform.backup
    tiers = "|".join(schedule.tier for schedule in facts.schedules)
    rules = [
        alert("VeleroBackupFailed", f'velero_backup_last_status{{schedule=~"{tiers}"}} != 1', "warning",
              "the last backup of tier {{ $labels.schedule }} failed", for_="15m"),
        alert("VeleroBackupLocationUnavailable", "velero_backup_location_status_gauge == 0", "critical",
              "Velero cannot use backup location {{ $labels.backup_location_name }}", for_="15m"),
    ]
    for schedule in facts.schedules:
        interval = cron_interval_hours(schedule.cron)
        window = interval + max(1, interval // 4)  # the drill's own staleness rule (spec/backup.py)
        series = f'velero_backup_last_successful_timestamp{{schedule="{schedule.tier}"}}'
        summary = f"no successful {schedule.tier} backup for over {window}h"
        labels = {"tier": schedule.tier}
        rules += [alert("VeleroNoRecentBackup", f"(time() - {series}) > {window} * 3600", "critical", summary,
                        for_="1h", labels=labels),
                  # Never a success: a new cluster gets one window's grace before this fires.
                  alert("VeleroNoRecentBackup", f"absent({series})", "critical", summary, for_=f"{window}h",
                        labels=labels)]
    drill = platform.spec.backup.drill
    interval = cron_interval_hours(drill.schedule)
    window = interval + max(1, interval // 4)
    # The volume drill, and with Pipelines the journal drill (infra/platform/kfp/journal_drill.py), on one schedule.
    drills = "|".join([DRILL, *([JOURNAL_DRILL] if platform.pipelines else [])])
    drill_job = f'namespace="{VELERO.namespace}", cronjob=~"{drills}"'
    rules += [
        alert("RestoreDrillFailed",
              f'max by (job_name) (kube_job_failed{{namespace="{VELERO.namespace}", job_name=~"({drills})-.*",'
              ' condition="true"}) == 1',
              "warning", "restore drill {{ $labels.job_name }} failed: backups are not proven restorable"),
        # No success within a drill interval (plus grace), or none since the CronJob was created that long ago.
        alert("RestoreDrillStale",
              f"time() - kube_cronjob_status_last_successful_time{{{drill_job}}} > {window} * 3600"
              f" or (time() - kube_cronjob_created{{{drill_job}}} > {window} * 3600"
              " unless on (namespace, cronjob) kube_cronjob_status_last_successful_time)",
              "warning", f"no successful {{{{ $labels.cronjob }}}} for over {window}h", for_="1h"),
    ]
    return rules


def _storage(platform: Platform, monitoring_namespace: str) -> list[dict[str, Any]]:
    namespaces = "|".join(sorted({ns for team in platform.teams for ns in team.namespaces} | {monitoring_namespace}))
    selector = f'{{namespace=~"{namespaces}"}}'
    rules = [alert("PVCNearlyFull",
                   f"kubelet_volume_stats_available_bytes{selector} / kubelet_volume_stats_capacity_bytes{selector}"
                   f" < {PVC_FREE_RATIO}",
                   "warning", "volume {{ $labels.persistentvolumeclaim }} in {{ $labels.namespace }} is over "
                   f"{int((1 - PVC_FREE_RATIO) * 100)}% full", for_="15m")]
    if platform.storage.key_copies:  # rook-ceph: the claims' keys copier (infra/platform/storage.py bucket_keys)
        copier = f'namespace="{platform.spec.storage.rook_ceph.namespace}", cronjob="{KEY_COPIER}"'
        window = KEY_COPY_STALE_RUNS * KEY_COPY_MINUTES * 60
        # No success in that many runs, or none since the CronJob was created that long ago.
        rules.append(alert("BucketKeysNotCopied",
                           f"time() - kube_cronjob_status_last_successful_time{{{copier}}} > {window}"
                           f" or (time() - kube_cronjob_created{{{copier}}} > {window}"
                           " unless on (namespace, cronjob) kube_cronjob_status_last_successful_time)",
                           "warning", f"no bucket keys copied for over {window // 60} minutes", for_="5m"))
    return rules


def _recording(platform: Platform) -> list[dict[str, Any]]:
    return [{"record": GPU_UTIL_BY_POOL,
             "expr": f"avg by ({POOL_SERIES}) (DCGM_FI_DEV_GPU_UTIL * on (node) group_left ({POOL_SERIES})"
                     " kube_node_labels)"}]


def rule_groups(platform: Platform, monitoring_namespace: str,
                extra: Sequence[tuple[str, list[dict[str, Any]]]] = ()) -> list[dict[str, Any]]:
    """The PrometheusRule spec.groups of this stack, with the runbook links of spec.observability; `extra`: groups
    built elsewhere from this module's pieces (usage_rules.py)."""
    dcgm = platform.observability.dcgm
    groups = [
        ("trainyard-gpu-hardware", _gpu_hardware(platform) if dcgm else []),
        ("trainyard-gpu-capacity", _gpu_capacity(platform)),
        ("trainyard-gpu-recording", _recording(platform) if dcgm else []),
        ("trainyard-queueing", _queueing(platform)),
        ("trainyard-controllers", _controllers(platform)),
        ("trainyard-backup", _backup(platform)),
        ("trainyard-storage", _storage(platform, monitoring_namespace)),
        *extra,
    ]
    base = platform.observability.alerting.runbook_base or RELATIVE_RUNBOOK
    for _, rules in groups:
        for rule in rules:
            if "alert" in rule:
                rule["annotations"]["runbook_url"] = f"{base}#{anchor(rule['alert'])}"
    return [{"name": name, "rules": rules} for name, rules in groups if rules]
