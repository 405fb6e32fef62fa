"""`trainyard diff STACK [--base GITREF]`: the rendered manifests' diff, after the risk lines."""

from __future__ import annotations

import argparse

from infra.commands.common import ROOT, STACK_HELP, Subparsers


def run(args: argparse.Namespace) -> int:
    from infra.review.diff import diff_stack

    return diff_stack(ROOT, args.stack, args.base)


def register(sub: Subparsers) -> None:
    diff = sub.add_parser("diff", help="unified diff of rendered manifests between a git ref and the work tree",
                          description="Render the stack at --base and in the work tree and print a unified diff of "
                                      "the manifests and chart inputs, after one `# risk:` line per change that "
                                      "loses data or that the API server refuses (deleted namespaces, claims and "
                                      "CRDs, fields that cannot change in place, claims that shrink).")
    diff.add_argument("stack", help=STACK_HELP)
    diff.add_argument("--base", default="origin/main", help="git ref to compare with (default: origin/main)")
    diff.set_defaults(func=run)
