"""Hash seeds for the cross-process determinism tests: a seed whose string hashes differ from this process's.

Each such test renders once in a child process with that seed and an empty cache, and compares with what this
process renders (its seed is random, its cache filled by processes with random seeds): two different seeds, as with
two children, for one cold render instead of two. The seed is proven different, not assumed: a probe string is
hashed under it in a child and compared with this process's hash of it."""

from __future__ import annotations

import subprocess
import sys

PROBE = "trainyard-hash-seed-probe"


def _hash_under(seed: int) -> int:
    probe = subprocess.run([sys.executable, "-c", f"print(hash({PROBE!r}))"], env={"PYTHONHASHSEED": str(seed)},
                           check=True, capture_output=True, text=True)
    return int(probe.stdout)


def seed_unlike_this_process() -> str:
    """The first seed from 1 up under which the probe hashes differently than here (nearly always 1)."""
    for seed in range(1, 8):
        if _hash_under(seed) != hash(PROBE):
            return str(seed)
    raise AssertionError("seven seeds hash as this process does: is PYTHONHASHSEED fixed for the test run?")
