"""`trainyard simulate STACK --trace FILE [--base GITREF] [--out DIR]`: a job trace through the declared queues."""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.commands.common import ROOT, STACK_HELP, Subparsers


def run(args: argparse.Namespace) -> int:
    from infra.simulate import run as simulation

    if args.generate:
        return simulation.generate(ROOT, args.stack, args.generate, args.hours, args.seed, Path(args.trace))
    return simulation.run(ROOT, args.stack, Path(args.trace), args.base, Path(args.out) if args.out else None,
                          args.only_if_changed)


def register(sub: Subparsers) -> None:
    simulate = sub.add_parser(
        "simulate", help="replay a job trace through the stack's Kueue queues: waits, preemptions, utilisation",
        description="Replay a job trace (CSV: submit,team,pool,gpus,pods,duration,priority; docs/simulate.md) "
                    "through the ClusterQueues, cohort and priorities the stack declares, with Kueue's admission "
                    "semantics, and report per team and pool the jobs admitted, waits (p50, p95, max), preemptions "
                    "suffered and caused, and per pool the GPU utilisation and idle GPU-hours. With --base, the "
                    "same trace through the base revision's stack too, and the difference per team.")
    simulate.add_argument("stack", help=STACK_HELP)
    simulate.add_argument("--trace", required=True, help="the trace CSV to replay (with --generate: to write)")
    simulate.add_argument("--base", metavar="GITREF", help="also simulate the stack file of this git revision")
    simulate.add_argument("--out", metavar="DIR", help="write DIR/report.md and DIR/report.json (default: print "
                                                       "the Markdown report)")
    simulate.add_argument("--only-if-changed", action="store_true",
                          help="with --base: simulate only if the queues differ from the base revision's")
    simulate.add_argument("--generate", nargs="+", metavar="TEAM=JOBS_PER_HOUR",
                          help="write a synthetic trace to --trace instead: Poisson arrivals per team at the rate "
                               "given (* for every team)")
    simulate.add_argument("--hours", type=float, default=24.0, help="with --generate: the trace's length (24)")
    simulate.add_argument("--seed", type=int, default=0, help="with --generate: the random seed (0)")
    simulate.set_defaults(func=run)
