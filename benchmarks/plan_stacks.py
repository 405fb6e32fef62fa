"""Time `trainyard plan <stack>` for every stack of the repository, each in a fresh process, as a user runs it.

For each stack: wall seconds and CPU seconds (user + system of the child), once with an empty render cache (a
fresh $TRAINYARD_CACHE: every chart rendered, every CRD parsed) and once warm (the second plan of a work tree).
CPU seconds are the figure to compare across machines: wall time moves with the machine's load, which the last
line reports.

    python benchmarks/plan_stacks.py [--stacks local aws-prod] [--crds ../shared/crds]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infra.spec.input.load import stack_names

ROOT = Path(__file__).resolve().parents[1]


def timed_plan(stack: str, crds: str, cache: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one `trainyard plan` in its own process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "infra.commands", "plan", stack, "--crds", crds], cwd=ROOT,
                          env={**os.environ, "TRAINYARD_CACHE": cache}, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stacks", nargs="*", default=stack_names(ROOT))
    parser.add_argument("--crds", default=str(ROOT.parent / "shared" / "crds"))
    args = parser.parse_args()
    print(f"{'stack':<14}{'cold wall':>10}{'cold cpu':>10}{'warm wall':>10}{'warm cpu':>10}  exit")
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-") as cache:
        for stack in args.stacks:
            cold_wall, cold_cpu, code = timed_plan(stack, args.crds, cache)
            warm_wall, warm_cpu, _ = timed_plan(stack, args.crds, cache)
            print(f"{stack:<14}{cold_wall:>10.1f}{cold_cpu:>10.1f}{warm_wall:>10.1f}{warm_cpu:>10.1f}  {code}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
