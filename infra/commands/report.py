"""`trainyard report usage STACK --from --to [--context CTX | --prometheus URL] [--csv] [--top N]`: GPU-hours
admitted, busy and idle per team, their cost and idle share, and the workloads that idled most, read from the
stack's Prometheus."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime

from infra.commands.common import FINDINGS, STACK_HELP, Subparsers, load
from infra.spec import SpecError

# 2026-11-01, 2026-11-01T08:00, 2026-11-01T08:00:30Z (UTC; a trailing Z is allowed, other offsets are not)
MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?$")


def moment(option: str, value: str) -> int:
    """Unix seconds of a UTC date or date and time; a SpecError names the option otherwise."""
    if MOMENT.match(value):
        try:
            return int(datetime.fromisoformat(value.rstrip("Z")).replace(tzinfo=UTC).timestamp())
        except ValueError:
            pass
    raise SpecError(option, f"'{value}' is not a UTC date or time: give YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z]")


def run(args: argparse.Namespace) -> int:
    start, end = moment("--from", args.start), moment("--to", args.end)
    if end <= start:
        raise SpecError("--to", f"{args.end} is not after --from {args.start}: give a later --to")
    if args.top < 0:
        raise SpecError("--top", f"{args.top} is negative: give 0 or more workloads")
    _, platform = load(args.stack)
    if not platform.observability.enabled:
        raise SpecError("observability.enabled", "false: the stack runs no Prometheus to report from")
    from infra.live.prometheus import HttpPrometheus, PrometheusError, ProxiedPrometheus
    from infra.live.usage import table, to_csv, usage_report

    try:
        prometheus = HttpPrometheus(args.prometheus) if args.prometheus else ProxiedPrometheus(args.context)
        report = usage_report(platform, prometheus, start, end, args.top)
    except PrometheusError as error:
        print(f"error: cannot read Prometheus: {error}")
        return FINDINGS
    if args.csv:
        print(to_csv(report), end="")
    else:
        print(table(report, f"{args.start} .. {args.end}"))
    return 0


def register(sub: Subparsers) -> None:
    report = sub.add_parser("report", help="reports from the live platform: GPU usage and cost per team")
    kinds = report.add_subparsers(dest="report", required=True, metavar="REPORT")
    usage = kinds.add_parser(
        "usage", help="GPU-hours admitted, busy and idle per team, cost and idle share, worst workloads",
        description="Per team over [--from, --to): GPU-hours Kueue admitted, GPU-hours busy (DCGM utilisation at "
                    "or above observability.usage.busyThreshold) and idle, their cost at each pool's price per "
                    "GPU-hour (pools.<pool>.pricePerGpuHour, else the cloud's list price), the idle share, and "
                    "the workloads with the most idle GPU-hours; read from the stack's Prometheus "
                    "(docs/observability.md).")
    usage.add_argument("stack", help=STACK_HELP)
    usage.add_argument("--from", dest="start", required=True, help="start, UTC: YYYY-MM-DD[THH:MM[:SS][Z]]")
    usage.add_argument("--to", dest="end", required=True, help="end (excluded), UTC, same form")
    where = usage.add_mutually_exclusive_group()
    where.add_argument("--context", help="kubeconfig context: Prometheus through the API server's service proxy "
                                         "(default: the current context)")
    where.add_argument("--prometheus", metavar="URL", help="Prometheus' base URL, e.g. http://127.0.0.1:9090")
    usage.add_argument("--csv", action="store_true", help="CSV per team and pool (and per team, pool `all`)")
    usage.add_argument("--top", type=int, default=5, help="workloads with the most idle GPU-hours to list (5)")
    usage.set_defaults(func=run)
