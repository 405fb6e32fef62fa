"""`trainyard accept STACK`: the acceptance suite on the stack's live cluster, with a report (docs/acceptance.md).

Exit 0 every check that ran passed, 1 a check failed, 2 the suite cannot run (and which prerequisite is missing).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from infra.accept.runner import WallClock
from infra.accept.suite import accept, checks, default_team, select
from infra.commands.common import ROOT, STACK_HELP, Subparsers
from infra.spec import load_file, stack_path


def run(args: argparse.Namespace) -> int:
    path = stack_path(args.stack, ROOT)
    platform = load_file(path)
    chosen = select(checks(platform), args.only, args.drain_node)
    existing = platform.spec.cluster.existing
    context = args.context or (existing.context if existing else None)

    def render() -> Any:
        from infra.offline import engine
        from infra.spec.input.load import read_stack_config

        return engine.run(platform.stack, read_stack_config(path))

    return accept(platform, context=context, team=default_team(platform, args.team), chosen=chosen,
                  drain_node=args.drain_node, report_dir=Path(args.report), root=ROOT, clock=WallClock(),
                  render=render)


def register(sub: Subparsers) -> None:
    parser = sub.add_parser("accept", help="after pulumi up: run the acceptance suite on the live cluster")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("--context", help="kubeconfig context (default: the stack's, else the current one)")
    parser.add_argument("--only", nargs="+", metavar="CHECK", help="run exactly these checks (preemption and "
                        "node-failure run only when named here or, for node-failure, with --drain-node)")
    parser.add_argument("--drain-node", metavar="NODE", help="the GPU node node-failure cordons and drains")
    parser.add_argument("--team", help="the team whose queue the run uses (default: the first with a GPU pool)")
    parser.add_argument("--report", default="acceptance", metavar="DIR", help="where the report goes")
    parser.set_defaults(func=run)
