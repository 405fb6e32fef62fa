"""Offline proof of the monitoring rules and dashboards: every alert and recording rule expression and every
dashboard query parses with a real PromQL parser (promql-parser, GreptimeDB's Rust parser: syntax, types and
function arity), reads only metrics of the catalog (infra/spec/metrics.py) whose exporter this stack runs, and every
alert carries a severity, a summary, a description and a runbook link (absolute: the stack's runbookBase). Also:
alerts that would reach nobody."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser

from infra.checks.context import Context
from infra.components import MONITORING
from infra.platform.kfp.observability import JOBS as PIPELINE_JOBS
from infra.platform.models.observability import PREDICTOR_JOB, REGISTRY_JOB
from infra.spec import Finding, Platform
from infra.spec.metrics import MODELS_CATALOG, PIPELINE_CATALOG, series_names
from infra.spec.observability import RELATIVE_RUNBOOK, ObservabilityFacts
from infra.vocabulary import RECEIVERS_ANNOTATION

ALERTMANAGER_SECRET, GRAFANA_SECRET = MONITORING.secrets

SEVERITIES = ("critical", "warning", "info")
# Grafana's variables are not PromQL: a range variable becomes a duration, any other variable a plain string.
_RANGE_VARIABLE = re.compile(r"\$__\w+")
_VARIABLE = re.compile(r"\$\{?\w+\}?")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads; ValueError when it does not parse."""
    names: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def grafana_expr(expr: str) -> str:
    return _VARIABLE.sub("x", _RANGE_VARIABLE.sub("5m", expr))


def query_problems(expr: str, known: set[str] | None) -> list[str]:
    """Parse problems, and (unless `known` is None) the metrics read that are not in `known`."""
    try:
        names = metric_names(expr)
    except ValueError as error:
        return [f"does not parse: {error}"]
    if known is None:
        return []
    return [f"reads '{name}', which no component of this stack exports (not in the metric catalog for it)"
            for name in sorted(names - known)]


def _rules(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        if obj.get("kind") == "PrometheusRule":
            for group in obj.get("spec", {}).get("groups", []):
                for rule in group.get("rules", []):
                    yield f"PrometheusRule/{obj['metadata']['name']}", rule


def scraped_jobs(objects: list[dict[str, Any]]) -> set[str]:
    """The jobs the rendered monitors name through their jobLabel (the selected pods' or Services' label value)."""
    jobs = set()
    for obj in objects:
        spec = obj.get("spec", {}) if obj.get("kind") in ("PodMonitor", "ServiceMonitor", "Probe") else {}
        job = spec.get("jobName") or spec.get("selector", {}).get("matchLabels", {}).get(spec.get("jobLabel", ""))
        if job:
            jobs.add(job)
    return jobs


def _pipeline_series(objects: list[dict[str, Any]], facts: ObservabilityFacts) -> set[str]:
    """The pipeline layer's series: those of an exporter the stack runs anyway (kube-state-metrics), and those of
    Argo and the KFP API server only where a rendered monitor scrapes their job."""
    jobs = scraped_jobs(objects)
    return {name for metric in PIPELINE_CATALOG
            if metric.component in facts.components or PIPELINE_JOBS.get(metric.component) in jobs
            for name in series_names(metric)}


def _models_series(objects: list[dict[str, Any]]) -> set[str]:
    """Serving's series where the render scrapes both the predictors and the registries (the InferenceService series
    of kube-state-metrics come with the same switch)."""
    if not {PREDICTOR_JOB, REGISTRY_JOB} <= scraped_jobs(objects):
        return set()
    return {name for metric in MODELS_CATALOG for name in series_names(metric)}


def _known(objects: list[dict[str, Any]], facts: ObservabilityFacts | None) -> set[str] | None:
    """The catalog's metrics and the recorded ones; None (any name) for a chart's own rules and dashboards,
    which read what the chart itself deploys and are tested upstream: for them only the parse is checked."""
    if facts is None:
        return None
    return (set(facts.catalog()) | _pipeline_series(objects, facts) | _models_series(objects)
            | {rule["record"] for _, rule in _rules(objects) if "record" in rule})


def rule_findings(objects: list[dict[str, Any]], facts: ObservabilityFacts | None) -> list[Finding]:
    known = _known(objects, facts)
    findings = []
    for subject, rule in _rules(objects):
        name = rule.get("alert") or rule.get("record")
        problems = [f"{name}: {p}" for p in query_problems(str(rule.get("expr", "")), known)]
        if "alert" in rule and facts is not None:
            if rule.get("labels", {}).get("severity") not in SEVERITIES:
                problems.append(f"{name}: labels.severity must be one of {', '.join(SEVERITIES)}")
            for key in ("summary", "description", "runbook_url"):
                if not rule.get("annotations", {}).get(key):
                    problems.append(f"{name}: annotations.{key} is missing")
        findings += [Finding("observability", subject, problem) for problem in problems]
    return findings


def dashboard_findings(objects: list[dict[str, Any]], facts: ObservabilityFacts | None) -> list[Finding]:
    known = _known(objects, facts)
    findings = []
    for obj in objects:
        if obj.get("kind") != "ConfigMap" or "grafana_dashboard" not in obj["metadata"].get("labels", {}):
            continue
        subject = f"ConfigMap/{obj['metadata']['name']}"
        for key, text in obj.get("data", {}).items():
            try:
                board = json.loads(text)
            except ValueError as error:
                findings.append(Finding("observability", subject, f"{key}: not JSON: {error}"))
                continue
            for panel in board.get("panels", []):
                for target in panel.get("targets", []):
                    findings += [Finding("observability", subject, f"{key}: panel '{panel.get('title')}': {p}")
                                 for p in query_problems(grafana_expr(target.get("expr", "")), known)]
    return findings


def routing_findings(platform: Platform, objects: list[dict[str, Any]]) -> list[Finding]:
    """Warnings for a stack whose alerts reach nobody, or whose Grafana waits for its admin Secret."""
    secrets = {obj["metadata"]["name"]: obj for obj in objects if obj.get("kind") == "Secret"}
    findings = []
    receivers = secrets.get(ALERTMANAGER_SECRET, {}).get("metadata", {}).get("annotations", {}).get(
        RECEIVERS_ANNOTATION, "")
    if ALERTMANAGER_SECRET in secrets and receivers.split(",") == ["null"]:
        findings.append(Finding("observability", f"Secret/{ALERTMANAGER_SECRET}", "alerts go to the `null` "
                                "receiver: set the webhook with `pulumi config set --secret trainyard:alertWebhookUrl "
                                "<url>`", "warning"))
    if platform.observability.grafana and GRAFANA_SECRET not in secrets:
        findings.append(Finding("observability", f"Secret/{GRAFANA_SECRET}", "Grafana does not start without its "
                                "admin Secret: `pulumi config set --secret trainyard:grafanaAdminPassword <password>`",
                                "warning"))
    return findings


def _ours(ctx: Context) -> list[dict[str, Any]]:
    return [obj for record, obj in ctx.records() if not record.chart]


def _charts(ctx: Context) -> list[dict[str, Any]]:
    return [obj for record, obj in ctx.records() if record.chart]


def check_alert_rules(ctx: Context) -> list[Finding]:
    return rule_findings(_ours(ctx), ctx.platform.observability)


def check_dashboards(ctx: Context) -> list[Finding]:
    return dashboard_findings(_ours(ctx), ctx.platform.observability)


def check_chart_alert_rules(ctx: Context) -> list[Finding]:
    return rule_findings(_charts(ctx), None)


def check_chart_dashboards(ctx: Context) -> list[Finding]:
    return dashboard_findings(_charts(ctx), None)


def runbook_findings(platform: Platform) -> list[Finding]:
    """A relative runbook link opens nowhere from a pager, a chat message or an e-mail."""
    if not platform.observability.enabled or platform.observability.alerting.runbook_base:
        return []
    return [Finding("observability", "observability.alerting.runbookBase", "alerts link their runbook as "
                    f"'{RELATIVE_RUNBOOK}#...', which no Alertmanager receiver can open: set runbookBase to the "
                    "URL of docs/operations.md in the repository's web view (https://...)")]


def check_runbook_base(ctx: Context) -> list[Finding]:
    return runbook_findings(ctx.platform)


def check_alert_routing(ctx: Context) -> list[Finding]:
    return routing_findings(ctx.platform, ctx.objects())
