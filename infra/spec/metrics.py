"""The metric catalog: every series the platform's alert rules and dashboards read, which component exports it,
at which pinned version, and where upstream the name is defined (repository@tag:path). The offline checks
(infra/offline/promql_checks.py) parse every rule and panel query and refuse a name that is not here, or whose
component this stack does not deploy.

Facts behind the names (../shared/reference/observability.md, checked at the tags below):
- The GPU Operator runs dcgm-exporter 4.6.0-4.8.3 with `dcp-metrics-included.csv`, which lacks ECC, NVLink-error
  and throttle counters: the GPU component passes its own list (DCGM_METRICS_CSV) through `dcgmExporter.config`.
  The exporter labels series `hostname` (not `Hostname`); our ServiceMonitor adds `node` for joins.
- DCGM_FI_DEV_XID_ERRORS is a gauge holding the last XID code until the exporter restarts.
- Every Kueue series carries `replica_role` (leader|follower|standalone): rules drop followers.
- kube-state-metrics sanitises resource names: nvidia.com/gpu -> nvidia_com_gpu.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["gauge", "counter", "histogram"]

DCGM = "dcgm-exporter"
KSM = "kube-state-metrics"
KUEUE = "kueue"
CONTROLLERS = "controller-runtime"  # Kueue, Trainer and JobSet managers alike
VELERO = "velero"
KUBELET = "kubelet"
APISERVER = "kube-apiserver"
PROMETHEUS = "prometheus"
ARGO = "argo-workflows"  # the workflow controller Kubeflow Pipelines runs its pipelines with
KFP = "kfp-api-server"
KSERVE_RUNTIME = "kserve-runtime"  # KServe's Python model server in the predictor pods
REGISTRY_EXPORTER = "registry-exporter"  # json_exporter reading each team registry's production versions
KSM_SERVING = "kube-state-metrics-serving"  # kube-state-metrics' custom resource state for InferenceServices

# Component -> (pinned version, upstream source root at that version).
SOURCES = {
    DCGM: ("4.6.0-4.8.3 (GPU Operator v26.7.0)", "NVIDIA/dcgm-exporter@7ad58324:etc/dcp-metrics-included.csv"),
    KSM: ("v2.20.0 (kube-prometheus-stack 88.5.3)", "kubernetes/kube-state-metrics@v2.20.0:docs/metrics/"),
    KUEUE: ("v0.19 (kueue chart)", "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go"),
    CONTROLLERS: ("controller-runtime v0.24.1", "kubernetes-sigs/kueue@v0.19.2:vendor/sigs.k8s.io/controller-runtime/"),
    VELERO: ("v1.18 (velero chart 12.1.0)", "vmware-tanzu/velero@v1.18.1:pkg/metrics/metrics.go"),
    KUBELET: ("cluster's kubelet", "kubernetes/kubernetes:pkg/kubelet/metrics/collectors/volume_stats.go"),
    APISERVER: ("cluster's API server", "kubernetes/kubernetes:staging/src/k8s.io/apiserver/pkg/admission/metrics/"
                                         "metrics.go"),
    PROMETHEUS: ("v3.14.0 (kube-prometheus-stack 88.5.3)", "prometheus/prometheus@v3.14.0:scrape/scrape.go"),
    # OpenTelemetry's Prometheus exporter, prefix argo_workflows_, no unit or _total suffixes added
    # (util/telemetry/exporter_prometheus.go); names and attributes in docs/metrics.md at the tag.
    ARGO: ("v3.7.3 (Kubeflow Pipelines 2.16.0)", "argoproj/argo-workflows@v3.7.3:util/telemetry/metrics_list.go"),
    KFP: ("2.16.0 (Kubeflow Platform 26.03)", "kubeflow/pipelines@2.16.0:backend/src/apiserver/resource/"
                                              "resource_manager.go"),
    KSERVE_RUNTIME: ("0.16.0 (Kubeflow Platform 26.03)", "kserve/kserve@v0.16.0:python/kserve/kserve/metrics.py"),
    # The series name and labels are ours: the exporter's config (infra/platform/models/observability.py) over the
    # registry's ModelVersion list (kubeflow/model-registry@v0.3.7:api/openapi/model-registry.yaml).
    REGISTRY_EXPORTER: ("json_exporter v0.7.0", "prometheus-community/json_exporter@v0.7.0:exporter/util.go"),
    KSM_SERVING: ("v2.20.0 (kube-prometheus-stack 88.5.3)",
                  "kubernetes/kube-state-metrics@v2.20.0:docs/metrics/extend/customresourcestate-metrics.md"),
}


@dataclass(frozen=True)
class Metric:
    name: str
    component: str
    kind: Kind
    labels: tuple[str, ...]
    note: str = ""

    @property
    def version(self) -> str:
        return SOURCES[self.component][0]

    @property
    def source(self) -> str:
        return SOURCES[self.component][1]


def _m(name: str, component: str, kind: Kind, labels: str, note: str = "") -> Metric:
    return Metric(name, component, kind, tuple(labels.split()), note)


# Fields our DCGM list enables on top of the operator's default list (commented out in dcp-metrics-included.csv).
DCGM_ADDED = ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
              "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION")
_GPU_LABELS = "gpu UUID modelName hostname node"

CATALOG: tuple[Metric, ...] = (
    # exported_namespace/exported_pod: the pod holding the GPU (the exporter's pod/namespace, renamed by the scrape).
    _m("DCGM_FI_DEV_GPU_UTIL", DCGM, "gauge", f"{_GPU_LABELS} exported_namespace exported_pod", "percent"),
    _m("DCGM_FI_DEV_GPU_TEMP", DCGM, "gauge", _GPU_LABELS, "degrees C"),
    _m("DCGM_FI_DEV_POWER_USAGE", DCGM, "gauge", _GPU_LABELS, "watts"),
    _m("DCGM_FI_DEV_FB_USED", DCGM, "gauge", _GPU_LABELS, "MiB"),
    _m("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", DCGM, "gauge", _GPU_LABELS, "ratio"),
    _m("DCGM_FI_DEV_XID_ERRORS", DCGM, "gauge", f"{_GPU_LABELS} err_code err_msg",
       "last XID code; sticky until the exporter restarts"),
    _m("DCGM_FI_DEV_ROW_REMAP_FAILURE", DCGM, "gauge", _GPU_LABELS),
    _m("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", DCGM, "counter", _GPU_LABELS, "enabled by our metrics list"),
    _m("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", DCGM, "counter", _GPU_LABELS, "enabled by our metrics list"),
    _m("DCGM_FI_DEV_POWER_VIOLATION", DCGM, "counter", _GPU_LABELS, "ns throttled; enabled by our metrics list"),
    _m("DCGM_FI_DEV_THERMAL_VIOLATION", DCGM, "counter", _GPU_LABELS, "ns throttled; enabled by our metrics list"),
    _m("kube_node_status_condition", KSM, "gauge", "node condition status"),
    _m("kube_node_status_capacity", KSM, "gauge", "node resource unit"),
    _m("kube_node_status_allocatable", KSM, "gauge", "node resource unit"),
    _m("kube_node_spec_unschedulable", KSM, "gauge", "node"),
    _m("kube_node_labels", KSM, "gauge", "node label_trainyard_io_pool", "labels from metricLabelsAllowlist"),
    _m("kube_deployment_status_replicas_available", KSM, "gauge", "namespace deployment"),
    _m("kube_job_failed", KSM, "gauge", "namespace job_name condition"),
    _m("kube_cronjob_status_last_successful_time", KSM, "gauge", "namespace cronjob"),
    _m("kube_cronjob_created", KSM, "gauge", "namespace cronjob"),
    _m("kube_pod_container_resource_requests", KSM, "gauge", "namespace pod node resource unit"),
    _m("kueue_pending_workloads", KUEUE, "gauge", "cluster_queue status replica_role"),
    _m("kueue_admitted_active_workloads", KUEUE, "gauge", "cluster_queue replica_role"),
    _m("kueue_admitted_workloads_total", KUEUE, "counter", "cluster_queue replica_role"),
    _m("kueue_cluster_queue_status", KUEUE, "gauge", "cluster_queue status replica_role"),
    _m("kueue_admission_wait_time_seconds", KUEUE, "histogram", "cluster_queue replica_role"),
    _m("kueue_evicted_workloads_total", KUEUE, "counter", "cluster_queue reason replica_role"),
    _m("kueue_cluster_queue_resource_usage", KUEUE, "gauge", "cluster_queue flavor resource replica_role",
       "needs metrics.enableClusterQueueResources"),
    _m("kueue_cluster_queue_nominal_quota", KUEUE, "gauge", "cluster_queue flavor resource replica_role",
       "needs metrics.enableClusterQueueResources"),
    _m("controller_runtime_reconcile_errors_total", CONTROLLERS, "counter", "controller namespace job"),
    _m("velero_backup_last_status", VELERO, "gauge", "schedule", "1 success, 0 failure"),
    _m("velero_backup_last_successful_timestamp", VELERO, "gauge", "schedule"),
    _m("velero_backup_success_total", VELERO, "counter", "schedule"),
    _m("velero_backup_failure_total", VELERO, "counter", "schedule"),
    _m("velero_backup_location_status_gauge", VELERO, "gauge", "backup_location_name"),
    _m("kubelet_volume_stats_available_bytes", KUBELET, "gauge", "namespace persistentvolumeclaim"),
    _m("kubelet_volume_stats_capacity_bytes", KUBELET, "gauge", "namespace persistentvolumeclaim"),
    _m("apiserver_admission_webhook_rejection_count", APISERVER, "counter", "name type operation error_type"),
    _m("up", PROMETHEUS, "gauge", "job namespace instance", "synthetic: one per scrape target"),
)


# What the pipeline layer's rules and dashboard read (infra/platform/kfp/observability.py): known to the
# offline checks only where the render scrapes their exporter (a monitor with its job, infra/checks/observability.py),
# and kept out of CATALOG, which every stack reads whole. A metric's `namespace` attribute arrives as
# `exported_namespace` (the target's own `namespace` label wins the scrape). The kube-state-metrics pod series carry
# label_workflows_argoproj_io_* only with the pod-label allowlist the pipeline layer adds.
_WORKFLOW_POD = "namespace pod uid label_workflows_argoproj_io_workflow label_workflows_argoproj_io_completed"
PIPELINE_CATALOG: tuple[Metric, ...] = (
    _m("argo_workflows_total_count", ARGO, "counter", "phase exported_namespace",
       "workflows entering each phase, by namespace"),
    _m("argo_workflows_gauge", ARGO, "gauge", "status", "workflows in the cluster per phase (attribute `status`)"),
    _m("argo_workflows_pods_gauge", ARGO, "gauge", "phase", "workflow pods per phase"),
    _m("argo_workflows_operation_duration_seconds", ARGO, "histogram", "", "one reconciliation of one workflow"),
    _m("argo_workflows_error_count", ARGO, "counter", "cause"),
    _m("resource_manager_workflow_runs_failed", KFP, "gauge", "profile workflow",
       "1 per failed run reported since the API server started; profile = the run's namespace"),
    _m("resource_manager_workflow_runs_success", KFP, "gauge", "profile workflow"),
    _m("run_server_create_requests", KFP, "counter", ""),
    _m("kube_pod_labels", KSM, "gauge", _WORKFLOW_POD, "labels from metricLabelsAllowlist"),
    _m("kube_pod_status_phase", KSM, "gauge", "namespace pod uid phase"),
    _m("kube_pod_created", KSM, "gauge", "namespace pod uid"),
    _m("kube_pod_start_time", KSM, "gauge", "namespace pod uid"),
    _m("kube_pod_completion_time", KSM, "gauge", "namespace pod uid"),
)


# What serving's rules read (infra/platform/models/observability.py), known to the offline checks only where the
# render scrapes the predictors and probes the registries (stacks with `models`). The predictor's series carry the
# scrape's `namespace` and the pod label serving.kserve.io/inferenceservice (podTargetLabels).
MODELS_CATALOG: tuple[Metric, ...] = (
    _m("request_predict_seconds", KSERVE_RUNTIME, "histogram",
       "model_name namespace pod serving_kserve_io_inferenceservice", "the predict step of one request"),
    _m("trainyard_registry_production_version_info", REGISTRY_EXPORTER, "gauge",
       "namespace registered_model_id model_version_id model_version", "1 per version whose stage is production"),
    _m("kube_inferenceservice_info", KSM_SERVING, "gauge", "namespace inferenceservice registered_model_id "
       "model_version_id", "1 per InferenceService, with its registry labels"),
    _m("kube_inferenceservice_status_condition", KSM_SERVING, "gauge", "namespace inferenceservice type",
       "1 True, 0 False or Unknown"),
    _m("kube_pod_container_status_restarts_total", KSM, "counter", "namespace pod uid container"),
    _m("kube_pod_init_container_status_restarts_total", KSM, "counter", "namespace pod uid container"),
)


def by_name() -> dict[str, Metric]:
    return {metric.name: metric for metric in CATALOG}


def series_names(metric: Metric) -> tuple[str, ...]:
    """The names a query may use for a metric: histograms are read through their _bucket/_sum/_count series."""
    if metric.kind == "histogram":
        return tuple(f"{metric.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return (metric.name,)


def dcgm_metrics_csv() -> str:
    """The exporter's field list (format `FIELD, type, help`): the operator's default fields our rules and
    dashboards read, plus the ECC, NVLink-error and throttle counters its default list leaves out."""
    lines = ["# Trainyard's DCGM exporter field list (infra/spec/metrics.py)"]
    for metric in CATALOG:
        if metric.component == DCGM:
            lines.append(f"{metric.name}, {metric.kind}, {metric.note or metric.name}.")
    return "\n".join(lines) + "\n"
