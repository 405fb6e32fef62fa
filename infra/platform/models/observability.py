"""Serving observed (issue 31 point 6, docs/observability.md "Serving"): Prometheus scrapes the teams' predictor pods,
kube-state-metrics exports each InferenceService's registry labels and Ready condition, and a JSON exporter turns
each team registry's production versions into series; alerts for predictors not ready or restarting (the serving
errors that can be seen), slow predictions, a version mismatch between the registry's production and what serves,
and a registry Prometheus cannot read (runbooks in docs/operations.md); a dashboard of predictions, latency,
readiness and versions. All of it exists only on a stack that declares `models`.

Upstream facts (names in infra/spec/metrics.py MODELS_CATALOG):
- KServe v0.16.0's Python runtimes (sklearn, xgboost, lightgbm, pmml, ...) serve Prometheus text at `/metrics` on
  the kserve-container's HTTP port 8080 (KS:python/kserve/kserve/protocol/rest/server.py; the runtimes' annotations
  `prometheus.kserve.io/port: '8080'`, `prometheus.kserve.io/path: /metrics`, KS:config/runtimes/). The series:
  histograms `request_predict_seconds` (and pre/postprocess, explain) labelled `model_name`
  (KS:python/kserve/kserve/metrics.py). Nothing counts responses by HTTP status: no 5xx ratio can be computed from
  the predictor's own metrics (the histogram times failed predictions too; the REST server's TimingMiddleware only
  logs, KS:python/kserve/kserve/protocol/rest/server.py). What is seen of errors: kube-state-metrics v2.20.0's
  `kube_pod_container_status_restarts_total` and `kube_pod_init_container_status_restarts_total`
  (docs/metrics/workload/pod-metrics.md) for the containers `kserve-container` (the model server: its exit loses
  the requests it held, and with one replica every request fails until it is back) and `storage-initializer`
  (the model download failing: a rollout that cannot finish, or a rescheduled pod that cannot start).
- Standard mode runs no queue-proxy: `serving.kserve.io/enable-prometheus-scraping` only writes `prometheus.io/*`
  annotations naming port 9091, queue-proxy's (KS:pkg/webhook/admission/pod/metrics_aggregate_injector.go), and the
  Prometheus operator reads no such annotation: a PodMonitor scrapes port 8080 itself.
- Predictor pods carry `component: predictor`, `serving.kserve.io/inferenceservice: <name>` and the
  InferenceService's own labels (KS:pkg/controller/v1beta1/inferenceservice/components/predictor.go).
- The registry exports no metrics. Its REST API lists a team's production versions with
  `GET /api/model_registry/v1alpha3/model_versions?filterQuery=stage='production'` (MR@v0.3.7: filterQuery reads
  custom properties). prometheus-community/json_exporter v0.7.0 fetches that URL per scrape (`/probe?module=&target=`)
  and names an object metric `<name>_<value name>` (exporter/util.go MakeMetricName).
- kube-state-metrics v2.20.0's custom resource state: metrics `<metricNamePrefix>_<name>`, Info metrics valued 1,
  condition status "True"/"False" read as 1/0 (docs/metrics/extend/customresourcestate-metrics.md).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import yaml

from infra.components import MONITORING
from infra.kit.objects import NETWORKING_API
from infra.platform.alerts import alert
from infra.platform.dashboards import _dashboard, _variable, dashboard_json
from infra.platform.frontdoor import PROMETHEUS_PEER
from infra.spec import Platform
from infra.spec.models.model import REGISTRY_PORT
from infra.spec.versions import REGISTRY_EXPORTER_IMAGE
from infra.vocabulary import NAME_LABEL

MONITOR_API = "monitoring.coreos.com/v1"
MONITORING_NAMESPACE = MONITORING.namespace
PREDICTOR_JOB = "predictor"  # the PodMonitor's jobLabel `component`: the predictor pods' value
PREDICTOR_PORT = 8080
ISVC_LABEL = "serving.kserve.io/inferenceservice"
ISVC_SERIES_LABEL = "serving_kserve_io_inferenceservice"  # the pod label as the scrape names it (podTargetLabels)
VERSION_LABEL = "modelregistry.kubeflow.org/model-version-id"
MODEL_LABEL = "modelregistry.kubeflow.org/registered-model-id"
REGISTRY_POD = {"component": "model-registry-server"}  # the vendored registry server's pod label
EXPORTER = "registry-exporter"
EXPORTER_PORT = 7979
REGISTRY_JOB = "model-registry-production"
EXPORTER_MODULE = "production"
PRODUCTION_SERIES = "trainyard_registry_production_version"  # + `_info` (the object metric's value name)
KSM_PREFIX = "kube_inferenceservice"  # kube_inferenceservice_info, kube_inferenceservice_status_condition
# Thresholds, starting points: the p95 of the predict step alone (not pre/postprocessing) over 5 minutes, the time a
# predictor may stay not Ready (a rollout of a large model included), a promotion not yet rolled out.
LATENCY_P95_SECONDS = 1.0
NOT_READY = "10m"
MISMATCH = "30m"
# A restart counted in this window fires: each one lost the requests the model server held, or failed a download.
RESTART_WINDOW = "15m"
# The containers KServe names in a predictor pod (KS@v0.16.0:pkg/constants/constants.go
# InferenceServiceContainerName, StorageInitializerContainerName).
MODEL_CONTAINER, INITIALIZER_CONTAINER = "kserve-container", "storage-initializer"
SCRAPE_POLICY = "allow-prometheus-scrape-predictors"
EXPORTER_POLICY = "allow-registry-exporter"


def models_declared(platform: Platform) -> bool:
    return platform.models is not None


def _namespaces(platform: Platform) -> list[str]:
    return [team.namespace for team in platform.models.teams] if platform.models else []


def production_url(registry_url: str) -> str:
    """The registry's list of versions whose custom property `stage` is `production`."""
    query = quote("stage='production'")
    return f"{registry_url}/api/model_registry/v1alpha3/model_versions?filterQuery={query}&pageSize=1000"


def exporter_config() -> dict[str, Any]:
    """json_exporter's modules: one series per production version, labelled with its ids and name."""
    return {"modules": {EXPORTER_MODULE: {"metrics": [{
        "name": PRODUCTION_SERIES, "type": "object", "help": "a model version whose stage is production",
        "path": "{.items[*]}",
        "labels": {"registered_model_id": "{.registeredModelId}", "model_version_id": "{.id}",
                   "model_version": "{.name}"},
        "values": {"info": 1}}]}}}


def ksm_values(platform: Platform) -> dict[str, Any]:
    """kube-state-metrics' chart values: the InferenceService custom resource state and the right to list them."""
    if not models_declared(platform):
        return {}
    config = {"kind": "CustomResourceStateMetrics", "spec": {"resources": [{
        "groupVersionKind": {"group": "serving.kserve.io", "version": "v1beta1", "kind": "InferenceService"},
        "metricNamePrefix": KSM_PREFIX,
        "labelsFromPath": {"namespace": ["metadata", "namespace"], "inferenceservice": ["metadata", "name"]},
        "metrics": [
            {"name": "info", "help": "the registry ids an InferenceService carries",
             "each": {"type": "Info", "info": {"labelsFromPath": {
                 "registered_model_id": ["metadata", "labels", MODEL_LABEL],
                 "model_version_id": ["metadata", "labels", VERSION_LABEL]}}}},
            {"name": "status_condition", "help": "an InferenceService's conditions (1 True, 0 otherwise)",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "conditions"],
                                                 "labelsFromPath": {"type": ["type"]}, "valueFrom": ["status"]}}}]}]}}
    return {"customResourceState": {"enabled": True, "config": config},
            "rbac": {"extraRules": [{"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices"],
                                     "verbs": ["list", "watch"]}]}}


def pod_monitor(platform: Platform) -> dict[str, Any]:
    return {"selector": {"matchLabels": {"component": PREDICTOR_JOB},
                         "matchExpressions": [{"key": ISVC_LABEL, "operator": "Exists"}]},
            "namespaceSelector": {"matchNames": _namespaces(platform)}, "jobLabel": "component",
            "podTargetLabels": [ISVC_LABEL, VERSION_LABEL],
            "podMetricsEndpoints": [{"portNumber": PREDICTOR_PORT, "path": "/metrics", "interval": "30s"}]}


def _exporter_pod() -> dict[str, Any]:
    return {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "json-exporter", "image": REGISTRY_EXPORTER_IMAGE,
            "args": ["--config.file=/config/config.yml"],
            "ports": [{"name": "http", "containerPort": EXPORTER_PORT}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}]}],
        "volumes": [{"name": "config", "configMap": {"name": EXPORTER}}]}


def monitoring_objects(platform: Platform) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """(resource name, apiVersion, kind, object name, fields) in `monitoring`: the predictors' PodMonitor, the
    exporter (ConfigMap, Deployment, Service) and one Probe per team registry."""
    if not models_declared(platform) or platform.models is None:
        return []
    labels = {"app": EXPORTER}
    found: list[tuple[str, str, str, str, dict[str, Any]]] = [
        ("podmonitor-kserve-predictors", MONITOR_API, "PodMonitor", "kserve-predictors",
         {"spec": pod_monitor(platform)}),
        (f"configmap-{EXPORTER}", "v1", "ConfigMap", EXPORTER,
         {"data": {"config.yml": yaml.safe_dump(exporter_config(), sort_keys=True)}}),
        (f"deployment-{EXPORTER}", "apps/v1", "Deployment", EXPORTER, {"spec": {
            "replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _exporter_pod()}}}),
        (f"service-{EXPORTER}", "v1", "Service", EXPORTER, {"spec": {
            "selector": labels, "ports": [{"name": "http", "port": EXPORTER_PORT, "targetPort": "http"}]}}),
    ]
    for team in platform.models.teams:
        found.append((f"probe-registry-{team.team}", MONITOR_API, "Probe", f"registry-{team.team}", {"spec": {
            "jobName": REGISTRY_JOB, "interval": "60s", "module": EXPORTER_MODULE,
            "prober": {"url": f"{EXPORTER}.{MONITORING_NAMESPACE}.svc:{EXPORTER_PORT}", "path": "/probe"},
            "targets": {"staticConfig": {"static": [production_url(team.registry_url)],
                                         "labels": {"namespace": team.namespace}}}}}))
    return found


def team_objects(platform: Platform) -> list[tuple[str, str, str, str, str, dict[str, Any]]]:
    """(resource name, namespace, apiVersion, kind, object name, spec) in each models namespace: Prometheus reaches
    the predictors' metrics port, the exporter the registry's REST port; nothing else is opened."""
    found: list[tuple[str, str, str, str, str, dict[str, Any]]] = []
    exporter = {"namespaceSelector": {"matchLabels": {NAME_LABEL: MONITORING_NAMESPACE}},
                "podSelector": {"matchLabels": {"app": EXPORTER}}}
    for namespace in _namespaces(platform):
        found.append((f"{namespace}-{SCRAPE_POLICY}", namespace, NETWORKING_API, "NetworkPolicy", SCRAPE_POLICY, {
            "podSelector": {"matchLabels": {"component": PREDICTOR_JOB}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [PROMETHEUS_PEER], "ports": [{"protocol": "TCP", "port": PREDICTOR_PORT}]}]}))
        found.append((f"{namespace}-{EXPORTER_POLICY}", namespace, NETWORKING_API, "NetworkPolicy", EXPORTER_POLICY, {
            "podSelector": {"matchLabels": REGISTRY_POD}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [exporter], "ports": [{"protocol": "TCP", "port": REGISTRY_PORT}]}]}))
    return found


def _restarts(ns: str) -> str:
    """PromQL: predictor pods whose model server or storage initializer restarted within RESTART_WINDOW
    (kube-state-metrics' restart counters; the init container's has its own metric)."""
    by = "namespace, pod, container"
    return " or ".join(
        f'sum by ({by}) (rate({metric}{{{ns}, container="{container}"}}[{RESTART_WINDOW}])) > 0'
        for metric, container in (("kube_pod_container_status_restarts_total", MODEL_CONTAINER),
                                  ("kube_pod_init_container_status_restarts_total", INITIALIZER_CONTAINER)))


def serving_rules(platform: Platform) -> list[dict[str, Any]]:
    if not models_declared(platform):
        return []
    ns = f'namespace=~"{"|".join(_namespaces(platform))}"'
    by = f"namespace, {ISVC_SERIES_LABEL}"
    ids = "namespace, registered_model_id"
    serving = f"max by ({ids}, model_version_id) (kube_inferenceservice_info{{{ns}}})"
    production = f"max by ({ids}, model_version_id, model_version) ({PRODUCTION_SERIES}_info{{{ns}}})"
    return [
        alert("InferenceServiceNotReady",
              f'max by (namespace, inferenceservice) (kube_inferenceservice_status_condition{{{ns}, type="Ready"}})'
              " == 0",
              "critical", "InferenceService {{ $labels.inferenceservice }} in {{ $labels.namespace }} is not Ready: "
              "its endpoint answers 503 or nothing", for_=NOT_READY),
        # The serving-errors alert: the predictors count no responses by status (module docstring), so what is seen
        # of failures is the model server exiting (its requests lost) and the model download failing.
        alert("InferenceServicePredictorRestarting", _restarts(ns),
              "warning", "{{ $labels.container }} of predictor pod {{ $labels.pod }} in {{ $labels.namespace }} "
              f"restarted in the last {RESTART_WINDOW}: requests it held failed"),
        alert("InferenceServiceLatencyHigh",
              f"histogram_quantile(0.95, sum by (le, {by}) (rate(request_predict_seconds_bucket"
              f'{{job="{PREDICTOR_JOB}", {ns}}}[5m]))) > {LATENCY_P95_SECONDS}',
              "warning", f"InferenceService {{{{ $labels.{ISVC_SERIES_LABEL} }}}} in {{{{ $labels.namespace }}}}: "
              f"95% of predictions took up to {{{{ $value | humanizeDuration }}}} (threshold {LATENCY_P95_SECONDS}s)",
              for_="10m"),
        # A registered model with a production version, served in its namespace, but not at that version.
        alert("ModelVersionMismatch",
              f"({production} unless on ({ids}, model_version_id) {serving})"
              f" and on ({ids}) max by ({ids}) (kube_inferenceservice_info{{{ns}}})",
              "warning", "{{ $labels.namespace }}: registered model {{ $labels.registered_model_id }}'s production "
              "version {{ $labels.model_version }} (id {{ $labels.model_version_id }}) is not what its "
              "InferenceService serves", for_=MISMATCH),
        alert("ModelRegistryUnreachable", f'up{{job="{REGISTRY_JOB}", {ns}}} == 0',
              "warning", "the model registry of {{ $labels.namespace }} cannot be read: its production versions "
              "are unknown and ModelVersionMismatch cannot fire", for_="15m"),
    ]


def serving_dashboard(platform: Platform) -> dict[str, Any]:
    """Per InferenceService of the selected models namespaces: predictions per second and their latency, readiness,
    which version serves beside which one the registry calls production."""
    ns = 'namespace=~"$namespace"'
    isvc = f"{{{{namespace}}}} {{{{{ISVC_SERIES_LABEL}}}}}"
    rate = f"rate(request_predict_seconds_bucket{{job=\"{PREDICTOR_JOB}\", {ns}}}[$__rate_interval])"
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Predictions per second", "reqps", [
            (f"sum by (namespace, {ISVC_SERIES_LABEL}) (rate(request_predict_seconds_count{{job=\"{PREDICTOR_JOB}\","
             f" {ns}}}[$__rate_interval]))", isvc)]),
        ("Predict latency p50 and p95", "s", [
            (f"histogram_quantile(0.5, sum by (le, namespace, {ISVC_SERIES_LABEL}) ({rate}))", f"p50 {isvc}"),
            (f"histogram_quantile(0.95, sum by (le, namespace, {ISVC_SERIES_LABEL}) ({rate}))", f"p95 {isvc}")]),
        ("InferenceServices Ready (1) or not (0)", "short", [
            (f'max by (namespace, inferenceservice) (kube_inferenceservice_status_condition{{{ns}, type="Ready"}})',
             "{{namespace}} {{inferenceservice}}")]),
        ("Version served per InferenceService (registry id)", "short", [
            (f"max by (namespace, inferenceservice, registered_model_id, model_version_id) "
             f"(kube_inferenceservice_info{{{ns}}})",
             "{{namespace}} {{inferenceservice}}: model {{registered_model_id}} version {{model_version_id}}")]),
        ("Production version per registered model (registry)", "short", [
            (f"max by (namespace, registered_model_id, model_version_id, model_version) "
             f"({PRODUCTION_SERIES}_info{{{ns}}})",
             "{{namespace}} model {{registered_model_id}}: {{model_version}} ({{model_version_id}})")]),
    ]
    variable = _variable("namespace", "label_values(kube_inferenceservice_info, namespace)")
    return _dashboard("trainyard-serving", "Trainyard / Serving", panels, [variable])


def serving_dashboards(platform: Platform) -> dict[str, str]:
    """ConfigMap name -> dashboard JSON, as dashboards.py writes them."""
    if not models_declared(platform):
        return {}
    return {"trainyard-dashboard-serving": dashboard_json(serving_dashboard(platform))}
