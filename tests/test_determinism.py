"""Renders do not depend on the hash seed: a stack rendered by another process (`python -m infra.commands render`,
with another PYTHONHASHSEED, tests/seeds.py) gives the same plan.json and manifests/, byte for byte, as this test
process renders it. A list built from a set (or any other iteration over hashed strings) orders differently under
another seed and fails here; within one process it cannot (tests/test_offline_engine.py compares runs of one process).

The child process has its own empty cache ($TRAINYARD_CACHE): the disk cache keeps finished values (chart renders,
manifest texts) by their inputs, so a process that read this one's would hide an ordering bug inside them. This
process's cache holds only values computed by processes whose seeds were random (pytest's workers).

A cold render takes 13 s (onprem-lab) to over a minute (hybrid-burst) on a quiet core, so `make test` runs onprem-lab
(every persona, three teams, fabric and rack topology: the most sets to order) and the other five run with
TRAINYARD_ALL_STACKS=1 (`make determinism`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.commands import main
from tests.conftest import ALL_STACKS, ROOT
from tests.seeds import seed_unlike_this_process

DEFAULT_STACKS = ("onprem-lab",)
ALL = bool(os.environ.get("TRAINYARD_ALL_STACKS"))


def _tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def render_here_and_in_a_child(stack: str, tmp_path: Path) -> list[dict[str, bytes]]:
    """The stack rendered by a child process under another hash seed with an empty cache, then by this process."""
    seed = seed_unlike_this_process()
    env = {**os.environ, "PYTHONHASHSEED": seed, "TRAINYARD_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "infra.commands", "render", stack, "--out", str(tmp_path / "child")]
    child = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, f"{stack}: render failed: {child.stdout}{child.stderr}"
    assert main(["render", stack, "--out", str(tmp_path / "here")]) == 0
    return [_tree(tmp_path / "here"), _tree(tmp_path / "child")]


@pytest.mark.parametrize("stack", [
    s if s in DEFAULT_STACKS or ALL else pytest.param(s, marks=pytest.mark.skip(
        reason="TRAINYARD_ALL_STACKS=1 (make determinism) renders every stack"))
    for s in ALL_STACKS])
def test_renders_are_byte_identical_across_processes_and_hash_seeds(stack: str, tmp_path: Path) -> None:
    first, second = render_here_and_in_a_child(stack, tmp_path)
    assert "plan.json" in first and any(name.startswith("manifests/") for name in first)
    assert sorted(first) == sorted(second), f"{stack}: the two renders wrote different files"
    differing = [name for name in first if first[name] != second[name]]
    assert differing == [], (f"{stack}: these files differ between two hash seeds (a list built from a set?): "
                             f"{differing[:10]}")
