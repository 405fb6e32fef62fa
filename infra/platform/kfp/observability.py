"""The pipeline layer observed (issue 30 point 6, docs/observability.md "Pipelines"): Prometheus scrapes Argo
Workflows' controller and the Kubeflow Pipelines API server; alerts for failed runs, stuck steps and runs, and a
down API server or workflow controller (runbooks in docs/operations.md); a dashboard of runs per team and step
durations. All of it exists only on a stack that declares pipelines (`pipelines_declared`).

Upstream facts (the vendored Kubeflow Platform 26.03's
applications/pipeline/upstream/env/cert-manager/platform-agnostic-multi-user rendered with kustomize 5; Argo
v3.7.3 and KFP 2.16.0 sources, names in infra/spec/metrics.py PIPELINE_CATALOG):
- Namespace `kubeflow`. Deployment workflow-controller: pods `app: workflow-controller`, container port `metrics`
  9090, /metrics over TLS with a self-signed certificate (metricsConfig.secure defaults to true since Argo 3.6 and
  the overlay's workflow-controller-configmap sets no metricsConfig). The overlay renders no metrics Service.
- Deployment ml-pipeline: pods `app: ml-pipeline`, port `http` 8888: the REST API and /metrics, plain HTTP. Its
  Service carries exactly the labels of ml-pipeline-visualizationserver's (same port name and number), so a
  ServiceMonitor cannot tell the two apart: both components are scraped as PodMonitors on the pods' `app` label,
  which also names the job (jobLabel), as Prometheus shows it and verify looks for it.
- The archive's kubeflow NetworkPolicies (common/kubeflow-namespace/base/kubeflow) admit only the namespace itself,
  profile namespaces and istio-system: a policy here lets Prometheus' pods reach the two ports.
- Argo labels every pod of a workflow `workflows.argoproj.io/workflow=<name>` and `workflows.argoproj.io/completed`
  (false until the step is done); kube-state-metrics exports them once allowlisted: the stuck-run and step-duration
  queries join on them. KFP labels the same pods `pipeline/runid=<run id>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.components import PIPELINES
from infra.kit.objects import NETWORKING_API
from infra.platform.alerts import alert
from infra.platform.dashboards import _dashboard, _variable, dashboard_json
from infra.platform.frontdoor import PROMETHEUS_PEER
from infra.spec import Platform
from infra.spec.metrics import ARGO, KFP

NAMESPACE = PIPELINES.namespace
WORKFLOW_LABEL, COMPLETED_LABEL = "workflows.argoproj.io/workflow", "workflows.argoproj.io/completed"
WF = "label_workflows_argoproj_io_workflow"  # kube-state-metrics' names for the two pod labels
DONE = "label_workflows_argoproj_io_completed"
RUN_LABEL = "pipeline/runid"
# Thresholds, starting points: a step pod Pending this long waits for something that will not come (quota, an
# image, a volume); a run still stepping after this long is stuck or far beyond what the teams run today.
STEP_PENDING = "1h"
RUN_HOURS = 24
FAILURE_WINDOW = "1h"
MONITOR_API = "monitoring.coreos.com/v1"
SCRAPE_POLICY = "allow-prometheus-scrape"


@dataclass(frozen=True)
class PodScrape:
    """One component scraped on its pods' `app` label (the job's name) and named container port."""

    app: str
    port: str
    port_number: int
    component: str  # infra/spec/metrics.py: whose metrics the job brings
    endpoint: tuple[tuple[str, Any], ...] = ()


SCRAPES = (
    PodScrape("workflow-controller", "metrics", 9090, ARGO,
              (("scheme", "https"), ("tlsConfig", {"insecureSkipVerify": True}))),
    PodScrape("ml-pipeline", "http", 8888, KFP),
)
JOBS = {scrape.component: scrape.app for scrape in SCRAPES}


def pipelines_declared(platform: Platform) -> bool:
    """Whether the stack (this cluster: a hybrid stack's manager) runs Kubeflow Pipelines."""
    return platform.pipelines is not None


def scrape_jobs(platform: Platform) -> tuple[str, ...]:
    return tuple(scrape.app for scrape in SCRAPES) if pipelines_declared(platform) else ()


def ksm_pod_labels(platform: Platform) -> list[str]:
    """kube-state-metrics' metricLabelsAllowlist entry for Argo's pod labels."""
    return [f"pods=[{WORKFLOW_LABEL},{COMPLETED_LABEL}]"] if pipelines_declared(platform) else []


def pod_monitor(scrape: PodScrape) -> dict[str, Any]:
    """The PodMonitor's spec."""
    return {"selector": {"matchLabels": {"app": scrape.app}}, "namespaceSelector": {"matchNames": [NAMESPACE]},
            "jobLabel": "app",
            "podMetricsEndpoints": [{"port": scrape.port, "path": "/metrics", "interval": "30s",
                                     **dict(scrape.endpoint)}]}


def scrape_policy() -> dict[str, Any]:
    """The NetworkPolicy's spec: Prometheus' pods reach the scraped ports; nothing else is opened."""
    return {"podSelector": {"matchExpressions": [{"key": "app", "operator": "In",
                                                  "values": [scrape.app for scrape in SCRAPES]}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [PROMETHEUS_PEER],
                         "ports": [{"protocol": "TCP", "port": scrape.port_number} for scrape in SCRAPES]}]}


def mesh_scrape_policy() -> dict[str, Any]:
    """The AuthorizationPolicy's spec: Pipelines' pods carry sidecars and istio-system's `global-deny-all` refuses
    whatever no ALLOW policy names. The API server's own policy lets requests without an identity header through
    (its /metrics included); the workflow controller has none, so its metrics port (metrics only, TLS the sidecar
    cannot read) is allowed here; who may connect stays the NetworkPolicy's answer (Prometheus only)."""
    return {"selector": {"matchLabels": {"app": "workflow-controller"}}, "action": "ALLOW",
            "rules": [{"to": [{"operation": {"ports": [str(scrape.port_number) for scrape in SCRAPES
                                                        if scrape.app == "workflow-controller"]}}]}]}


def objects(platform: Platform) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """(resource name, apiVersion, kind, object name, spec) of what the observability component adds in
    `kubeflow`: one PodMonitor per scraped component and the scrape's NetworkPolicy (its mesh allowance comes with
    the install, after Istio's CRDs: infra/platform/kfp/pipelines.py)."""
    if not pipelines_declared(platform):
        return []
    found = [(f"podmonitor-{scrape.app}", MONITOR_API, "PodMonitor", scrape.app, pod_monitor(scrape))
             for scrape in SCRAPES]
    found.append((f"{NAMESPACE}-{SCRAPE_POLICY}", NETWORKING_API, "NetworkPolicy", SCRAPE_POLICY, scrape_policy()))
    return found


def _teams(platform: Platform) -> str:
    return "|".join(sorted(ns for team in platform.teams for ns in team.namespaces))


def _down(name: str, deployment: str, job: str, summary: str) -> dict[str, Any]:
    """No available replica, or nothing scraped from it (the pod is there but not serving)."""
    return alert(name,
                 f'(max(kube_deployment_status_replicas_available{{namespace="{NAMESPACE}",'
                 f' deployment="{deployment}"}}) or vector(0)) < 1'
                 f' or (sum(up{{job="{job}"}}) or vector(0)) < 1',
                 "critical", summary, for_="5m", labels={"namespace": NAMESPACE, "deployment": deployment})


def pipeline_rules(platform: Platform) -> list[dict[str, Any]]:
    if not pipelines_declared(platform):
        return []
    teams = _teams(platform)
    in_teams = f'namespace=~"{teams}"'
    pods = f'kube_pod_labels{{{in_teams}, {WF}!=""}}'
    failed = f'argo_workflows_total_count{{phase=~"Failed|Error", exported_namespace=~"{teams}"}}'
    return [
        # A counter series appears with its first failure: `unless ... offset` counts the ones born in the window,
        # which increase() alone would miss.
        alert("PipelineRunsFailed",
              f'sum by (namespace) (label_replace(increase({failed}[{FAILURE_WINDOW}])'
              f' or ({failed} unless {failed} offset {FAILURE_WINDOW}),'
              ' "namespace", "$1", "exported_namespace", "(.*)")) > 0',
              "warning", "{{ $value | humanize }} pipeline run(s) in {{ $labels.namespace }} failed or errored "
              f"in the last {FAILURE_WINDOW}"),
        alert("PipelineStepPendingTooLong",
              f'max by (namespace, pod, {WF}) (kube_pod_status_phase{{phase="Pending", {in_teams}}}'
              f" * on (namespace, pod) group_left ({WF}) {pods}) == 1",
              "warning", f"step pod {{{{ $labels.pod }}}} of run {{{{ $labels.{WF} }}}} in "
              f"{{{{ $labels.namespace }}}} has been Pending for over {STEP_PENDING}", for_=STEP_PENDING),
        alert("PipelineRunTooLong",
              f"(time() - min by (namespace, {WF}) (kube_pod_created{{{in_teams}}}"
              f" * on (namespace, pod) group_left ({WF}) {pods})) > {RUN_HOURS} * 3600"
              f" and on (namespace, {WF}) max by (namespace, {WF})"
              f' (kube_pod_labels{{{in_teams}, {WF}!="", {DONE}!="true"}})',
              "warning", f"run {{{{ $labels.{WF} }}}} in {{{{ $labels.namespace }}}} started over {RUN_HOURS}h "
              "ago and still has steps that have not finished", for_="15m"),
        _down("PipelineAPIServerDown", "ml-pipeline", JOBS[KFP],
              "the Kubeflow Pipelines API server is down or unscraped: no upload, run, or run record"),
        _down("PipelineWorkflowControllerDown", "workflow-controller", JOBS[ARGO],
              "Argo's workflow controller is down or unscraped: no pipeline step starts or finishes"),
    ]


def pipeline_dashboard(platform: Platform) -> dict[str, Any]:
    """Runs per team (Argo's per-namespace counter, the API server's run records, runs in progress from the
    pods), step durations (finished and running step pods), and the controller's own health."""
    team = 'namespace=~"$team"'
    pods = f'kube_pod_labels{{{team}, {WF}!=""}}'
    runs = 'argo_workflows_total_count{exported_namespace=~"$team"'
    by_pod = f"* on (namespace, pod) group_left ({WF}) {pods}"
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Runs started per team, per day", "short", [
            (f'sum by (exported_namespace) (increase({runs}, phase="Running"}}[1d]))', "{{exported_namespace}}")]),
        ("Runs finished per team and outcome, per hour", "short", [
            (f'sum by (exported_namespace, phase) (increase({runs}, phase=~"Succeeded|Failed|Error"}}[1h]))',
             "{{exported_namespace}} {{phase}}")]),
        ("Runs in progress per team", "short", [
            (f"count by (namespace) (max by (namespace, {WF}) "
             f'(kube_pod_labels{{{team}, {WF}!="", {DONE}!="true"}}))', "{{namespace}}")]),
        ("Run records per team (API server, since its start)", "short", [
            ('sum by (profile) (resource_manager_workflow_runs_success{profile=~"$team"})', "succeeded {{profile}}"),
            ('sum by (profile) (resource_manager_workflow_runs_failed{profile=~"$team"})', "failed {{profile}}")]),
        ("Step durations (finished steps)", "s", [
            (f"max by (namespace, {WF}, pod) ((kube_pod_completion_time{{{team}}} - kube_pod_start_time{{{team}}})"
             f" {by_pod})", f"{{{{namespace}}}} {{{{{WF}}}}} {{{{pod}}}}")]),
        ("Running steps, time so far", "s", [
            (f"max by (namespace, {WF}, pod) (((time() - kube_pod_start_time{{{team}}}) and on (namespace, pod)"
             f' (kube_pod_status_phase{{phase="Running", {team}}} == 1)) {by_pod})',
             f"{{{{namespace}}}} {{{{{WF}}}}} {{{{pod}}}}")]),
        ("Workflows per phase (all namespaces)", "short", [
            ("sum by (status) (argo_workflows_gauge)", "{{status}}")]),
        ("Workflow pods per phase (all namespaces)", "short", [
            ("sum by (phase) (argo_workflows_pods_gauge)", "{{phase}}")]),
        ("Workflow controller: reconciliation p95", "s", [
            ("histogram_quantile(0.95, sum by (le) "
             "(rate(argo_workflows_operation_duration_seconds_bucket[$__rate_interval])))", "p95")]),
        ("Controller errors by cause, and runs created through the API, per hour", "short", [
            ("sum by (cause) (increase(argo_workflows_error_count[1h]))", "error {{cause}}"),
            ("sum(increase(run_server_create_requests[1h]))", "runs created")]),
    ]
    variable = _variable("team", "label_values(argo_workflows_total_count, exported_namespace)")
    return _dashboard("trainyard-pipelines", "Trainyard / Pipelines", panels, [variable])


def pipeline_dashboards(platform: Platform) -> dict[str, str]:
    """ConfigMap name -> dashboard JSON, as dashboards.py writes them."""
    if not pipelines_declared(platform):
        return {}
    return {"trainyard-dashboard-pipelines": dashboard_json(pipeline_dashboard(platform))}
