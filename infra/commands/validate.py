"""`trainyard validate STACK [--crds DIR]`: every check, one finding a line, and a count."""

from __future__ import annotations

import argparse

from infra.checks.catalogue import run_checks
from infra.commands.common import CRDS_HELP, STACK_HELP, Subparsers, crds, exit_code, load, run_offline


def run(args: argparse.Namespace) -> int:
    path, platform = load(args.stack)
    crds_dir = crds(args)
    capture = run_offline(path, platform)
    findings = run_checks(platform, capture, crds_dir)
    checked = sum(1 for r in capture.resources if r.custom and r.type.startswith("kubernetes:"))
    for finding in findings:
        print(finding.line())
    errors = sum(1 for f in findings if f.severity == "error")
    print(f"validate {platform.stack}: {checked} objects and charts checked, {errors} error(s), "
          f"{len(findings) - errors} warning(s)" + ("" if crds_dir else " (custom resources not schema-checked)"))
    return exit_code(findings)


def register(sub: Subparsers) -> None:
    validate = sub.add_parser("validate", help="schema, policy, capacity and version checks")
    validate.add_argument("stack", help=STACK_HELP)
    validate.add_argument("--crds", help=CRDS_HELP)
    validate.set_defaults(func=run)
