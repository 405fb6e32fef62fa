"""`trainyard images STACK`: every image the stack runs, one a line, sorted, for mirroring."""

from __future__ import annotations

import argparse
import sys

from infra.commands.common import CLEAN, FINDINGS, STACK_HELP, Subparsers, load, run_offline
from infra.offline.clusters import split
from infra.offline.images import qualified, stack_images
from infra.offline.plan import objects


def run(args: argparse.Namespace) -> int:
    path, platform = load(args.stack)
    images = sorted({image for member, part in split(platform, run_offline(path, platform)).values()
                     for image in stack_images([obj for _, obj in objects(part)], member.gpu_stack)})
    for image in images:
        print(image)
    bad = [image for image in images if not qualified(image)]
    for image in bad:
        print(f"error: image '{image}' is not fully qualified and pinned", file=sys.stderr)
    return FINDINGS if bad else CLEAN


def register(sub: Subparsers) -> None:
    images = sub.add_parser("images", help="every image the stack runs, one a line, sorted (for mirroring)")
    images.add_argument("stack", help=STACK_HELP)
    images.set_defaults(func=run)
