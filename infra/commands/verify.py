"""`trainyard verify STACK [--context CTX]`: after `pulumi up`, compare the live cluster with the stack."""

from __future__ import annotations

import argparse
from dataclasses import replace

from infra.commands.common import ROOT, Subparsers
from infra.live.hybrid import contexts
from infra.live.verify import connect_and_verify
from infra.spec import load_file, stack_path


def run(args: argparse.Namespace) -> int:
    platform = load_file(stack_path(args.stack, ROOT))
    if platform.hybrid is not None:
        findings = []
        for name, context in contexts(platform, args.context or []).items():
            # The manager's own Platform carries the stack's clusters: it is checked for MultiKueue too.
            member = platform if name == platform.hybrid.manager else platform.hybrid.clusters[name]
            findings += [replace(f, subject=f"{name}: {f.subject}") for f in connect_and_verify(member, context)]
    else:
        existing = platform.spec.cluster.existing
        given: str | None = args.context[-1] if args.context else None
        findings = connect_and_verify(platform, given or (existing.context if existing else None))
    for finding in findings:
        print(finding.line())
    print(f"verify {platform.stack}: {len(findings)} problem(s)")
    return 1 if findings else 0


def register(sub: Subparsers) -> None:
    parser = sub.add_parser("verify", help="after pulumi up: compare the live cluster with the stack")
    parser.add_argument("stack", help="a stack name (stacks/Pulumi.<STACK>.yaml) or the path of a stack file")
    parser.add_argument("--context", action="append",
                        help="kubeconfig context (default: the stack's, else the current one); the kubeconfig is "
                             "$KUBECONFIG, else ~/.kube/config. A stack of several clusters: CLUSTER=CONTEXT, once "
                             "per cluster (default: an existing cluster's context, else the cluster's name)")
    parser.set_defaults(func=run)
