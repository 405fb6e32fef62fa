"""Serving observed (issue 31 point 6): on a stack that declares `models` (onprem-lab with the section added), the
predictors are scraped where KServe serves their metrics, kube-state-metrics exports the InferenceServices' registry
labels and conditions, each team registry's production versions are probed; every serving alert fires on the series
that should fire it and stays silent otherwise (evaluated by tests/promql.py), has its runbook, and reads only series
the render scrapes. Nothing of it exists on a stack without `models`."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from infra.apiserver.schema import CrdIndex, check_custom
from infra.checks.observability import dashboard_findings, grafana_expr, metric_names, rule_findings
from infra.offline import engine
from infra.offline.plan import objects
from infra.platform.alerts import anchor
from infra.platform.models import observability as serving
from infra.platform.observability import chart_values
from infra.spec import Platform, validate
from infra.spec.metrics import MODELS_CATALOG, series_names
from tests.conftest import ROOT, kube_objects, raw_platform, run_raw
from tests.promql import Series, evaluate, series
from tests.test_observability import OPERATIONS, _chart, missing_keys, runbook_sections

STACK = "onprem-lab"
ALERTS = {"InferenceServiceNotReady", "InferenceServicePredictorRestarting", "InferenceServiceLatencyHigh",
          "ModelVersionMismatch", "ModelRegistryUnreachable"}


def _raw() -> dict[str, Any]:
    raw = raw_platform(STACK)
    raw["models"] = {"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}}
    raw["teams"]["vision"]["serving"] = {"pool": "cpu", "cpu": "4", "memory": "8Gi"}
    return raw


@functools.cache
def _platform() -> Platform:
    return validate(_raw(), STACK)


def _without_models() -> dict[str, Any]:
    """The stack without `models` (every repository stack declares them)."""
    raw = raw_platform(STACK)
    del raw["models"]
    for team in raw["teams"].values():
        team.pop("serving", None)
    return raw


@functools.cache
def _capture() -> engine.Capture:
    return run_raw(STACK, _raw())


def _ours() -> list[dict[str, Any]]:
    return [obj for record, obj in objects(_capture()) if not record.chart]


def _rules() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for obj in kube_objects(_capture(), "PrometheusRule", own=True)
            for group in obj["spec"]["groups"] if group["name"] == "trainyard-serving" for rule in group["rules"]}


def _named(kind: str, name: str) -> list[dict[str, Any]]:
    return [o for o in kube_objects(_capture(), kind) if o["metadata"]["name"] == name]


# --- what is scraped --------------------------------------------------------------------------------------------

def test_the_podmonitor_selects_kserves_predictor_pods_in_every_models_namespace_on_port_8080() -> None:
    monitor = _named("PodMonitor", "kserve-predictors")[0]["spec"]
    assert monitor["namespaceSelector"]["matchNames"] == ["vision-models", "nlp-models", "speech-models"]
    # The labels KServe puts on a predictor pod (KS:pkg/constants/constants.go), and the pod's own port.
    pod = {"component": "predictor", "serving.kserve.io/inferenceservice": "iris", "app": "isvc.iris-predictor"}
    assert monitor["selector"]["matchLabels"].items() <= pod.items()
    assert all(e["key"] in pod for e in monitor["selector"]["matchExpressions"])
    assert pod[monitor["jobLabel"]] == serving.PREDICTOR_JOB
    assert monitor["podMetricsEndpoints"] == [{"portNumber": 8080, "path": "/metrics", "interval": "30s"}]
    assert "serving.kserve.io/inferenceservice" in monitor["podTargetLabels"]


def test_each_team_registry_is_probed_for_its_production_versions() -> None:
    probes = {o["metadata"]["name"]: o["spec"] for o in kube_objects(_capture(), "Probe")}
    assert sorted(probes) == ["registry-nlp", "registry-speech", "registry-vision"]
    vision = probes["registry-vision"]
    target = vision["targets"]["staticConfig"]["static"][0]
    assert target.startswith("http://model-registry-service.vision-models.svc.cluster.local:8080/api/model_registry/"
                             "v1alpha3/model_versions?filterQuery=")
    assert unquote(target.split("filterQuery=")[1].split("&")[0]) == "stage='production'"
    assert vision["targets"]["staticConfig"]["labels"] == {"namespace": "vision-models"}
    assert vision["jobName"] == serving.REGISTRY_JOB and vision["module"] == serving.EXPORTER_MODULE
    config = yaml.safe_load(_named("ConfigMap", serving.EXPORTER)[0]["data"]["config.yml"])
    metric = config["modules"][serving.EXPORTER_MODULE]["metrics"][0]
    # The registry's ModelVersion fields (MR@v0.3.7 api/openapi/model-registry.yaml: id, name, registeredModelId).
    assert metric["labels"] == {"registered_model_id": "{.registeredModelId}", "model_version_id": "{.id}",
                                "model_version": "{.name}"}
    # json_exporter names an object metric <name>_<value name>: the series the mismatch rule reads.
    assert f"{metric['name']}_{next(iter(metric['values']))}" == "trainyard_registry_production_version_info"


def test_the_exporter_runs_pinned_restricted_and_reaches_only_the_registry_port() -> None:
    deployment = _named("Deployment", serving.EXPORTER)[0]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "quay.io/prometheuscommunity/json-exporter:v0.7.0"
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == \
        "RuntimeDefault"
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    policies = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]
                for o in kube_objects(_capture(), "NetworkPolicy")}
    registry = policies[("vision-models", serving.EXPORTER_POLICY)]
    assert registry["podSelector"]["matchLabels"] == {"component": "model-registry-server"}  # the vendored pod
    assert [p["port"] for p in registry["ingress"][0]["ports"]] == [8080]
    scrape = policies[("vision-models", serving.SCRAPE_POLICY)]
    assert scrape["podSelector"]["matchLabels"] == {"component": "predictor"}
    assert [p["port"] for p in scrape["ingress"][0]["ports"]] == [8080]


def test_monitors_pass_their_crds_and_the_schema_check_can_fail() -> None:
    index = CrdIndex(ROOT.parent / "shared" / "crds", _platform().spec.versions.crd_dirs(),
                     [o for _, o in objects(_capture()) if o.get("kind") == "CustomResourceDefinition"])
    for kind in ("PodMonitor", "Probe"):
        for obj in kube_objects(_capture(), kind, own=True):
            assert check_custom(obj, index) == [], obj["metadata"]["name"]
    probe = json.loads(json.dumps(_named("Probe", "registry-vision")[0]))
    probe["spec"]["targets"]["staticConfig"]["static"] = "one url"
    assert check_custom(probe, index)


def test_kube_state_metrics_exports_inference_services_only_with_models() -> None:
    values = chart_values(_platform())["kube-state-metrics"]
    assert missing_keys({"kube-state-metrics": values}, _chart("kube-prometheus-stack").merge_values({})) == []
    resource = values["customResourceState"]["config"]["spec"]["resources"][0]
    assert resource["groupVersionKind"] == {"group": "serving.kserve.io", "version": "v1beta1",
                                            "kind": "InferenceService"}
    info = resource["metrics"][0]["each"]["info"]["labelsFromPath"]
    assert info["model_version_id"] == ["metadata", "labels", "modelregistry.kubeflow.org/model-version-id"]
    assert values["rbac"]["extraRules"][0]["resources"] == ["inferenceservices"]
    assert "customResourceState" not in chart_values(validate(_without_models(), STACK))["kube-state-metrics"]


# --- the rules ----------------------------------------------------------------------------------------------------

def test_rules_read_only_series_the_render_scrapes_and_each_catalog_series_is_read() -> None:
    assert set(_rules()) == ALERTS
    assert rule_findings(_ours(), _platform().observability) == []
    unprobed = [o for o in _ours() if o["kind"] != "Probe"]
    messages = [f.message for f in rule_findings(unprobed, _platform().observability)]
    assert any("reads 'trainyard_registry_production_version_info', which no component" in m for m in messages)
    read = {name for rule in _rules().values() for name in metric_names(rule["expr"])}
    assert [m.name for m in MODELS_CATALOG if not set(series_names(m)) & read] == []


def _fires(name: str, data: list[Series]) -> list[dict[str, str]]:
    return [labels for labels, _ in evaluate(_rules()[name]["expr"], data)]


def _condition(ready: float, namespace: str = "vision-models") -> Series:
    labels = {"namespace": namespace, "inferenceservice": "iris", "type": "Ready",
              "customresource_kind": "InferenceService"}
    return series("kube_inferenceservice_status_condition", labels, [ready])


def test_not_ready_fires_for_a_models_namespace_only() -> None:
    assert _fires("InferenceServiceNotReady", [_condition(0)]) == [{"namespace": "vision-models",
                                                                     "inferenceservice": "iris"}]
    assert _fires("InferenceServiceNotReady", [_condition(1)]) == []
    assert _fires("InferenceServiceNotReady", [_condition(0, "vision")]) == []


def _restarts(counts: Sequence[float], container: str = "kserve-container", namespace: str = "vision-models",
              init: bool = False) -> Series:
    """kube-state-metrics' restart counter of one predictor pod's container, a sample a minute."""
    name = f"kube_pod_{'init_' if init else ''}container_status_restarts_total"
    return series(name, {"namespace": namespace, "pod": "iris-predictor-1", "uid": "u1", "container": container,
                         "job": "kube-state-metrics"}, counts)


def test_predictor_restarting_fires_on_a_restart_within_the_window_only() -> None:
    assert serving.RESTART_WINDOW == "15m"
    fired = {"namespace": "vision-models", "pod": "iris-predictor-1", "container": "kserve-container"}
    assert _fires("InferenceServicePredictorRestarting", [_restarts([2, 2, 3])]) == [fired]
    # The model download failing: the init container's own counter.
    assert _fires("InferenceServicePredictorRestarting", [_restarts([0, 1], "storage-initializer", init=True)]) == [
        {**fired, "container": "storage-initializer"}]
    # Steady counters (restarts long ago), a restart 16 minutes back (outside the window), other containers,
    # namespaces and an init container's name on the main counter stay silent.
    assert _fires("InferenceServicePredictorRestarting", [_restarts([3] * 15)]) == []
    assert _fires("InferenceServicePredictorRestarting", [_restarts([2] + [3] * 15)]) == []
    assert _fires("InferenceServicePredictorRestarting", [_restarts([2, 3], "istio-proxy")]) == []
    assert _fires("InferenceServicePredictorRestarting", [_restarts([2, 3], namespace="vision")]) == []
    assert _fires("InferenceServicePredictorRestarting", [_restarts([0, 1], "storage-initializer")]) == []


def _latency(p95_bucket: str) -> list[Series]:
    """Predictions per minute: 95 at or below the `p95_bucket` bound, 5 slower (buckets of prometheus_client)."""
    bounds = ["0.25", "0.5", "0.75", "1.0", "2.5", "+Inf"]
    cumulative = [0 if float(b) < float(p95_bucket) else 95 for b in bounds[:-1]] + [100]
    cumulative = [c if b != "2.5" else 100 for c, b in zip(cumulative, bounds, strict=True)]
    labels = {"job": "predictor", "namespace": "vision-models", "serving_kserve_io_inferenceservice": "iris",
              "model_name": "iris", "pod": "iris-predictor-1"}
    return [series("request_predict_seconds_bucket", {**labels, "le": b}, [0, c, 2 * c])
            for b, c in zip(bounds, cumulative, strict=True)]


def test_latency_fires_above_the_p95_threshold_and_not_at_it() -> None:
    assert serving.LATENCY_P95_SECONDS == 1.0
    # 95% within 1.0s: the p95 is the 1.0 bucket's bound exactly, which is not above the threshold.
    assert evaluate(_rules()["InferenceServiceLatencyHigh"]["expr"].rsplit(" > ", 1)[0], _latency("1.0"))[0][1] == 1.0
    assert _fires("InferenceServiceLatencyHigh", _latency("1.0")) == []
    assert _fires("InferenceServiceLatencyHigh", _latency("0.5")) == []
    # 95% only within 2.5s: the p95 lies in (1.0, 2.5].
    assert _fires("InferenceServiceLatencyHigh", _latency("2.5")) == [
        {"namespace": "vision-models", "serving_kserve_io_inferenceservice": "iris"}]
    elsewhere = [Series({**s.labels, "namespace": "vision"}, s.samples) for s in _latency("2.5")]
    assert _fires("InferenceServiceLatencyHigh", elsewhere) == []


def _production(version: str, model: str = "7") -> Series:
    return series("trainyard_registry_production_version_info", {
        "namespace": "vision-models", "registered_model_id": model, "model_version_id": version,
        "model_version": f"v{version}", "job": serving.REGISTRY_JOB, "instance": "registry"}, [1])


def _serves(version: str, model: str = "7", name: str = "iris") -> Series:
    return series("kube_inferenceservice_info", {"namespace": "vision-models", "inferenceservice": name,
                                                 "registered_model_id": model, "model_version_id": version}, [1])


def test_version_mismatch_fires_when_production_is_not_what_serves() -> None:
    assert _fires("ModelVersionMismatch", [_production("9"), _serves("8")]) == [{
        "namespace": "vision-models", "registered_model_id": "7", "model_version_id": "9", "model_version": "v9"}]
    assert _fires("ModelVersionMismatch", [_production("9"), _serves("9")]) == []
    # A canary beside production: production still serves.
    assert _fires("ModelVersionMismatch", [_production("9"), _serves("9"), _serves("10", name="canary")]) == []
    # A model promoted but not served here, or served with no production version: nothing to compare.
    assert _fires("ModelVersionMismatch", [_production("9"), _serves("3", model="4")]) == []
    assert _fires("ModelVersionMismatch", [_serves("8")]) == []


def test_registry_unreachable_fires_on_a_failed_probe() -> None:
    def up(value: float, namespace: str = "vision-models") -> Series:
        return series("up", {"job": serving.REGISTRY_JOB, "namespace": namespace, "instance": "x"}, [value])

    assert _fires("ModelRegistryUnreachable", [up(0)]) == [{"job": serving.REGISTRY_JOB, "namespace": "vision-models",
                                                            "instance": "x", "__name__": "up"}]
    assert _fires("ModelRegistryUnreachable", [up(1)]) == []
    assert _fires("ModelRegistryUnreachable", [series("up", {"job": "other", "namespace": "vision-models"}, [0])]) \
        == []


def test_the_dashboard_reads_scraped_series_and_shows_latency_readiness_and_versions() -> None:
    assert dashboard_findings(_ours(), _platform().observability) == []
    name = "trainyard-dashboard-serving"
    board = json.loads(_named("ConfigMap", name)[0]["data"][f"{name}.json"])
    panels = {p["title"]: p for p in board["panels"]}
    assert [t["expr"].split("(")[0] for t in panels["Predict latency p50 and p95"]["targets"]] == [
        "histogram_quantile", "histogram_quantile"]
    read = {name for panel in board["panels"] for target in panel["targets"]
            for name in metric_names(grafana_expr(target["expr"]))}
    assert {"kube_inferenceservice_info", "trainyard_registry_production_version_info"} <= read
    unprobed = [o for o in _ours() if o["kind"] != "Probe"]
    assert dashboard_findings(unprobed, _platform().observability)  # the check can fail


def test_every_serving_alert_has_its_runbook_section_and_the_thresholds() -> None:
    sections = runbook_sections(OPERATIONS.read_text(encoding="utf-8"))
    assert {anchor(name) for name in ALERTS} - sections == set()
    rules = _rules()
    assert rules["InferenceServiceNotReady"]["labels"]["severity"] == "critical"
    assert rules["InferenceServiceNotReady"]["for"] == serving.NOT_READY
    assert rules["ModelVersionMismatch"]["for"] == serving.MISMATCH
    for rule in rules.values():
        assert rule["annotations"]["runbook_url"].endswith(f"#{rule['alert'].lower()}")


def test_nothing_of_it_on_a_stack_without_models() -> None:
    capture = run_raw(STACK, _without_models())
    assert not [o for o in kube_objects(capture, "PodMonitor") if o["metadata"]["name"] == "kserve-predictors"]
    assert kube_objects(capture, "Probe") == []
    assert not [o for o in kube_objects(capture, "PrometheusRule", own=True) for g in o["spec"]["groups"]
                if g["name"] == "trainyard-serving"]
    assert "trainyard-dashboard-serving" not in {o["metadata"]["name"] for o in kube_objects(capture, "ConfigMap")}


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_the_evaluator_itself_can_tell_fired_from_silent(value: float) -> None:
    """tests/promql.py against hand-computed answers: a comparison filters, `unless` removes matches."""
    data = [series("m", {"a": "1"}, [value]), series("n", {"a": "1"}, [1])]
    assert bool(evaluate("m == 0", data)) is (value == 0.0)
    assert evaluate("m unless on (a) n", data) == []
    assert evaluate("m and on (a) n", data) == [({"__name__": "m", "a": "1"}, value)]
