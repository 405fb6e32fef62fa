"""Observability: the stack's monitoring chart values against the pinned chart, our monitors against the Services
the pinned charts render, alert rules and dashboards proven offline (PromQL parser, metric catalog, CRD schema),
one runbook section per alert, routing from the stack file."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import helm_python
import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.checks.observability import dashboard_findings, metric_names, rule_findings, runbook_findings
from infra.platform.alerts import anchor
from infra.platform.observability import alertmanager_config, monitors
from infra.spec import SpecError
from infra.spec.metrics import CATALOG, DCGM, DCGM_ADDED, series_names
from tests.conftest import ROOT, STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack

CHARTS = ROOT.parent / "shared" / "charts"
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOKS = "https://git.example.com/platform/trainyard/blob/main/docs/operations.md"  # what the stacks declare


def _archive(name: str) -> Path:
    found = sorted(CHARTS.glob(f"{name}-*.tgz"))
    if not found:
        pytest.skip(f"no vendored {name} chart in {CHARTS}")
    return found[0]


@functools.cache
def _chart(name: str) -> helm_python.Chart:
    return helm_python.Chart.load(str(_archive(name)))


def _chart_inputs(stack: str, name: str) -> dict[str, Any]:
    record = next(r for r in capture_of(stack).resources if r.type == "kubernetes:helm.sh/v4:Chart" and r.name == name)
    return record.inputs


def _render(stack: str, name: str) -> tuple[dict[str, Any], ...]:
    """The chart as the plan rendered it (pinned archive, the stack's values and Kubernetes version)."""
    ref = f"kubernetes:helm.sh/v4:Chart::{name}"
    return next(rendered.objects for rendered in capture_of(stack).charts if rendered.source.ref == ref)


def _rules(stack: str) -> list[dict[str, Any]]:
    return [rule for obj in kube_objects(capture_of(stack), "PrometheusRule", own=True)
            for group in obj["spec"]["groups"] for rule in group["rules"]]


def _alerts(stack: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for rule in _rules(stack):
        if "alert" in rule:
            found.setdefault(rule["alert"], []).append(rule)
    return found


def missing_keys(values: Any, defaults: Any, path: str = "") -> list[str]:
    """Value paths the chart does not declare; below a map the chart leaves empty ({}), any key is the user's."""
    if not isinstance(values, dict) or not isinstance(defaults, dict) or defaults == {}:
        return []
    missing = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in defaults:
            missing.append(where)
        else:
            missing += missing_keys(value, defaults[key], where)
    return missing


# --- the catalog --------------------------------------------------------------------------------------------------

def test_catalog_names_are_unique_and_sourced_upstream() -> None:
    names = [m.name for m in CATALOG]
    assert len(names) == len(set(names))
    for metric in CATALOG:
        assert re.match(r"^[\w.-]+/[\w.-]+(@[\w.-]+)?:\S+$", metric.source), metric.name
        assert metric.version


def test_dcgm_exporter_gets_our_metrics_list_with_ecc_nvlink_and_throttle_counters() -> None:
    capture = capture_of("onprem-lab")
    configmap = next(o for o in kube_objects(capture, "ConfigMap") if o["metadata"]["name"] == "trainyard-dcgm-metrics")
    assert configmap["metadata"]["namespace"] == "gpu-operator"
    fields = [line.split(",")[0] for line in configmap["data"]["dcgm-metrics.csv"].splitlines()
              if line and not line.startswith("#")]
    assert set(DCGM_ADDED) <= set(fields)
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_UTIL"} <= set(fields)
    dcgm = _chart_inputs("onprem-lab", "gpu-operator")["values"]["dcgmExporter"]
    assert dcgm["config"] == {"name": "trainyard-dcgm-metrics"} and dcgm["serviceMonitor"] == {"enabled": False}
    # values.yaml only shows `config` in a comment: the templates are where the chart reads it.
    templates = {t["name"]: t["data"] for t in _chart("gpu-operator").templates}
    assert ".Values.dcgmExporter.config.name" in str(templates["templates/clusterpolicy.yaml"])
    assert not missing_keys({"dcgmExporter": {"serviceMonitor": {"enabled": False}}},
                            _chart("gpu-operator").merge_values({}))


# --- the monitoring chart -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["local", "aws-prod"])
def test_every_value_we_pass_exists_in_the_pinned_chart(stack: str) -> None:
    inputs = _chart_inputs(stack, "kube-prometheus-stack")
    assert inputs["version"] == "88.5.3"
    assert missing_keys(inputs["values"], _chart("kube-prometheus-stack").merge_values({})) == []


def test_the_key_check_catches_a_misspelt_value() -> None:
    defaults = _chart("kube-prometheus-stack").merge_values({})
    assert missing_keys({"prometheus": {"prometheusSpec": {"retension": "1d"}}}, defaults) == [
        "prometheus.prometheusSpec.retension"]
    assert missing_keys({"prometheus": {"prometheusSpec": {"storageSpec": {"volumeClaimTemplate": {}}}}},
                        defaults) == []


def test_the_chart_renders_without_hooks_and_selects_every_monitor() -> None:
    objects = _render("onprem-lab", "kube-prometheus-stack")
    hooks = [o["metadata"]["name"] for o in objects if "helm.sh/hook" in (o["metadata"].get("annotations") or {})]
    assert hooks == []
    kinds = {o["kind"] for o in objects}
    assert "ValidatingWebhookConfiguration" not in kinds and "MutatingWebhookConfiguration" not in kinds
    prometheus = next(o for o in objects if o["kind"] == "Prometheus")["spec"]
    for kind in ("serviceMonitor", "podMonitor", "rule"):
        assert prometheus[f"{kind}Selector"] == {} and prometheus[f"{kind}NamespaceSelector"] == {}
    assert prometheus["retention"] == "15d" and prometheus["retentionSize"] == "85GB"
    claim = prometheus["storage"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "100Gi" and claim["storageClassName"] == "block"
    assert prometheus["externalLabels"] == {"cluster": "lab"}
    # Alertmanager reads our Secret: the chart renders none of its own.
    assert not [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].startswith("alertmanager-")]
    node_exporter = next(o for o in objects if o["kind"] == "DaemonSet")
    assert node_exporter["metadata"]["namespace"] == "monitoring-node"
    assert all(o["metadata"].get("namespace", "monitoring") == "monitoring" for o in objects
               if o["kind"] in ("Deployment", "StatefulSet"))
    sidecar = _chart("kube-prometheus-stack").merge_values({})["grafana"]["sidecar"]["dashboards"]
    boards = [o for o in kube_objects(capture_of("onprem-lab"), "ConfigMap") if o["metadata"]["name"].startswith(
        "trainyard-dashboard-")]
    assert len(boards) == 6  # GPUs, queues, platform, GPU usage per team, Pipelines, Serving (every stack runs them)
    assert all(o["metadata"]["labels"][sidecar["label"]] == sidecar["labelValue"] for o in boards)


def test_namespaces_pod_security_monitoring_baseline_node_exporter_privileged() -> None:
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"]
                  for o in kube_objects(capture_of("local"), "Namespace")}
    assert namespaces["monitoring"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespaces["monitoring-node"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_managed_control_planes_do_not_scrape_what_they_hide() -> None:
    aws = _chart_inputs("aws-prod", "kube-prometheus-stack")["values"]
    lab = _chart_inputs("onprem-lab", "kube-prometheus-stack")["values"]
    assert aws["kubeEtcd"] == {"enabled": False} and aws["defaultRules"]["rules"]["etcd"] is False
    assert "kubeEtcd" not in lab and "etcd" not in lab["defaultRules"]["rules"]


@pytest.mark.parametrize("chart", ["kueue", "jobset", "kubeflow-trainer", "velero"])
def test_our_servicemonitors_select_the_services_the_charts_render(chart: str) -> None:
    rendered = _render("onprem-lab", chart)
    by_job = {m.job: m for m in monitors(platform_of("onprem-lab"))}
    services = [o for o in rendered if o["kind"] == "Service" and o["metadata"]["name"] in by_job]
    assert len(services) == 1, [o["metadata"]["name"] for o in rendered if o["kind"] == "Service"]
    service = services[0]
    monitor = by_job[service["metadata"]["name"]]
    assert monitor.namespace == service["metadata"]["namespace"]
    assert monitor.selector.items() <= service["metadata"]["labels"].items()
    assert monitor.endpoint["port"] in {p.get("name") for p in service["spec"]["ports"]}
    others = [o for o in rendered if o["kind"] == "Service" and o is not service]
    assert not [o for o in others if monitor.selector.items() <= o["metadata"].get("labels", {}).items()]


def test_dcgm_is_scraped_only_where_the_gpu_operator_runs() -> None:
    assert "nvidia-dcgm-exporter" in {m.job for m in monitors(platform_of("onprem-lab"))}
    for stack in ("local", "gcp-prod"):  # simulated GPUs; GKE's own GPU stack
        assert "nvidia-dcgm-exporter" not in {m.job for m in monitors(platform_of(stack))}
        assert not [name for rule in _rules(stack) for name in metric_names(rule["expr"]) if name.startswith("DCGM")]


# --- rules and dashboards proven offline --------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_rules_and_dashboards_parse_and_read_only_catalog_metrics(stack: str) -> None:
    objects = kube_objects(capture_of(stack), own=True)  # the charts' own are parse-checked in the plan
    facts = platform_of(stack).observability
    assert rule_findings(objects, facts) == []
    assert dashboard_findings(objects, facts) == []


def test_the_rule_check_refuses_bad_expressions_unknown_metrics_and_missing_annotations() -> None:
    facts = platform_of("local").observability  # no DCGM exporter on a laptop
    rule = {"alert": "X", "labels": {"severity": "critical"},
            "annotations": {"summary": "s", "description": "d", "runbook_url": "u"}}
    bad = [{**rule, "expr": "rate(kueue_admitted_workloads_total)"},  # a vector where a range is needed
           {**rule, "expr": "kueue_workload_evictions_total > 0"},  # not a Kueue metric
           {**rule, "expr": "DCGM_FI_DEV_XID_ERRORS > 0"},  # real, but not exported on this stack
           {"alert": "Y", "expr": "up == 0", "labels": {}, "annotations": {"summary": "s"}}]

    def rules_object(rules: list[dict[str, Any]]) -> dict[str, Any]:
        group = {"name": "g", "rules": rules}
        return {"kind": "PrometheusRule", "metadata": {"name": "t"}, "spec": {"groups": [group]}}

    objects = [rules_object(bad)]
    messages = [f.message for f in rule_findings(objects, facts)]
    assert len(messages) == 6
    assert messages[0].startswith("X: does not parse: expected type matrix")
    assert "reads 'kueue_workload_evictions_total'" in messages[1]
    assert "reads 'DCGM_FI_DEV_XID_ERRORS'" in messages[2]
    assert messages[3:] == ["Y: labels.severity must be one of critical, warning, info",
                            "Y: annotations.description is missing", "Y: annotations.runbook_url is missing"]
    assert rule_findings(objects[:0], facts) == []
    good = [{**rule, "expr": "sum by (le) (rate(kueue_admission_wait_time_seconds_bucket[5m])) > 0"}]
    assert rule_findings([rules_object(good)], facts) == []


def test_the_dashboard_check_refuses_invalid_json_and_unknown_metrics() -> None:
    facts = platform_of("onprem-lab").observability
    panel = {"title": "p", "targets": [{"expr": "rate(not_a_metric[$__rate_interval])"}]}
    objects = [{"kind": "ConfigMap", "metadata": {"name": "d", "labels": {"grafana_dashboard": "1"}},
                "data": {"a.json": json.dumps({"panels": [panel]}), "b.json": "{"}}]
    messages = [f.message for f in dashboard_findings(objects, facts)]
    assert messages[0] == ("a.json: panel 'p': reads 'not_a_metric', which no component of this stack exports "
                           "(not in the metric catalog for it)")
    assert messages[1].startswith("b.json: not JSON")


@pytest.mark.parametrize("stack", ["onprem-lab", "local"])
def test_rules_validate_against_the_prometheusrule_crd(stack: str) -> None:
    index = CrdIndex(ROOT.parent / "shared" / "crds", platform_of(stack).spec.versions.crd_dirs())
    for kind in ("PrometheusRule", "ServiceMonitor"):
        objects = kube_objects(capture_of(stack), kind)
        assert objects
        for obj in objects:
            assert check_custom(obj, index) == [], obj["metadata"]["name"]
    rule = kube_objects(capture_of(stack), "PrometheusRule")[0]
    broken = json.loads(json.dumps(rule))
    broken["spec"]["groups"][0]["rules"][0]["for"] = "ten minutes"
    broken["spec"]["groups"][0]["rules"][0]["severity"] = "critical"
    problems = check_custom(broken, index)
    assert any("for" in p and "does not match" in p for p in problems)
    assert any("severity: not in the CRD schema" in p for p in problems)


# --- what the alerts say -------------------------------------------------------------------------------------------

def test_the_required_alerts_ship_with_severity_summary_description_and_absolute_runbook() -> None:
    alerts = _alerts("onprem-lab")
    required = {"GPUXidCritical", "GPUAllocatableBelowPool", "GPUNodeNotReady", "DCGMExporterDown",
                "KueuePendingTooLong", "KueueClusterQueueInactive", "KueueAdmissionWaitHigh",
                "TrainingControllerUnavailable", "AdmissionWebhookCallsFailing", "VeleroBackupFailed",
                "VeleroNoRecentBackup", "RestoreDrillFailed", "PVCNearlyFull"}
    assert required <= set(alerts)
    for name, rules in alerts.items():
        for rule in rules:
            assert rule["labels"]["severity"] in ("critical", "warning", "info")
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            assert rule["annotations"]["runbook_url"] == f"{RUNBOOKS}#{name.lower()}"


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_without_an_absolute_runbook_base_is_refused_naming_the_field(stack: str, tmp_path: Path) -> None:
    from infra.spec import load_file

    assert runbook_findings(platform_of(stack)) == []
    raw = raw_platform(stack)
    del raw["observability"]["alerting"]["runbookBase"]
    found = runbook_findings(load_file(write_stack(tmp_path, raw, stack)))
    assert [(f.subject, f.severity) for f in found] == [("observability.alerting.runbookBase", "error")]
    assert "'docs/operations.md#...', which no Alertmanager receiver can open" in found[0].message


def test_a_relative_runbook_base_is_bad_input(tmp_path: Path) -> None:
    from infra.spec import load_file

    raw = raw_platform("local")
    raw["observability"]["alerting"]["runbookBase"] = "docs/operations.md"
    with pytest.raises(SpecError, match=r"observability\.alerting\.runbookBase"):
        load_file(write_stack(tmp_path, raw))


def runbook_sections(markdown: str) -> set[str]:
    """GitHub anchors of the `### Heading` sections (a heading that is one word keeps its letters)."""
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^### (.+)$", markdown, re.MULTILINE)}


def test_every_alert_of_every_stack_has_its_runbook_section() -> None:
    sections = runbook_sections(OPERATIONS.read_text(encoding="utf-8"))
    names = {name for stack in STACKS for name in _alerts(stack)}
    assert {name for name in names if anchor(name) not in sections} == set()
    assert anchor("NoSuchAlert") not in sections  # the check can fail


def test_kueue_rules_drop_follower_replicas() -> None:
    for name, rules in _alerts("onprem-lab").items():
        if any(n.startswith("kueue_") for r in rules for n in metric_names(r["expr"])):
            assert all('replica_role!="follower"' in r["expr"] for r in rules), name


def test_pool_alerts_use_the_declared_gpu_counts() -> None:
    raw = raw_platform("onprem-lab")["pools"]
    declared = {name: pool["perNode"] * len(pool["nodes"]) for name, pool in raw.items() if "gpu" in pool}
    rules = {r["labels"]["pool"]: r for r in _alerts("onprem-lab")["GPUAllocatableBelowPool"]}
    assert set(rules) == set(declared) == {"h100", "l40s"}
    for pool, count in declared.items():
        assert rules[pool]["expr"].endswith(f") < {count}")
        assert f'label_trainyard_io_pool="{pool}"' in rules[pool]["expr"]
    # aws-prod's spot pool scales to zero: it promises nothing, so it gets no rule.
    assert "spot" not in {r["labels"]["pool"] for r in _alerts("aws-prod")["GPUAllocatableBelowPool"]}


def test_backup_windows_follow_the_tiers() -> None:
    rules = _alerts("onprem-lab")["VeleroNoRecentBackup"]
    stale = {r["labels"]["tier"]: r["expr"] for r in rules if not r["expr"].startswith("absent(")}
    never = {r["labels"]["tier"]: r["for"] for r in rules if r["expr"].startswith("absent(")}
    # hourly: 1h + 1h grace; daily: 24h + 6h; weekly: 168h + 42h.
    assert {tier: expr.rsplit("> ", 1)[1] for tier, expr in stale.items()} == {
        "hourly": "2 * 3600", "daily": "30 * 3600", "weekly": "210 * 3600"}
    assert never == {"hourly": "2h", "daily": "30h", "weekly": "210h"}


# --- routing and the stack file -------------------------------------------------------------------------------------

def test_alerts_route_to_the_webhook_by_severity_else_to_null() -> None:
    platform = platform_of("onprem-lab")
    routed = alertmanager_config(platform, "https://hooks.example.com/T0/abc")
    assert [r["name"] for r in routed["receivers"]] == ["null", "webhook"]
    assert routed["receivers"][1]["webhook_configs"][0]["url"] == "https://hooks.example.com/T0/abc"
    assert routed["route"]["routes"][-1] == {"receiver": "webhook", "matchers": ['severity =~ "critical|warning"']}
    unrouted = alertmanager_config(platform, None)
    assert [r["name"] for r in unrouted["receivers"]] == ["null"]
    assert all(r["receiver"] == "null" for r in unrouted["route"]["routes"])


def test_the_stack_file_sets_retention_storage_and_paged_severities() -> None:
    raw = raw_platform("onprem-lab")
    raw["observability"] = {"retention": "30d", "storage": "500Gi", "storageClass": "fast",
                            "alerting": {"severities": ["critical"]}}
    values = _values(run_raw("onprem-lab", raw))
    spec = values["prometheus"]["prometheusSpec"]
    assert spec["retention"] == "30d" and spec["retentionSize"] == "425GB"
    assert spec["storageSpec"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "fast"
    local = _values(capture_of("local"))["prometheus"]["prometheusSpec"]
    assert local["retention"] == "2d" and "storageSpec" not in local  # a laptop keeps two days in memory


def _values(capture: Any) -> dict[str, Any]:
    record = next(r for r in capture.resources if r.name == "kube-prometheus-stack")
    values: dict[str, Any] = record.inputs["values"]
    return values


def test_observability_off_installs_nothing() -> None:
    raw = raw_platform("local")
    raw["observability"] = {"enabled": False}
    capture = run_raw("local", raw)
    assert not [r for r in capture.resources if r.type == "trainyard:platform:Observability"]


@pytest.mark.parametrize(("field", "value", "path"), [
    ("retention", "15 days", "observability.retention"),
    ("storage", "lots", "observability.storage"),
    ("alerting", {"severities": ["critical", "critical"]}, "observability.alerting.severities"),
    ("alerting", {"severities": ["page"]}, "observability.alerting.severities"),
])
def test_bad_observability_input_names_the_field(tmp_path: Path, field: str, value: Any, path: str) -> None:
    from infra.spec import load_file

    raw = raw_platform("local")
    raw["observability"] = {field: value}
    with pytest.raises(SpecError) as error:
        load_file(write_stack(tmp_path, raw))
    assert path in str(error.value)


def test_dcgm_metrics_in_the_catalog_are_exported_only_by_dcgm() -> None:
    dcgm = {m.name for m in CATALOG if m.component == DCGM}
    assert {m.name for m in CATALOG if m.name.startswith("DCGM_")} == dcgm


def test_with_the_secret_keys_set_alerts_are_routed_and_the_secrets_stay_masked() -> None:
    from infra.apiserver.schema import check_core
    from infra.checks.observability import routing_findings
    from infra.offline import engine
    from infra.spec.input.load import read_stack_config
    from tests.conftest import stack_file

    config = {**read_stack_config(stack_file("local")), "trainyard:alertWebhookUrl": {"secure": "v1:abc"},
              "trainyard:grafanaAdminPassword": {"secure": "v1:def"}}
    objects = kube_objects(engine.run("local", config))
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    alertmanager = secrets["alertmanager-kube-prometheus-stack-alertmanager"]
    assert alertmanager["metadata"]["annotations"]["trainyard.io/receivers"] == "null,webhook"
    assert alertmanager["stringData"] == {"alertmanager.yaml": "[secret]"}
    assert secrets["grafana-admin"]["stringData"] == {"admin-user": "admin", "admin-password": "[secret]"}
    assert all(check_core(s, "1.34") == [] for s in secrets.values())
    assert routing_findings(platform_of("local"), objects) == []
    unset = kube_objects(capture_of("local"))
    assert [f.subject for f in routing_findings(platform_of("local"), unset)] == [
        "Secret/alertmanager-kube-prometheus-stack-alertmanager", "Secret/grafana-admin"]


def test_every_catalog_entry_is_read_by_some_stack() -> None:
    from infra.checks.observability import grafana_expr

    read: set[str] = set()
    for stack in STACKS:
        objects = kube_objects(capture_of(stack), own=True)
        read |= {name for rule in _rules(stack) for name in metric_names(rule["expr"])}
        for board in (o for o in objects if "grafana_dashboard" in o["metadata"].get("labels", {})):
            for text in board["data"].values():
                read |= {name for panel in json.loads(text)["panels"] for target in panel["targets"]
                         for name in metric_names(grafana_expr(target["expr"]))}
    unread = [m.name for m in CATALOG if not set(series_names(m)) & read]
    assert unread == []
