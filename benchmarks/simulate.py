"""Seconds `trainyard simulate` takes for traces of 1k, 10k and 100k jobs over 100 teams.

The stack is render_scale's generated on-prem stack (100 teams, 2 H100s guaranteed each, 200 in the pool); the
trace is the synthetic generator's at a rate that asks for about 90% of the pool over the trace's length, so that
queues form without growing for ever. Prints, per size: jobs, simulated span, wall and CPU seconds of the
simulation itself (the stack's load and the trace's generation are not counted), preemptions.

    python benchmarks/simulate.py [--sizes 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.render_scale import generated_platform
from infra.simulate import queues, trace
from infra.simulate.engine import simulate
from infra.spec import validate

TEAMS = 100
LOAD = 0.9


def mean_gpu_hours(model: queues.Model, seed: int) -> float:
    """The generator's mean GPU-hours per job on this stack, from a sample."""
    sample = trace.generate(model, dict.fromkeys(model.queues, 10.0), 24, seed)
    return sum(job.demand * job.duration for job in sample) / len(sample) / 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[1000, 10_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model = queues.build(validate(generated_platform(TEAMS), "bench"))
    capacity = sum(pool.capacity for pool in model.pools.values())
    per_job = mean_gpu_hours(model, args.seed)
    print(f"{TEAMS} teams, {capacity} GPUs, {per_job:.1f} GPU-hours per job on average, load {LOAD:.0%}")
    print(f"{'jobs':>8}{'span (h)':>10}{'wall s':>9}{'cpu s':>9}{'preempted':>11}")
    for size in args.sizes:
        hours = size * per_job / (LOAD * capacity)
        jobs = trace.generate(model, dict.fromkeys(model.queues, size / TEAMS / hours), hours, args.seed)
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = simulate(model, jobs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{len(jobs):>8}{outcome.span / 3600:>10.0f}{wall:>9.1f}{cpu:>9.1f}"
              f"{sum(outcome.preempted.values()):>11}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
