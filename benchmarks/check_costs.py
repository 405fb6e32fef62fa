"""CPU seconds of each plan check (infra/checks/catalogue.py) per stack, in this process, as `trainyard plan` and
`trainyard validate` run them: the program runs once per stack, then every cluster check of the catalogue is timed
on each cluster of the stack (and the stack checks once). `first` is what a plan pays (parsers and CRD indexes built
on first use are charged to the check that first needs them); `again` is the same check on warm caches.

    python benchmarks/check_costs.py [--stacks local aws-prod] [--crds ../shared/crds] [--top 15]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.apiserver.schema import CrdIndex
from infra.checks.catalogue import CHECKS, STACK_CHECKS
from infra.checks.context import Context, StackContext
from infra.offline import engine
from infra.offline.clusters import split
from infra.offline.plan import objects
from infra.spec import load_file
from infra.spec.input.load import read_stack_config, stack_names

ROOT = Path(__file__).resolve().parents[1]


def cpu_of(check: Callable[[Any], Any], ctx: Any) -> tuple[float, float]:
    """(first, again): CPU seconds of two runs of one check on one context."""
    times = []
    for _ in range(2):
        start = time.process_time()
        check(ctx)
        times.append(time.process_time() - start)
    return times[0], times[1]


def stack_costs(stack: str, crds: Path) -> dict[str, tuple[float, float]]:
    """Check id -> (first, again) CPU seconds, summed over the stack's clusters."""
    path = ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    platform, capture = load_file(path), engine.run(stack, read_stack_config(path))
    costs: dict[str, tuple[float, float]] = {}
    for member, part in split(platform, capture).values():
        installed = [obj for record, obj in objects(part) if record.chart]
        crd_index = CrdIndex(crds, member.spec.versions.crd_dirs(), installed)
        ctx = Context(member, part, crd_index)
        for entry in CHECKS:
            first, again = cpu_of(entry.run, ctx)
            before = costs.get(entry.id, (0.0, 0.0))
            costs[entry.id] = (before[0] + first, before[1] + again)
    stack_ctx = StackContext(platform, capture)
    for stack_entry in STACK_CHECKS:
        costs[stack_entry.id] = cpu_of(stack_entry.run, stack_ctx)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stacks", nargs="*", default=stack_names(ROOT))
    parser.add_argument("--crds", type=Path, default=ROOT.parent / "shared" / "crds")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    for stack in args.stacks:
        costs = stack_costs(stack, args.crds)
        total_first, total_again = (sum(cost[i] for cost in costs.values()) for i in (0, 1))
        print(f"{stack}: {len(costs)} checks, {total_first:.2f} s CPU first, {total_again:.2f} s again")
        for check, (first, again) in sorted(costs.items(), key=lambda item: -item[1][0])[:args.top]:
            print(f"  {first:6.2f} {again:6.2f}  {check}")


if __name__ == "__main__":
    main()
