"""GPU usage and cost per team: the recording rules and the idle alert, pool prices, and `trainyard report usage`
against a fake Prometheus HTTP API on 127.0.0.1 that holds known series (expected numbers worked out by hand)."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from infra.checks.observability import rule_findings
from infra.commands import main
from infra.live.usage import step_for
from infra.platform.usage_rules import ADMITTED, BUSY, IDLE, IDLE_POD, idle_alerts, usage_rules
from infra.spec import SpecError, load_file
from tests.conftest import platform_of, raw_platform, write_stack

START = 1_793_577_600  # 2026-11-02T00:00:00Z
FROM, TO = "2026-11-02", "2026-11-02T02:00Z"  # two hours
MINUTE, HOUR = 60, 3600
Value = Callable[[int], float | None]  # seconds since START -> the sample (None: no sample)


def _between(first: int, last: int, value: float) -> Value:
    """`value` from minute `first` (included) to minute `last` (excluded) of the period."""
    return lambda t: value if first * MINUTE <= t < last * MINUTE else None


# (series, labels, value over time). vision holds 8 H100 busy for 2h and 8 more idle in the second hour; nlp holds 4
# L40S for 2h, one of them busy for the first 30 minutes.
SERIES: list[tuple[str, dict[str, str], Value]] = [
    (ADMITTED, {"team": "vision", "cluster_queue": "vision", "pool": "h100"}, lambda t: 8 if t < HOUR else 16),
    (ADMITTED, {"team": "nlp", "cluster_queue": "nlp", "pool": "l40s"}, _between(0, 120, 4)),
    (BUSY, {"team": "vision", "cluster_queue": "vision", "pool": "h100"}, _between(0, 120, 8)),
    (BUSY, {"team": "nlp", "cluster_queue": "nlp", "pool": "l40s"}, _between(0, 30, 1)),
    (IDLE, {"team": "vision", "cluster_queue": "vision", "pool": "h100"}, lambda t: 0 if t < HOUR else 8),
    (IDLE, {"team": "nlp", "cluster_queue": "nlp", "pool": "l40s"}, lambda t: 3 if t < 30 * MINUTE else 4),
    (IDLE_POD, {"team": "vision", "exported_namespace": "vision", "exported_pod": "train-a-0"}, _between(60, 120, 8)),
    (IDLE_POD, {"team": "nlp", "exported_namespace": "nlp", "exported_pod": "notebook-0"}, _between(30, 120, 4)),
    (IDLE_POD, {"team": "nlp", "exported_namespace": "nlp", "exported_pod": "eval-1"}, _between(0, 30, 3)),
    # A sample at the period's end belongs to the next period: it must not count.
    (IDLE_POD, {"team": "speech", "exported_namespace": "speech", "exported_pod": "late-0"}, _between(120, 121, 50)),
]


class FakePrometheus(BaseHTTPRequestHandler):
    """/api/v1/query_range for a bare recorded series name: the points at start, start + step, ... <= end."""

    queries: ClassVar[list[dict[str, str]]] = []
    paths: ClassVar[list[str]] = []
    tokens: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        params = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        FakePrometheus.queries.append(params)
        start, end, step = int(params["start"]), int(params["end"]), int(params["step"].rstrip("s"))
        result: list[dict[str, object]] = []
        for name, labels, value in SERIES:
            if name != params["query"]:
                continue
            points = [[t, str(v)] for t in range(start, end + 1, step) if (v := value(t - START)) is not None]
            if points:
                metric: dict[str, str] = {"__name__": name, **labels}
                result.append({"metric": metric, "values": points})
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        # Direct, or through the API server's service proxy (…/services/<name>:http-web/proxy/api/v1/query_range).
        status = 200 if url.path.endswith("/api/v1/query_range") else 404
        FakePrometheus.paths.append(url.path)
        FakePrometheus.tokens.append(self.headers.get("Authorization", ""))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakePrometheus.queries, FakePrometheus.paths, FakePrometheus.tokens = [], [], []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _report(capsys: pytest.CaptureFixture[str], *extra: str, stack: str = "onprem-lab") -> tuple[int, str, str]:
    code = main(["report", "usage", stack, "--from", FROM, "--to", TO, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_report_adds_up_gpu_hours_cost_and_idle_share_per_team(prometheus: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, "--prometheus", prometheus)
    assert code == 0, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:4]}
    # vision: admitted 8 x 1h + 16 x 1h = 24, busy 8 x 2h = 16, idle 8 x 1h = 8 (33.3 %), cost 24 x 2.40 = 57.60.
    # nlp: admitted 4 x 2h = 8, busy 1 x 0.5h, idle 3 x 0.5h + 4 x 1.5h = 7.5 (93.75 %), cost 8 x 0.85 = 6.80.
    assert rows == {"nlp": ["8.00", "0.50", "7.50", "93.8%", "6.80"],
                    "vision": ["24.00", "16.00", "8.00", "33.3%", "57.60"]}
    workloads = out.split("workloads with the most idle GPU-hours:\n")[1].splitlines()
    assert workloads == ["  vision  vision/train-a-0  8.00", "  nlp  nlp/notebook-0  6.00", "  nlp  nlp/eval-1  1.50"]
    assert "sampled every 60s" in out and "h100: 2.4000 (declared (pools.h100.pricePerGpuHour))" in out
    # 120 one-minute points, the last one a minute before --to.
    assert {(q["start"], q["end"], q["step"]) for q in FakePrometheus.queries} == \
        {(str(START), str(START + 2 * HOUR - MINUTE), "60s")}


def test_the_csv_has_a_row_per_team_and_pool_and_per_team(prometheus: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, "--prometheus", prometheus, "--csv")
    assert code == 0
    assert out.splitlines() == [
        "team,pool,gpu_hours_admitted,gpu_hours_busy,gpu_hours_idle,idle_share,price_per_gpu_hour,cost,cost_caveats",
        "nlp,l40s,8.00,0.50,7.50,0.9375,0.8500,6.80,",
        "vision,h100,24.00,16.00,8.00,0.3333,2.4000,57.60,",
        "nlp,all,8.00,0.50,7.50,0.9375,,6.80,",
        "vision,all,24.00,16.00,8.00,0.3333,,57.60,",
    ]


def test_a_pool_without_a_price_is_reported_unpriced_not_free(prometheus: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    del raw["pools"]["l40s"]["pricePerGpuHour"]
    stack = str(write_stack(tmp_path, raw))
    code, out, _ = _report(capsys, "--prometheus", prometheus, stack=stack)
    assert code == 0, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:4]}
    assert rows == {"nlp": ["8.00", "0.50", "7.50", "93.8%", "unpriced"],  # 8 GPU-hours, no price: not 0.00
                    "vision": ["24.00", "16.00", "8.00", "33.3%", "57.60"]}
    assert "cost unpriced: no price for pool(s) l40s (below): their GPU-hours are not costed" in out
    assert "  l40s: none (no price: declare pools.l40s.pricePerGpuHour (its nodes name no machine with a list " \
           "price))" in out
    _, csv_out, _ = _report(capsys, "--prometheus", prometheus, "--csv", stack=stack)
    assert "nlp,l40s,8.00,0.50,7.50,0.9375,,,no price" in csv_out.splitlines()
    assert "nlp,all,8.00,0.50,7.50,0.9375,,,no price" in csv_out.splitlines()


def test_costs_from_unverified_list_prices_are_marked_estimates(prometheus: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, "--prometheus", prometheus, stack="aws-prod")
    assert code == 0, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:4]}
    # vision: 24 GPU-hours x 55.04 / 8 = 165.12; nlp: 8 x 10.49264 / 4 = 20.98528.
    assert rows["vision"][-1] == "165.12*" and rows["nlp"][-1] == "20.99*"
    assert "cost*: from a ceiling or an unverified list price (below): an estimate, not a bill" in out
    assert "  h100: 6.8800 UNVERIFIED (p5.48xlarge list price 55.04/h, AWS EC2 On-Demand pricing" in out
    assert "  spot: 0.6000 (declared (pools.spot.pricePerGpuHour))" in out
    _, csv_out, _ = _report(capsys, "--prometheus", prometheus, "--csv", stack="aws-prod")
    assert "vision,h100,24.00,16.00,8.00,0.3333,6.8800,165.12,unverified" in csv_out.splitlines()


def test_top_limits_the_workloads(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _report(capsys, "--prometheus", prometheus, "--top", "1")
    listed = out.split("workloads with the most idle GPU-hours:\n")[1].splitlines()
    assert listed == ["  vision  vision/train-a-0  8.00"]


def test_through_a_context_the_api_servers_service_proxy_is_asked(prometheus: str, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The kubernetes client against the fake, standing in for the API server that proxies to Prometheus."""
    from kubernetes import client, config

    def load(config_file: str, context: str | None) -> None:
        assert context == "lab-admin"
        configuration = client.Configuration(host=prometheus)
        configuration.api_key = {"BearerToken": "Bearer t0ken"}
        client.Configuration.set_default(configuration)

    monkeypatch.setattr(config, "load_kube_config", load)
    monkeypatch.setattr(client.Configuration, "_default", None)  # restored after the test
    code, out, _ = _report(capsys, "--context", "lab-admin", "--csv")
    assert code == 0 and "vision,all,24.00,16.00,8.00,0.3333,,57.60" in out
    assert set(FakePrometheus.paths) == {
        "/api/v1/namespaces/monitoring/services/kube-prometheus-stack-prometheus:http-web/proxy/api/v1/query_range"}
    assert set(FakePrometheus.tokens) == {"Bearer t0ken"}  # the kubeconfig's credentials go along


def test_a_missing_kubeconfig_context_is_a_finding(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    code, out, _ = _report(capsys, "--context", "nowhere")
    assert code == 1 and out.startswith("error: cannot read Prometheus: service monitoring/")


def test_an_unreachable_prometheus_is_a_finding_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, "--prometheus", "http://127.0.0.1:9")
    assert code == 1 and out.startswith("error: cannot read Prometheus: http://127.0.0.1:9")


@pytest.mark.parametrize(("args", "expected"), [
    (["--from", "2026-11-31", "--to", TO], "error: --from: '2026-11-31' is not a UTC date or time"),
    (["--from", "yesterday", "--to", TO], "error: --from: 'yesterday' is not a UTC date or time"),
    (["--from", FROM, "--to", "2026-11-02T02:00+01:00"], "error: --to: '2026-11-02T02:00+01:00' is not a UTC"),
    (["--from", FROM, "--to", FROM], f"error: --to: {FROM} is not after --from {FROM}"),
    (["--from", FROM, "--to", TO, "--top", "-1"], "error: --top: -1 is negative"),
])
def test_bad_periods_exit_2_in_one_line(args: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "usage", "onprem-lab", *args, "--prometheus", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1


def test_step_keeps_a_series_under_the_point_limit() -> None:
    assert step_for(0, 10_000 * MINUTE) == MINUTE  # 10,000 points: at the limit
    assert step_for(0, 10_000 * MINUTE + 1) == 2 * MINUTE  # one second more: coarser
    assert step_for(0, 31 * 24 * HOUR) == 5 * MINUTE  # a month: 8,928 points


# --- prices ------------------------------------------------------------------------------------------------------

def _prices(stack: str) -> dict[str, Decimal | None]:
    from infra.spec.usage import pool_prices

    platform = platform_of(stack)
    units = {f.pool: f.gpu.units_per_gpu for f in platform.flavors if f.gpu}
    return {pool: price.per_unit_hour for pool, price in pool_prices(platform.spec, units).items()}


def _price_list(stack: str) -> dict[str, Any]:
    from infra.spec.usage import pool_prices

    platform = platform_of(stack)
    units = {f.pool: f.gpu.units_per_gpu for f in platform.flavors if f.gpu}
    return pool_prices(platform.spec, units)


def test_cloud_pools_default_to_the_list_price_over_their_gpus() -> None:
    # p5.48xlarge 55.04/h over 8 GPUs; g6e.12xlarge 10.49264/h over 4; the spot pool declares its own.
    assert _prices("aws-prod") == {"h100": Decimal("6.8800"), "l40s": Decimal("2.6232"), "spot": Decimal("0.6000")}
    assert _prices("onprem-lab") == {"h100": Decimal("2.4000"), "l40s": Decimal("0.8500")}
    # ND96isr H100 v5 98.32/h over 8; NC24ads A100 v4 3.673/h over 1 GPU of 7 MIG instances.
    assert _prices("azure-prod") == {"h100": Decimal("12.2900"), "a100-mig": Decimal("0.5247")}
    prices = _price_list("aws-prod")
    assert prices["h100"].caveats == ("unverified",) and prices["spot"].caveats == ()


def test_gcp_reserved_and_spot_pools_take_the_list_price_as_a_ceiling() -> None:
    # a3-highgpu-8g 88.253/h over 8 GPUs (a reservation bills at the on-demand rate); g2-standard-48 3.999/h over 4
    # L4 each shared by 4 (Spot is at most the on-demand rate): 0.2499375 a share.
    assert _prices("gcp-prod") == {"h100": Decimal("11.0316"), "l4": Decimal("0.2499")}
    prices = _price_list("gcp-prod")
    assert prices["h100"].caveats == prices["l4"].caveats == ("ceiling", "unverified")
    assert "reserved: a reservation is billed at the on-demand rate" in prices["h100"].origin
    assert "reservations-overview" in prices["h100"].origin and "spot-vms/pricing" in prices["l4"].origin


def test_an_on_demand_gcp_pool_is_no_ceiling_and_a_verified_figure_no_estimate(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from infra.spec.clouds import CLOUDS
    from infra.spec.clouds.facts import ListPrice
    from infra.spec.usage import pool_prices

    raw = raw_platform("gcp-prod")
    raw["pools"]["l4"]["capacityType"] = "on-demand"
    platform = load_file(write_stack(tmp_path, raw))
    assert pool_prices(platform.spec, {})["l4"].caveats == ("unverified",)
    gke = CLOUDS["gke"]
    checked = ListPrice(Decimal("4"), "a page, 2026-12-01", verified=True)
    monkeypatch.setitem(CLOUDS, "gke", replace(gke, list_prices={**gke.list_prices, "g2-standard-48": checked}))
    price = pool_prices(platform.spec, {})["l4"]
    assert (price.per_unit_hour, price.caveats) == (Decimal("1.0000"), ())


def test_list_prices_are_positive_decimals_with_a_source() -> None:
    from infra.spec.clouds import CLOUDS

    dated = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")
    for kind, facts in CLOUDS.items():
        machines = {m.name: m for m in facts.machines}
        for name, price in facts.list_prices.items():
            assert isinstance(price.per_hour, Decimal) and price.per_hour > 0, (kind, name)
            assert machines[name].gpus > 0, f"{name}: only GPU machines are priced"
            assert "." in price.source and dated.search(price.source), f"{name}: a page address and a date"
            # Unchecked figures say so in the words the report repeats; none is passed off as checked.
            assert price.verified or "UNVERIFIED" in price.source, (kind, name)
    assert CLOUDS["gke"].list_prices and not any(p.verified for f in CLOUDS.values() for p in f.list_prices.values())


def test_a_spot_pool_without_a_declared_price_has_none() -> None:
    raw = raw_platform("aws-prod")
    del raw["pools"]["spot"]["pricePerGpuHour"]
    from infra.spec.input.load import validate

    platform = validate(raw, "aws-prod")
    from infra.spec.usage import pool_prices

    price = pool_prices(platform.spec, {})["spot"]
    assert price.per_unit_hour is None and "declare pools.spot.pricePerGpuHour" in price.origin
    # No AWS page read here says how Spot is billed against the list price: no ceiling either.
    assert "EKS spot capacity has no default" in price.origin


def test_a_time_sliced_pool_is_priced_per_share(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["l40s"]["sharing"] = {"timeSlicing": 4}
    platform = load_file(write_stack(tmp_path, raw))
    units = {f.pool: f.gpu.units_per_gpu for f in platform.flavors if f.gpu}
    from infra.spec.usage import pool_prices

    assert pool_prices(platform.spec, units)["l40s"].per_unit_hour == Decimal("0.2125")


@pytest.mark.parametrize(("pool", "value", "expected"), [
    ("h100", -1, "pools.h100.pricePerGpuHour"),
    ("h100", 10001, "pools.h100.pricePerGpuHour"),
    ("h100", "cheap", "pools.h100.pricePerGpuHour"),
    ("cpu", 1, "`pricePerGpuHour` need a `gpu` model"),
])
def test_bad_prices_are_refused(tmp_path: Path, pool: str, value: object, expected: str) -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"][pool]["pricePerGpuHour"] = value
    with pytest.raises(SpecError, match=expected.replace("`", ".")):
        load_file(write_stack(tmp_path, raw))


def test_prices_at_the_limits_pass(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    raw["pools"]["h100"]["pricePerGpuHour"] = 0
    raw["pools"]["l40s"]["pricePerGpuHour"] = 10000
    load_file(write_stack(tmp_path, raw))


# --- rules and the idle alert ----------------------------------------------------------------------------------------

def _usage(raw: dict[str, Any], tmp_path: Path) -> Any:
    return load_file(write_stack(tmp_path, raw)).observability.usage


@pytest.mark.parametrize(("field", "value"), [("busyThreshold", 0), ("busyThreshold", 101), ("busyThreshold", "10"),
                                              ("idleAlertAfter", "2d"), ("idleAlertAfter", "0h"),
                                              ("idleAlertAfter", "90")])
def test_bad_usage_settings_are_refused(tmp_path: Path, field: str, value: object) -> None:
    raw = raw_platform("onprem-lab")
    raw.setdefault("observability", {})["usage"] = {field: value}
    with pytest.raises(SpecError, match=f"observability.usage.{field}"):
        _usage(raw, tmp_path)


def test_usage_settings_at_the_limits_pass(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    for threshold in (1, 100):
        raw.setdefault("observability", {})["usage"] = {"busyThreshold": threshold, "idleAlertAfter": "1m"}
        assert _usage(raw, tmp_path).busy_threshold == threshold


def test_busy_and_idle_follow_the_declared_threshold_and_namespaces(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    raw.setdefault("observability", {})["usage"] = {"busyThreshold": 35, "idleAlertAfter": "90m"}
    platform = load_file(write_stack(tmp_path, raw))
    rules = usage_rules(platform)
    busy = {r["labels"]["team"]: r["expr"] for r in rules if r["record"] == BUSY}
    assert set(busy) == {"vision", "nlp", "speech"}
    assert 'exported_namespace=~"speech|speech-eval|speech-models|speech-accept"} >= 35' in busy["speech"]
    idle_pods = [r["expr"] for r in rules if r["record"] == IDLE_POD]
    assert all("< 35" in expr for expr in idle_pods) and len(idle_pods) == 3
    [alert] = idle_alerts(platform)
    assert alert["alert"] == "TeamGPUsIdle" and alert["for"] == "90m" and alert["expr"] == f"{IDLE} > 0"
    admitted = next(r["expr"] for r in rules if r["record"] == ADMITTED)
    assert 'cluster_queue=~"vision|nlp|speech"' in admitted and 'replica_role!="follower"' in admitted


def test_without_dcgm_only_admitted_gpus_are_recorded_and_nothing_alerts() -> None:
    platform = platform_of("gcp-prod")  # GKE's own GPU stack: no DCGM exporter of ours
    assert [r["record"] for r in usage_rules(platform)] == [ADMITTED]
    assert idle_alerts(platform) == []


def test_the_usage_rules_fail_the_catalog_check_where_dcgm_is_not_scraped() -> None:
    rules = usage_rules(platform_of("onprem-lab"))
    obj = {"kind": "PrometheusRule", "metadata": {"name": "x"}, "spec": {"groups": [{"name": "g", "rules": rules}]}}
    assert rule_findings([obj], platform_of("onprem-lab").observability) == []
    findings = rule_findings([obj], platform_of("gcp-prod").observability)
    assert findings and all("DCGM_FI_DEV_GPU_UTIL" in f.message for f in findings)


def test_a_gpu_pool_without_a_price_is_a_plan_warning() -> None:
    from infra.checks.context import Context
    from infra.checks.usage import check_pools_priced
    from tests.conftest import capture_of, run_raw

    for stack in ("aws-prod", "local"):  # every GPU pool priced (local's at 0)
        assert check_pools_priced(Context(platform_of(stack), capture_of(stack), None)) == []
    ceilings = check_pools_priced(Context(platform_of("gcp-prod"), capture_of("gcp-prod"), None))
    assert [(f.subject, f.severity) for f in ceilings] == [("pool h100", "warning"), ("pool l4", "warning")]
    assert all(f.message.startswith("priced at a ceiling, its machine's list price: ") for f in ceilings)
    raw = raw_platform("onprem-lab")
    del raw["pools"]["l40s"]["pricePerGpuHour"]
    from infra.spec.input.load import validate

    [finding] = check_pools_priced(Context(validate(raw, "onprem-lab"), run_raw("onprem-lab", raw), None))
    assert finding.severity == "warning" and finding.subject == "pool l40s"
    assert finding.message.startswith("no price: declare pools.l40s.pricePerGpuHour")


def test_the_usage_dashboard_shows_days_and_30_day_windows_per_team() -> None:
    from infra.platform.dashboards import usage_dashboard

    board = usage_dashboard(platform_of("onprem-lab"))
    panels = {panel["title"]: panel for panel in board["panels"]}
    daily = panels["GPU-hours idle per team and pool, per day"]
    assert daily["interval"] == "1d"
    assert daily["targets"][0]["expr"] == f'sum by (team, pool) (sum_over_time({IDLE}{{team=~"$team"}}[1d:5m])) / 12'
    assert panels["GPU-hours admitted per team and pool, per 30 days"]["interval"] == "30d"
    assert "Workloads with the most idle GPU-hours, per day" in panels
    without_dcgm = {panel["title"] for panel in usage_dashboard(platform_of("gcp-prod"))["panels"]}
    assert without_dcgm == {"GPU-hours admitted per team and pool, per day",
                            "GPU-hours admitted per team and pool, per 30 days"}
