"""Render generated stacks of 10, 100 and 1000 teams offline and compare with the bare Pulumi SDK.

For each size: seconds (wall; CPU too for the bare= ratio), peak memory (RSS of a fresh process) and
resource count for Trainyard (load + validate + run the program under mocks + render plan.json and
manifests), and beside it the bare SDK registering the same number of plain resources under the same
mocks, twice: minimal ConfigMaps (one value each), and ConfigMaps carrying as many values as Trainyard's
resources do on average (the SDK's cost grows with every input value it serializes). Prints
t(ours)/t(bare) for both and t(1000)/t(100). Each measurement runs in its own process.

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


def _leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_leaves(item) for item in value.values())
    if isinstance(value, list):
        return sum(_leaves(item) for item in value)
    return 1


def worker(kind: str, size: int, resources: int, leaves: int) -> None:
    """One measurement, in this (fresh) process; prints a JSON line."""
    from infra.offline import engine
    from infra.offline.plan import write
    from infra.spec import validate
    from infra.spec.input.load import PLATFORM_KEY

    start, cpu_start = time.perf_counter(), time.process_time()
    if kind == "ours":
        raw = generated_platform(size)
        platform = validate(raw, f"bench-{size}")
        capture = engine.run(platform.stack, {PLATFORM_KEY: raw})
        with tempfile.TemporaryDirectory() as out:
            write(capture, Path(out))
    else:
        config = {"bench:count": str(resources), "bench:leaves": str(leaves)}
        capture = engine.run(f"bare-{size}", config, program_path=BARE)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    average = sum(_leaves(r.inputs) for r in capture.resources) / max(len(capture.resources), 1)
    print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mb": peak_mb, "resources": len(capture.resources),
                      "leaves": round(average)}))


def measure(kind: str, size: int, resources: int = 0, leaves: int = 1) -> dict[str, float]:
    result = subprocess.run([sys.executable, __file__, "--worker", kind, str(size), str(resources), str(leaves)],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], *(int(value) for value in args.worker[1:]))
        return
    print(f"{'teams':>6} {'resources':>9} {'values/res':>10} {'ours s':>8} {'ours MB':>8} {'bare s':>8} "
          f"{'bare MB':>8} {'ours/bare':>9} {'bare= s':>8} {'ours/bare=':>10} {'CPU ours/bare=':>14}")
    times: dict[int, float] = {}
    # Chart renders are cached on disk per chart, values and code: fill the cache for this checkout first, so each
    # size measures what every plan after the first one costs.
    measure("ours", 10)
    for size in args.sizes:
        ours = measure("ours", size)
        count = int(ours["resources"])
        bare = measure("bare", size, count)
        same = measure("bare", size, count, int(ours["leaves"]))
        times[size] = ours["seconds"]
        print(f"{size:>6} {count:>9} {int(ours['leaves']):>10} {ours['seconds']:>8.2f} {ours['peak_mb']:>8.0f} "
              f"{bare['seconds']:>8.2f} {bare['peak_mb']:>8.0f} {ours['seconds'] / bare['seconds']:>9.2f} "
              f"{same['seconds']:>8.2f} {ours['seconds'] / same['seconds']:>10.2f} "
              f"{ours['cpu'] / same['cpu']:>14.2f}")
    print("bare: minimal ConfigMaps; bare=: ConfigMaps with as many values per resource as Trainyard's; "
          "CPU: the same ratio in CPU seconds (steadier than wall time on a shared machine)")
    if 100 in times and 1000 in times:
        print(f"t(1000)/t(100) = {times[1000] / times[100]:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
