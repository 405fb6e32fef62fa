"""The `trainyard` command: plan, render, validate, diff and document stacks offline (see docs/cli.md).

Exit codes: 0 clean, 1 findings, 2 bad input. Bad input prints one line, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from infra.offline import engine
from infra.offline.chartcache import ChartCacheError
from infra.offline.checks import run_checks
from infra.offline.plan import render_stack
from infra.offline.report import summary
from infra.offline.schema import default_crds_dir
from infra.spec import Finding, Platform, SpecError, load_file, stack_path
from infra.spec.load import read_stack_config

ROOT = Path(__file__).resolve().parents[1]
CLEAN, FINDINGS, BAD_INPUT, INTERNAL = 0, 1, 2, 3


def _load(stack: str) -> tuple[Path, Platform]:
    path = stack_path(stack, ROOT)
    return path, load_file(path)


def _run(path: Path, platform: Platform) -> engine.Capture:
    return engine.run(platform.stack, read_stack_config(path))


def _exit_code(findings: Sequence[Finding]) -> int:
    return FINDINGS if any(f.severity == "error" for f in findings) else CLEAN


def _crds(args: argparse.Namespace) -> Path | None:
    """--crds DIR, checked before anything runs; without it, ../shared/crds when present."""
    if not args.crds:
        return default_crds_dir(ROOT)
    crds = Path(args.crds)
    if not crds.is_dir():
        raise SpecError("--crds", f"{crds} is not a directory: give the directory of upstream CRDs "
                                  "(<component>/<minor>/*.yaml, as scripts/fetch-crds writes it)")
    return crds


def cmd_plan(args: argparse.Namespace) -> int:
    path, platform = _load(args.stack)
    crds = _crds(args)
    capture = _run(path, platform)
    findings = run_checks(platform, capture, crds)
    print(summary(platform, capture, findings))
    if crds is None:
        print("  (no CRD directory found: custom resources were not schema-checked; pass --crds DIR)")
    return _exit_code(findings)


def cmd_render(args: argparse.Namespace) -> int:
    path, platform = _load(args.stack)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SpecError("--out", f"{out} is a file: give a directory (created when missing) for plan.json and "
                                 "manifests/")
    capture, count = render_stack(path, platform, out)
    print(f"rendered {len(capture.resources)} resources ({count} Kubernetes objects) to {out}")
    return CLEAN


def cmd_validate(args: argparse.Namespace) -> int:
    path, platform = _load(args.stack)
    crds = _crds(args)
    capture = _run(path, platform)
    findings = run_checks(platform, capture, crds)
    checked = sum(1 for r in capture.resources if r.custom and r.type.startswith("kubernetes:"))
    for finding in findings:
        print(finding.line())
    errors = sum(1 for f in findings if f.severity == "error")
    print(f"validate {platform.stack}: {checked} objects and charts checked, {errors} error(s), "
          f"{len(findings) - errors} warning(s)" + ("" if crds else " (custom resources not schema-checked)"))
    return _exit_code(findings)


def cmd_diff(args: argparse.Namespace) -> int:
    from infra.offline.diff import diff_stack

    return diff_stack(ROOT, args.stack, args.base)


STACK_HELP = "a stack name (stacks/Pulumi.<STACK>.yaml) or the path of a stack file"
CRDS_HELP = ("directory of upstream CRDs, <component>/<minor>/*.yaml as scripts/fetch-crds writes it "
             "(default: ../shared/crds when present)")
EXIT_CODES = """exit codes:
  0  clean
  1  findings (capacity, schema, policy, version or live-cluster problems), listed one per line
  2  bad input: one line naming the field path, the value and the fix; nothing was run or written
  3  a bug in Trainyard: please report it (TRAINYARD_DEBUG=1 shows the traceback)"""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="trainyard", description="Plan, render and check Trainyard stacks offline.",
                                  epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan = sub.add_parser("plan", help="validate, run offline, check, and print a summary")
    plan.add_argument("stack", nargs="?", default="local", help=f"{STACK_HELP} (default: local)")
    plan.add_argument("--crds", help=CRDS_HELP)
    plan.set_defaults(func=cmd_plan)
    render = sub.add_parser("render", help="write plan.json and manifests/")
    render.add_argument("stack", help=STACK_HELP)
    render.add_argument("--out", required=True, help="directory to write plan.json and manifests/ into "
                                                     "(created when missing; must not be a file)")
    render.set_defaults(func=cmd_render)
    validate = sub.add_parser("validate", help="schema, policy, capacity and version checks")
    validate.add_argument("stack", help=STACK_HELP)
    validate.add_argument("--crds", help=CRDS_HELP)
    validate.set_defaults(func=cmd_validate)
    diff = sub.add_parser("diff", help="unified diff of rendered manifests between a git ref and the work tree",
                          description="Render the stack at --base and in the work tree and print a unified diff of "
                                      "the manifests and chart inputs, after one `# risk:` line per change that "
                                      "loses data or that the API server refuses (deleted namespaces, claims and "
                                      "CRDs, fields that cannot change in place, claims that shrink).")
    diff.add_argument("stack", help=STACK_HELP)
    diff.add_argument("--base", default="origin/main", help="git ref to compare with (default: origin/main)")
    diff.set_defaults(func=cmd_diff)
    for module in EXTENSIONS:
        importlib.import_module(module).register(sub)
    _document_exit_codes(top)
    return top


def _document_exit_codes(command: argparse.ArgumentParser) -> None:
    """Every command's and subcommand's --help ends with the exit codes."""
    if EXIT_CODES not in (command.epilog or ""):
        command.epilog = f"{command.epilog}\n\n{EXIT_CODES}" if command.epilog else EXIT_CODES
    command.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _document_exit_codes(child)


# Subcommands that live with their concern: each module's register(subparsers) adds one. Imported when the parser
# is built, so a command does not pay for another's imports (the kubernetes client, the offline API server).
EXTENSIONS = ("infra.docs.command", "infra.verify", "infra.accept.command", "infra.offline.apiserver.admit",
              "infra.onboard", "infra.offline.images")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (SpecError, ChartCacheError) as error:
        print(f"error: {error}", file=sys.stderr)
        return BAD_INPUT
    except engine.DuplicateResource as error:
        print(f"error: {error}", file=sys.stderr)
        return FINDINGS
    except OSError as error:  # a path the user gave that cannot be read or written
        print(f"error: {error.filename or ''}: {error.strerror or error}: check the path and its permissions",
              file=sys.stderr)
        return BAD_INPUT
    except Exception as error:  # an unexpected failure is a bug: one line, traceback only on request
        if os.environ.get("TRAINYARD_DEBUG"):
            raise
        print(f"internal error: {type(error).__name__}: {error} (set TRAINYARD_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
