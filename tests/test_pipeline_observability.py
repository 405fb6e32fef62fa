"""The pipeline layer observed (issue 30 point 6): the PodMonitors select the pods the vendored Kubeflow Pipelines
overlay renders, on ports those pods declare; the alerts and the dashboard read only series that a rendered monitor
scrapes (and the check refuses them once a monitor is gone); verify looks for the two new jobs; every pipeline
alert has its runbook; nothing of it exists on a stack that declares no pipelines.

Every repository stack declares `pipelines`; the tests also turn `pipelines_declared` on and off for a run of the
program to see both sides."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.checks.observability import dashboard_findings, grafana_expr, metric_names, rule_findings
from infra.live.verify import target_findings
from infra.offline import engine, kustomize
from infra.offline.manifestcache import ensure
from infra.offline.plan import objects
from infra.platform.alerts import anchor
from infra.platform.kfp import observability as pipelines
from infra.platform.kfp.observability import SCRAPE_POLICY
from infra.platform.observability import chart_values, scrape_jobs
from infra.spec import validate
from infra.spec.metrics import PIPELINE_CATALOG, series_names
from infra.spec.versions import KUBEFLOW_MANIFESTS
from tests.conftest import ROOT, capture_of, kube_objects, platform_of, raw_platform, run_raw
from tests.test_observability import OPERATIONS, RUNBOOKS, runbook_sections

STACK = "onprem-lab"
KFP_OVERLAY = "applications/pipeline/upstream/env/cert-manager/platform-agnostic-multi-user"
ALERTS = {"PipelineRunsFailed", "PipelineStepPendingTooLong", "PipelineRunTooLong", "PipelineAPIServerDown",
          "PipelineWorkflowControllerDown"}
PREDICTORS_MONITOR = "kserve-predictors"  # infra/platform/models/observability.py


def _declared() -> engine.Capture:
    """onprem-lab's program run, which declares pipelines (as every repository stack does)."""
    capture = capture_of(STACK)
    assert platform_of(STACK).pipelines is not None
    return capture


@pytest.fixture
def declared() -> engine.Capture:
    return _declared()


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipelines, "pipelines_declared", lambda platform: True)


@functools.cache
def _vendored() -> tuple[dict[str, Any], ...]:
    """The KFP multi-user overlay as the archive renders it (the oracle for names, labels and ports)."""
    tree = ensure(KUBEFLOW_MANIFESTS, ROOT)
    return tuple(kustomize._build(tree / KFP_OVERLAY))


def _ours(capture: engine.Capture) -> list[dict[str, Any]]:
    return [obj for record, obj in objects(capture) if not record.chart]


def _rules(capture: engine.Capture) -> list[dict[str, Any]]:
    return [rule for obj in kube_objects(capture, "PrometheusRule", own=True) for group in obj["spec"]["groups"]
            if group["name"] == "trainyard-pipelines" for rule in group["rules"]]


def _board(capture: engine.Capture) -> dict[str, Any]:
    maps = [o for o in kube_objects(capture, "ConfigMap") if o["metadata"]["name"] == "trainyard-dashboard-pipelines"]
    assert len(maps) == 1
    return json.loads(maps[0]["data"]["trainyard-dashboard-pipelines.json"])


# --- scraping ---------------------------------------------------------------------------------------------------

def test_each_podmonitor_selects_one_vendored_deployment_on_a_port_it_declares(declared: engine.Capture) -> None:
    # Pipelines' own (the stack's models add KServe's predictors' monitor: tests/test_serving_observability.py)
    monitors = [m for m in kube_objects(declared, "PodMonitor") if m["metadata"]["name"] != PREDICTORS_MONITOR]
    assert sorted(m["metadata"]["name"] for m in monitors) == ["ml-pipeline", "workflow-controller"]
    deployments = [o for o in _vendored() if o["kind"] == "Deployment"]
    for monitor in monitors:
        spec = monitor["spec"]
        assert monitor["metadata"]["namespace"] == spec["namespaceSelector"]["matchNames"][0] == "kubeflow"
        wanted = spec["selector"]["matchLabels"].items()
        selected = [d for d in deployments if wanted <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert len(selected) == 1, monitor["metadata"]["name"]
        assert selected[0]["metadata"]["namespace"] == "kubeflow"
        ports = {p.get("name"): p["containerPort"] for c in selected[0]["spec"]["template"]["spec"]["containers"]
                 for p in c.get("ports", [])}
        endpoint = spec["podMetricsEndpoints"][0]
        assert endpoint["port"] in ports
        # The job is the pods' `app` label: what verify and the rules look for.
        assert selected[0]["spec"]["template"]["metadata"]["labels"][spec["jobLabel"]] == monitor["metadata"]["name"]
    controller = next(m for m in monitors if m["metadata"]["name"] == "workflow-controller")
    assert controller["spec"]["podMetricsEndpoints"][0]["scheme"] == "https"  # Argo >= 3.6 serves TLS by default


def test_a_servicemonitor_could_not_tell_the_api_server_from_the_visualization_server() -> None:
    """Why the API server is scraped on its pods: its Service's labels are another Service's too."""
    services = {o["metadata"]["name"]: o for o in _vendored() if o["kind"] == "Service"}
    api = services["ml-pipeline"]["metadata"]["labels"]
    twins = [name for name, s in services.items() if name != "ml-pipeline" and s["metadata"]["labels"] == api]
    assert twins == ["ml-pipeline-visualizationserver"]
    assert {"name": "http", "port": 8888} in [{k: p[k] for k in ("name", "port")}
                                              for p in services[twins[0]]["spec"]["ports"]]


def test_prometheus_reaches_exactly_the_scraped_ports(declared: engine.Capture) -> None:
    policy = next(o for o in kube_objects(declared, "NetworkPolicy") if o["metadata"]["namespace"] == "kubeflow"
                  and o["metadata"]["name"] == pipelines.SCRAPE_POLICY)
    assert policy["spec"]["podSelector"]["matchExpressions"][0]["values"] == ["workflow-controller", "ml-pipeline"]
    rule = policy["spec"]["ingress"]
    assert len(rule) == 1 and [p["port"] for p in rule[0]["ports"]] == [9090, 8888]
    peer = rule[0]["from"][0]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    vendored_ports = {p["containerPort"] for o in _vendored() if o["kind"] == "Deployment"
                      and o["metadata"]["name"] in ("workflow-controller", "ml-pipeline")
                      for c in o["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    assert {9090, 8888} <= vendored_ports


def test_podmonitors_and_policy_pass_their_schemas(declared: engine.Capture) -> None:
    from infra.apiserver.schema import check_core

    platform = platform_of(STACK)
    index = CrdIndex(ROOT.parent / "shared" / "crds", platform.spec.versions.crd_dirs(),
                     [o for r, o in objects(declared) if o.get("kind") == "CustomResourceDefinition"])
    for monitor in kube_objects(declared, "PodMonitor"):
        assert check_custom(monitor, index) == []
        broken = json.loads(json.dumps(monitor))
        broken["spec"]["podMetricsEndpoints"][0]["scheme"] = "tcp"
        assert check_custom(broken, index)  # the schema check can fail
    policy = next(o for o in kube_objects(declared, "NetworkPolicy") if o["metadata"]["namespace"] == "kubeflow"
                  and o["metadata"]["name"] == pipelines.SCRAPE_POLICY)
    assert check_core(policy, platform.spec.versions.kubernetes) == []


def test_kube_state_metrics_exports_argos_pod_labels_only_with_pipelines(on: None) -> None:
    platform = platform_of(STACK)
    allow = chart_values(platform)["kube-state-metrics"]["metricLabelsAllowlist"]
    assert allow[1] == "pods=[workflows.argoproj.io/workflow,workflows.argoproj.io/completed]"


def test_verify_expects_targets_up_for_both_jobs(on: None) -> None:
    platform = platform_of(STACK)
    assert {"workflow-controller", "ml-pipeline"} <= set(scrape_jobs(platform))

    class Cluster:
        def __init__(self, jobs: set[str]) -> None:
            self.jobs = jobs

        def scrape_targets(self) -> list[dict[str, Any]]:
            return [{"labels": {"job": job}, "health": "up"} for job in self.jobs]

    every = set(scrape_jobs(platform))
    assert target_findings(platform, Cluster(every)) == []  # type: ignore[arg-type]
    missing = target_findings(platform, Cluster(every - {"ml-pipeline"}))  # type: ignore[arg-type]
    assert [f.subject for f in missing] == ["scrape job ml-pipeline"]


# --- rules and dashboard --------------------------------------------------------------------------------------

def test_rules_and_dashboard_parse_and_read_only_scraped_series(declared: engine.Capture) -> None:
    ours = _ours(declared)
    facts = platform_of(STACK).observability
    assert {r["alert"] for r in _rules(declared)} == ALERTS
    assert rule_findings(ours, facts) == []
    assert dashboard_findings(ours, facts) == []


@pytest.mark.parametrize(("monitor", "metric"), [("workflow-controller", "argo_workflows_total_count"),
                                                 ("ml-pipeline", "resource_manager_workflow_runs_failed")])
def test_without_its_monitor_a_query_of_that_exporter_is_refused(declared: engine.Capture, monitor: str,
                                                                 metric: str) -> None:
    facts = platform_of(STACK).observability
    unscraped = [o for o in _ours(declared) if not (o["kind"] == "PodMonitor" and o["metadata"]["name"] == monitor)]
    messages = [f.message for f in rule_findings(unscraped, facts) + dashboard_findings(unscraped, facts)]
    assert any(f"reads '{metric}', which no component of this stack exports" in m for m in messages), messages


def test_every_pipeline_series_of_the_catalog_is_read(declared: engine.Capture) -> None:
    read = {name for rule in _rules(declared) for name in metric_names(rule["expr"])}
    read |= {name for panel in _board(declared)["panels"] for target in panel["targets"]
             for name in metric_names(grafana_expr(target["expr"]))}
    assert [m.name for m in PIPELINE_CATALOG if not set(series_names(m)) & read] == []


def test_the_dashboard_shows_runs_per_team_and_step_durations(declared: engine.Capture) -> None:
    panels = {p["title"]: p for p in _board(declared)["panels"]}
    durations = panels["Step durations (finished steps)"]
    assert durations["fieldConfig"]["defaults"]["unit"] == "s"
    assert "kube_pod_completion_time" in durations["targets"][0]["expr"]
    per_team = panels["Runs finished per team and outcome, per hour"]["targets"][0]["expr"]
    assert per_team.startswith("sum by (exported_namespace, phase)")


def test_alerts_carry_severity_runbook_and_the_thresholds(declared: engine.Capture) -> None:
    rules = {r["alert"]: r for r in _rules(declared)}
    for name, rule in rules.items():
        assert rule["annotations"]["runbook_url"] == f"{RUNBOOKS}#{name.lower()}"
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    assert rules["PipelineAPIServerDown"]["labels"]["severity"] == "critical"
    assert 'up{job="ml-pipeline"}' in rules["PipelineAPIServerDown"]["expr"]
    assert 'deployment="ml-pipeline"' in rules["PipelineAPIServerDown"]["expr"]
    assert rules["PipelineStepPendingTooLong"]["for"] == "1h"
    assert f"> {pipelines.RUN_HOURS} * 3600" in rules["PipelineRunTooLong"]["expr"]
    teams = sorted(ns for team in platform_of(STACK).teams for ns in team.namespaces)
    assert f'exported_namespace=~"{"|".join(teams)}"' in rules["PipelineRunsFailed"]["expr"]
    # A failure counter born inside the window counts whole (increase() alone misses its first sample).
    assert re.search(r"unless argo_workflows_total_count\{[^}]*\} offset 1h", rules["PipelineRunsFailed"]["expr"])


def test_every_pipeline_alert_has_its_runbook_section() -> None:
    sections = runbook_sections(OPERATIONS.read_text(encoding="utf-8"))
    assert {anchor(name) for name in ALERTS} - sections == set()


def test_nothing_of_it_on_a_stack_without_pipelines() -> None:
    raw = raw_platform(STACK)
    del raw["pipelines"]
    capture = run_raw(STACK, raw)
    assert [m for m in kube_objects(capture, "PodMonitor") if m["metadata"]["name"] != PREDICTORS_MONITOR] == []
    assert not [o for o in kube_objects(capture) if o["metadata"].get("namespace") == "kubeflow"
                and o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == pipelines.SCRAPE_POLICY]
    assert _rules(capture) == []
    assert "trainyard-dashboard-pipelines" not in {o["metadata"]["name"] for o in kube_objects(capture, "ConfigMap")}
    assert not {"workflow-controller", "ml-pipeline"} & set(scrape_jobs(validate(raw, STACK)))
    assert {"workflow-controller", "ml-pipeline"} <= set(scrape_jobs(platform_of(STACK)))  # the stack as it is


def test_verify_warns_when_prometheus_holds_no_series_a_pipeline_alert_reads(on: None) -> None:
    from infra.live.verify import alert_series_findings

    platform = platform_of(STACK)

    class Prometheus:
        def __init__(self, names: set[str]) -> None:
            self.names = names

        def metric_names(self) -> set[str]:
            return self.names

    everything = {name for rule in pipelines.pipeline_rules(platform) for name in metric_names(rule["expr"])}
    base = [f.subject for f in alert_series_findings(platform, Prometheus(set()))]  # type: ignore[arg-type]
    assert "metric argo_workflows_total_count" in base
    held = Prometheus(everything | {n for f in base for n in [f.removeprefix("metric ")]})
    assert alert_series_findings(platform, held) == []  # type: ignore[arg-type]


def test_the_workflow_controller_s_metrics_port_is_allowed_through_its_sidecar() -> None:
    """istio-system's global-deny-all refuses what no ALLOW policy names; the scrape's allowance names the
    controller's metrics port only, the deny-all stays."""
    rendered = kube_objects(capture_of(STACK))
    assert any(o["kind"] == "AuthorizationPolicy" and o["metadata"]["name"] == "global-deny-all" for o in rendered)
    allow = [o for o in rendered if o["kind"] == "AuthorizationPolicy" and o["metadata"]["name"] == SCRAPE_POLICY]
    assert len(allow) == 1 and allow[0]["metadata"]["namespace"] == pipelines.NAMESPACE
    assert allow[0]["spec"] == {"selector": {"matchLabels": {"app": "workflow-controller"}}, "action": "ALLOW",
                                "rules": [{"to": [{"operation": {"ports": ["9090"]}}]}]}
