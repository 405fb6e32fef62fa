"""`trainyard render STACK --out DIR`: write plan.json and manifests/."""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.commands.common import CLEAN, STACK_HELP, Subparsers, load
from infra.offline.plan import render_stack
from infra.spec import SpecError


def run(args: argparse.Namespace) -> int:
    path, platform = load(args.stack)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SpecError("--out", f"{out} is a file: give a directory (created when missing) for plan.json and "
                                 "manifests/")
    capture, count = render_stack(path, platform, out)
    print(f"rendered {len(capture.resources)} resources ({count} Kubernetes objects) to {out}")
    return CLEAN


def register(sub: Subparsers) -> None:
    render = sub.add_parser("render", help="write plan.json and manifests/")
    render.add_argument("stack", help=STACK_HELP)
    render.add_argument("--out", required=True, help="directory to write plan.json and manifests/ into "
                                                     "(created when missing; must not be a file)")
    render.set_defaults(func=run)
