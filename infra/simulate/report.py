"""The simulation's report: per team and per team and pool the jobs admitted, their waits (p50, p95, max; nearest
rank), preemptions suffered and caused and GPU-hours; per pool its utilisation and idle GPU-hours over the trace's
span; with a base, each team's difference. Rendered as JSON (sorted keys) and Markdown, byte for byte the same for
the same inputs."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from infra.simulate.engine import Outcome, Record
from infra.simulate.queues import Model

HOUR = 3600


def percentile(values: Sequence[int], share: float) -> int:
    """Nearest rank: the smallest value with at least `share` of the values at or below it."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


def _waits(records: Sequence[Record]) -> dict[str, int]:
    waits = [r.waited for r in records if r.flavor is not None]
    return {"p50": percentile(waits, 0.5), "p95": percentile(waits, 0.95), "max": max(waits, default=0)}


def _hours(unit_seconds: int) -> float:
    return round(unit_seconds / HOUR, 2)


def build(model: Model, outcome: Outcome) -> dict[str, Any]:
    by_team: dict[str, list[Record]] = {}
    for record in outcome.records:
        by_team.setdefault(record.job.team, []).append(record)
    teams: dict[str, Any] = {}
    for team in sorted(set(model.queues) | set(by_team)):
        records = by_team.get(team, [])
        admitted = [r for r in records if r.flavor is not None]
        pools: dict[str, Any] = {}
        for flavor in sorted({r.flavor for r in admitted if r.flavor is not None}):
            mine = [r for r in admitted if r.flavor == flavor]
            pools[flavor] = {"admitted": len(mine), "wait": _waits(mine),
                           "gpu_hours": _hours(sum(r.job.demand * r.job.duration for r in mine))}
        teams[team] = {
            "submitted": len(records), "admitted": len(admitted), "never_admitted": len(records) - len(admitted),
            "wait": _waits(admitted),
            "preemptions": {"suffered": outcome.preempted.get(team, 0), "caused": outcome.preempting.get(team, 0)},
            "gpu_hours": _hours(sum(r.job.demand * r.job.duration for r in admitted)),
            "pools": pools,
        }
    pools = {}
    for name, pool in model.pools.items():
        offered = pool.capacity * outcome.span
        busy = outcome.busy.get(name, 0)
        pools[name] = {"resource": pool.resource, "capacity": pool.capacity,
                       "admitted": sum(1 for r in outcome.records if r.flavor == name),
                       "gpu_hours_used": _hours(busy), "idle_gpu_hours": _hours(offered - busy),
                       "utilisation": round(busy / offered, 4) if offered else 0.0}
    return {"stack": model.stack, "jobs": len(outcome.records), "span_seconds": outcome.span, "teams": teams,
            "pools": pools}


def difference(base: Mapping[str, Any], head: Mapping[str, Any]) -> dict[str, Any]:
    """Per team: head minus base of admitted jobs, waits and preemptions suffered (a team missing on one side
    counts as nothing there)."""
    empty = {"admitted": 0, "never_admitted": 0, "wait": {"p50": 0, "p95": 0, "max": 0},
             "preemptions": {"suffered": 0, "caused": 0}}
    changes = {}
    for team in sorted(set(base["teams"]) | set(head["teams"])):
        before, after = base["teams"].get(team, empty), head["teams"].get(team, empty)
        changes[team] = {
            "admitted": after["admitted"] - before["admitted"],
            "never_admitted": after["never_admitted"] - before["never_admitted"],
            **{f"wait_{k}": after["wait"][k] - before["wait"][k] for k in ("p50", "p95", "max")},
            "preempted": after["preemptions"]["suffered"] - before["preemptions"]["suffered"],
        }
    return changes


def to_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def duration(seconds: int) -> str:
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    return f"{sign}{seconds // HOUR}h{seconds % HOUR // 60:02d}m{seconds % 60:02d}s"


def _signed(value: int, text: str) -> str:
    return f"+{text}" if value > 0 else text


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]]


def _team_rows(report: Mapping[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    for team, facts in report["teams"].items():
        wait, pre = facts["wait"], facts["preemptions"]
        rows.append([team, "all", facts["admitted"], facts["never_admitted"], duration(wait["p50"]),
                     duration(wait["p95"]), duration(wait["max"]), pre["suffered"], pre["caused"],
                     facts["gpu_hours"]])
        for pool, mine in facts["pools"].items():
            w = mine["wait"]
            rows.append([team, pool, mine["admitted"], "", duration(w["p50"]), duration(w["p95"]),
                         duration(w["max"]), "", "", mine["gpu_hours"]])
    return rows


def difference_markdown(changes: Mapping[str, Any], base_ref: str) -> list[str]:
    rows = [[team, _signed(c["admitted"], str(c["admitted"])), _signed(c["never_admitted"], str(c["never_admitted"])),
             *[_signed(c[k], duration(c[k])) for k in ("wait_p50", "wait_p95", "wait_max")],
             _signed(c["preempted"], str(c["preempted"]))] for team, c in changes.items()]
    return [f"Per team, this change against {base_ref} (work tree minus base):", "",
            *_table(["team", "admitted", "never admitted", "wait p50", "wait p95", "wait max", "preempted"], rows)]


def markdown(report: Mapping[str, Any], changes: Mapping[str, Any] | None = None, base_ref: str = "") -> str:
    lines = [f"# Simulation of stack {report['stack']}", "",
             f"{report['jobs']} jobs over {duration(report['span_seconds'])}.", ""]
    if changes is not None:
        lines += [*difference_markdown(changes, base_ref), ""]
    lines += ["## Teams", "", *_table(["team", "pool", "admitted", "never admitted", "wait p50", "wait p95",
                                       "wait max", "preempted", "preempting", "GPU-hours"], _team_rows(report)), ""]
    pool_rows = [[name, p["resource"], p["capacity"], p["admitted"], f"{p['utilisation'] * 100:.1f}%",
                  p["gpu_hours_used"], p["idle_gpu_hours"]] for name, p in report["pools"].items()]
    lines += ["## Pools", "", *_table(["pool", "resource", "capacity", "admitted", "utilisation", "GPU-hours used",
                                       "idle GPU-hours"], pool_rows)]
    return "\n".join(lines) + "\n"
