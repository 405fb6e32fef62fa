"""What every `trainyard` command shares: exit codes, the stack and --crds options, loading and running a stack."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from infra.apiserver.schema import default_crds_dir
from infra.kit import paths
from infra.offline import engine
from infra.spec import Finding, Platform, SpecError, load_file, stack_path
from infra.spec.input.load import read_stack_config

ROOT = paths.ROOT
CLEAN, FINDINGS, BAD_INPUT, INTERNAL = 0, 1, 2, 3

STACK_HELP = "a stack name (stacks/Pulumi.<STACK>.yaml) or the path of a stack file"
CRDS_HELP = ("directory of upstream CRDs, <component>/<minor>/*.yaml as scripts/fetch-crds writes it "
             "(default: ../shared/crds when present)")
EXIT_CODES = """exit codes:
  0  clean
  1  findings (capacity, schema, policy, version or live-cluster problems), listed one per line
  2  bad input: one line naming the field path, the value and the fix; nothing was run or written
  3  a bug in Trainyard: please report it (TRAINYARD_DEBUG=1 shows the traceback)"""

Subparsers = argparse._SubParsersAction  # type: ignore[type-arg]


def load(stack: str) -> tuple[Path, Platform]:
    path = stack_path(stack, ROOT)
    return path, load_file(path)


def run_offline(path: Path, platform: Platform) -> engine.Capture:
    return engine.run(platform.stack, read_stack_config(path))


def exit_code(findings: Sequence[Finding]) -> int:
    return FINDINGS if any(f.severity == "error" for f in findings) else CLEAN


def crds(args: argparse.Namespace) -> Path | None:
    """--crds DIR, checked before anything runs; without it, ../shared/crds when present."""
    if not args.crds:
        return default_crds_dir(ROOT)
    given = Path(args.crds)
    if not given.is_dir():
        raise SpecError("--crds", f"{given} is not a directory: give the directory of upstream CRDs "
                                  "(<component>/<minor>/*.yaml, as scripts/fetch-crds writes it)")
    return given
