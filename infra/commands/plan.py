"""`trainyard plan [STACK]`: validate, run offline, run every check, print the summary."""

from __future__ import annotations

import argparse

from infra.checks.catalogue import run_checks
from infra.commands.common import CRDS_HELP, STACK_HELP, Subparsers, crds, exit_code, load, run_offline
from infra.review.summary import summary


def run(args: argparse.Namespace) -> int:
    path, platform = load(args.stack)
    crds_dir = crds(args)
    capture = run_offline(path, platform)
    findings = run_checks(platform, capture, crds_dir)
    print(summary(platform, capture, findings))
    if crds_dir is None:
        print("  (no CRD directory found: custom resources were not schema-checked; pass --crds DIR)")
    return exit_code(findings)


def register(sub: Subparsers) -> None:
    plan = sub.add_parser("plan", help="validate, run offline, check, and print a summary")
    plan.add_argument("stack", nargs="?", default="local", help=f"{STACK_HELP} (default: local)")
    plan.add_argument("--crds", help=CRDS_HELP)
    plan.set_defaults(func=run)
