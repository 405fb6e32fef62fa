"""Render generated stacks of 10, 100 and 1000 teams offline and compare with the bare Pulumi SDK.

For each size: seconds, peak memory (RSS of a fresh process) and resource count for Trainyard
(load + validate + run the program under mocks + render plan.json and manifests), and beside it the
bare SDK registering the same number of plain resources under the same mocks. Prints the ratios
t(ours)/t(bare) and t(1000)/t(100). Each measurement runs in its own process.

    python benchmarks/render_scale.py [--sizes 10 100 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BARE = ROOT / "benchmarks" / "bare_program.py"


def generated_platform(teams: int) -> dict[str, Any]:
    """An on-prem stack sized for `teams` teams: one H100 node per 4 teams, each team 2 GPUs + CPU quota."""
    gpu_nodes = max(1, teams // 4)
    return {
        "cluster": {"existing": {"context": "bench"}},
        "identity": {"groupPrefix": "oidc:"},
        "pools": {
            "h100": {"gpu": "H100-SXM-80GB", "perNode": 8, "cpu": "192", "memory": "1900Gi",
                     "nodes": [f"gpu-{i:04d}" for i in range(gpu_nodes)], "capacityType": "reserved"},
            "cpu": {"cpu": "64", "memory": "256Gi", "nodes": [f"cpu-{i:04d}" for i in range(max(1, teams // 16))]},
        },
        "teams": {f"team-{i:04d}": {"quota": {"h100": 2, "cpu": {"cpu": 4, "memory": "16Gi"}},
                                    "groups": {"engineers": f"team-{i:04d}-eng"}} for i in range(teams)},
    }


def worker(kind: str, size: int, resources: int) -> None:
    """One measurement, in this (fresh) process; prints a JSON line."""
    from infra.offline import engine
    from infra.offline.plan import write
    from infra.spec import validate
    from infra.spec.load import PLATFORM_KEY

    start = time.perf_counter()
    if kind == "ours":
        raw = generated_platform(size)
        platform = validate(raw, f"bench-{size}")
        capture = engine.run(platform.stack, {PLATFORM_KEY: raw})
        with tempfile.TemporaryDirectory() as out:
            write(capture, Path(out))
    else:
        capture = engine.run(f"bare-{size}", {"bench:count": str(resources)}, program_path=BARE)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "resources": len(capture.resources)}))


def measure(kind: str, size: int, resources: int = 0) -> dict[str, float]:
    result = subprocess.run([sys.executable, __file__, "--worker", kind, str(size), str(resources)],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
        return
    print(f"{'teams':>6} {'resources':>9} {'ours s':>8} {'ours MB':>8} {'bare s':>8} {'bare MB':>8} {'ours/bare':>9}")
    times: dict[int, float] = {}
    for size in args.sizes:
        ours = measure("ours", size)
        bare = measure("bare", size, int(ours["resources"]))
        times[size] = ours["seconds"]
        print(f"{size:>6} {int(ours['resources']):>9} {ours['seconds']:>8.2f} {ours['peak_mb']:>8.0f} "
              f"{bare['seconds']:>8.2f} {bare['peak_mb']:>8.0f} {ours['seconds'] / bare['seconds']:>9.2f}")
    if 100 in times and 1000 in times:
        print(f"t(1000)/t(100) = {times[1000] / times[100]:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
