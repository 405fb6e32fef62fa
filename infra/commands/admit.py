"""`trainyard admit STACK FILE...`: would this stack's cluster admit these manifests, and why not."""

from __future__ import annotations

import argparse
from pathlib import Path

from infra.apiserver.admit import admit
from infra.apiserver.identity import PERSONAS
from infra.apiserver.schema import default_crds_dir
from infra.commands.common import ROOT, STACK_HELP, Subparsers
from infra.spec import SpecError


def run(args: argparse.Namespace) -> int:
    crds = Path(args.crds) if args.crds else default_crds_dir(ROOT)
    if crds is not None and not crds.is_dir():
        raise SpecError("--crds", f"{crds} is not a directory of CRDs (<component>/<minor>/*.yaml)")
    return admit(args.stack, args.files, crds, ROOT, args.as_)


def register(sub: Subparsers) -> None:
    parser = sub.add_parser("admit", help="would this stack's cluster admit these manifests, and why not")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifests to check (multi-document YAML)")
    parser.add_argument("--crds", help="directory of upstream CRDs (<component>/<minor>/)")
    parser.add_argument("--as", dest="as_", metavar="PERSONA[:TEAM]",
                        help=f"who submits: {', '.join(PERSONAS)}, for TEAM where it is a team's (default: the "
                             "ml-engineer of the first object's team)")
    parser.set_defaults(func=run)
