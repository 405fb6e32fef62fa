"""`trainyard report usage`: GPU-hours admitted, busy and idle per team and pool over a period, their cost at each
pool's price, the idle share, and the workloads that left the most GPU-hours idle, from the recorded series of
infra/platform/usage_rules.py.

A recorded series holds GPU counts; the period [from, to) is read at a fixed step (one minute, or coarser so that a
series has at most 10,000 points, under Prometheus' 11,000-point limit) and each point counts for one step:
GPU-hours = sum of the points x step / 3600. Pods that held GPUs for less than a step can be missed."""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from infra.live.prometheus import Prometheus, Series
from infra.platform.usage_rules import ADMITTED, BUSY, IDLE, IDLE_POD
from infra.spec import Platform
from infra.spec.usage import Price, pool_prices

MIN_STEP = 60
MAX_POINTS = 10_000
HOUR = Decimal(3600)
CENT = Decimal("0.01")
KINDS = (("admitted", ADMITTED), ("busy", BUSY), ("idle", IDLE))


@dataclass
class Row:
    team: str
    pool: str
    hours: dict[str, Decimal] = field(default_factory=lambda: {kind: Decimal(0) for kind, _ in KINDS})
    cost: Decimal | None = Decimal(0)  # None: a pool of the row has no price
    caveats: frozenset[str] = frozenset()  # why its cost is an estimate (Price.caveats of its pools)

    @property
    def idle_share(self) -> Decimal | None:
        admitted = self.hours["admitted"]
        return self.hours["idle"] / admitted if admitted else None


@dataclass(frozen=True)
class Workload:
    team: str
    name: str  # namespace/pod
    idle_hours: Decimal


@dataclass(frozen=True)
class UsageReport:
    stack: str
    start: int
    end: int
    step: int
    rows: tuple[Row, ...]  # per team and pool
    teams: tuple[Row, ...]  # per team, over its pools (pool "all")
    workloads: tuple[Workload, ...]
    prices: dict[str, Price]
    dcgm: bool


def step_for(start: int, end: int) -> int:
    """A whole number of minutes, at least one, giving at most MAX_POINTS points."""
    return max(MIN_STEP, math.ceil((end - start) / MAX_POINTS / MIN_STEP) * MIN_STEP)


def _hours(series: Series, step: int) -> Decimal:
    return sum((Decimal(value) for _, value in series.get("values", [])), Decimal(0)) * step / HOUR


def _read(prometheus: Prometheus, query: str, start: int, end: int, step: int) -> list[Series]:
    # Points at start, start + step, ... up to the last one before `end`: each stands for the step after it.
    return prometheus.query_range(query, start, end - step, step)


def usage_report(platform: Platform, prometheus: Prometheus, start: int, end: int, top: int = 5) -> UsageReport:
    step = step_for(start, end)
    units = {flavor.pool: flavor.gpu.units_per_gpu for flavor in platform.flavors if flavor.gpu}
    prices = pool_prices(platform.spec, units)
    rows: dict[tuple[str, str], Row] = {}
    for kind, series_name in KINDS:
        for series in _read(prometheus, series_name, start, end, step):
            labels = series.get("metric", {})
            key = (labels.get("team", "?"), labels.get("pool", "?"))
            row = rows.setdefault(key, Row(*key))
            row.hours[kind] += _hours(series, step)
    teams: dict[str, Row] = {}
    for (team, pool), row in sorted(rows.items()):
        price = _price(prices, pool)
        row.cost = None if price.per_unit_hour is None else row.hours["admitted"] * price.per_unit_hour
        row.caveats = frozenset(price.caveats)
        total = teams.setdefault(team, Row(team, "all"))
        for kind in row.hours:
            total.hours[kind] += row.hours[kind]
        total.cost = None if total.cost is None or row.cost is None else total.cost + row.cost
        total.caveats |= row.caveats
    idle_by_pod: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for series in _read(prometheus, IDLE_POD, start, end, step):
        labels = series.get("metric", {})
        name = f"{labels.get('exported_namespace', '?')}/{labels.get('exported_pod', '?')}"
        idle_by_pod[(labels.get("team", "?"), name)] += _hours(series, step)
    worst = sorted(idle_by_pod.items(), key=lambda item: (-item[1], item[0]))[:top]
    return UsageReport(platform.stack, start, end, step, tuple(rows[k] for k in sorted(rows)),
                       tuple(teams[k] for k in sorted(teams)),
                       tuple(Workload(team, name, hours) for (team, name), hours in worst if hours > 0),
                       prices, platform.observability.dcgm)


def _price(prices: dict[str, Price], pool: str) -> Price:
    # A pool in the series but not among the stack's GPU pools (renamed, or another cluster's) has no price either.
    return prices.get(pool, Price(None, "no price: not a GPU pool of this stack's cluster"))


def _fmt(value: Decimal | None, places: Decimal = CENT) -> str:
    return "-" if value is None else str(value.quantize(places, ROUND_HALF_UP))


def _share(value: Decimal | None) -> str:
    return "-" if value is None else f"{(value * 100).quantize(Decimal('0.1'), ROUND_HALF_UP)}%"


def table(report: UsageReport, period: str) -> str:
    header = ("team", "GPU-h admitted", "GPU-h busy", "GPU-h idle", "idle share", "cost")
    lines = [(row.team, _fmt(row.hours["admitted"]), _fmt(row.hours["busy"]), _fmt(row.hours["idle"]),
              _share(row.idle_share), _cost(row)) for row in report.teams]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]
    out = [f"usage {report.stack} {period} (sampled every {report.step}s)"]
    out += ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths,
                                                                                                  strict=True)))
            for r in (header, *lines)]
    if not report.teams:
        out.append("no recorded GPU usage in this period")
    if not report.dcgm:
        out.append("busy and idle: not recorded on this stack (no DCGM exporter)")
    prices = {**{row.pool: _price(report.prices, row.pool) for row in report.rows}, **report.prices}
    unpriced = sorted(pool for pool, price in prices.items() if price.per_unit_hour is None)
    if unpriced:
        out.append(f"cost unpriced: no price for pool(s) {', '.join(unpriced)} (below): their GPU-hours are not costed")
    if any(row.caveats for row in report.teams):
        out.append("cost*: from a ceiling or an unverified list price (below): an estimate, not a bill")
    out.append("prices per GPU-hour:")
    out += [_price_line(pool, price) for pool, price in sorted(prices.items())]
    out.append("workloads with the most idle GPU-hours:")
    out += [f"  {w.team}  {w.name}  {_fmt(w.idle_hours)}" for w in report.workloads] or ["  none"]
    return "\n".join(out)


def _price_line(pool: str, price: Price) -> str:
    value = "none" if price.per_unit_hour is None else _fmt(price.per_unit_hour, Decimal("0.0001"))
    return f"  {pool}: {value}{''.join(' ' + caveat.upper() for caveat in price.caveats)} ({price.origin})"


def _cost(row: Row) -> str:
    return "unpriced" if row.cost is None else _fmt(row.cost) + ("*" if row.caveats else "")


def _caveats(row: Row) -> str:
    return ";".join(sorted(row.caveats) + (["no price"] if row.cost is None else []))


def to_csv(report: UsageReport) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["team", "pool", "gpu_hours_admitted", "gpu_hours_busy", "gpu_hours_idle", "idle_share",
                     "price_per_gpu_hour", "cost", "cost_caveats"])
    for row in (*report.rows, *report.teams):
        price = report.prices.get(row.pool, Price(None, "")).per_unit_hour
        share = row.idle_share
        writer.writerow([row.team, row.pool, _fmt(row.hours["admitted"]), _fmt(row.hours["busy"]),
                         _fmt(row.hours["idle"]), "" if share is None else _fmt(share, Decimal("0.0001")),
                         "" if price is None else str(price), "" if row.cost is None else _fmt(row.cost),
                         _caveats(row)])
    return buffer.getvalue()
