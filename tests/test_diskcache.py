"""The on-disk cache of renders and parsed CRDs: a value per key, computed once, never stale, never shared."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from infra.offline import diskcache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRAINYARD_CACHE", str(tmp_path))
    monkeypatch.setattr(diskcache, "_MEMORY", {})
    return tmp_path


def _counting(value: Any) -> tuple[list[int], Any]:
    calls: list[int] = []

    def compute() -> Any:
        calls.append(1)
        return value
    return calls, compute


def test_a_value_is_computed_once_and_read_from_disk_by_another_process(cache: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls, compute = _counting({"a": [1, 2]})
    assert diskcache.cached("t", ["k"], compute) == {"a": [1, 2]}
    monkeypatch.setattr(diskcache, "_MEMORY", {})  # as a fresh process sees it
    assert diskcache.cached("t", ["k"], compute) == {"a": [1, 2]}
    assert len(calls) == 1
    assert len(list((cache / "t").glob("*.pickle"))) == 1


def test_any_change_of_the_key_computes_again(cache: Path) -> None:
    calls, compute = _counting("v")
    for key in (["k", {"values": 1}], ["k", {"values": 2}], ["k", {"values": 1}, "code v2"]):
        diskcache.cached("t", key, compute)
    assert len(calls) == 3
    diskcache.cached("t", ["k", {"values": 2}], compute)
    assert len(calls) == 3


def test_each_caller_gets_its_own_objects(cache: Path) -> None:
    first = diskcache.cached("t", ["k"], lambda: {"spec": {"replicas": 1}})
    first["spec"]["replicas"] = 99
    assert diskcache.cached("t", ["k"], lambda: {"spec": {"replicas": 1}}) == {"spec": {"replicas": 1}}


def test_an_unreadable_file_is_computed_again_and_replaced(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    diskcache.cached("t", ["k"], lambda: "good")
    [stored] = (cache / "t").glob("*.pickle")
    stored.write_bytes(b"\x80\x05truncated")
    monkeypatch.setattr(diskcache, "_MEMORY", {})
    calls, compute = _counting("good")
    assert diskcache.cached("t", ["k"], compute) == "good"
    assert len(calls) == 1 and diskcache._load(stored) is not None


def test_source_hash_changes_with_the_code(tmp_path: Path) -> None:
    code = tmp_path / "m.py"
    code.write_text("x = 1\n")
    before = diskcache.source_hash(code)
    code.write_text("x = 2\n")
    assert diskcache.source_hash(code) != before


def test_a_slot_keeps_one_value_and_a_new_key_replaces_it(cache: Path) -> None:
    calls, compute = _counting({"run": 1})
    assert diskcache.latest("capture", "lab", ["code v1"], compute) == {"run": 1}
    assert diskcache.latest("capture", "lab", ["code v1"], compute) == {"run": 1}
    assert len(calls) == 1
    diskcache.latest("capture", "lab", ["code v2"], compute)
    diskcache.latest("capture", "other", ["code v2"], compute)
    assert len(calls) == 3 and sorted(p.name for p in (cache / "capture").glob("*.pickle")) == [
        "lab.pickle", "other.pickle"]
    diskcache.latest("capture", "lab", ["code v1"], compute)  # the replaced value is gone, not served stale
    assert len(calls) == 4


def test_a_damaged_slot_is_computed_again(cache: Path) -> None:
    diskcache.latest("capture", "lab", ["k"], lambda: "good")
    path = cache / "capture" / "lab.pickle"
    path.write_bytes(path.read_bytes()[:-3])
    calls, compute = _counting("good")
    assert diskcache.latest("capture", "lab", ["k"], compute) == "good" and len(calls) == 1
    assert diskcache.latest("capture", "lab", ["k"], compute) == "good" and len(calls) == 1


def _age(cache: Path, seconds: float) -> None:
    """Every file of the cache as if last written or read `seconds` ago."""
    for path in cache.rglob("*"):
        if path.is_file():
            then = path.stat().st_mtime - seconds
            os.utime(path, (then, then))


def test_prune_keeps_what_was_read_or_written_since_the_moment_and_removes_the_rest(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("read", "unused"):
        diskcache.cached("t", [key], functools.partial(str, key))
    diskcache.latest("slot", "stack", ["old"], lambda: "run")
    _age(cache, 3600)
    moment = time.time() - 60
    monkeypatch.setattr(diskcache, "_MEMORY", {})  # a later run: reads from disk
    assert diskcache.cached("t", ["read"], lambda: "computed again") == "read"
    assert diskcache.latest("slot", "stack", ["old"], lambda: "computed again") == "run"
    diskcache.cached("t", ["new"], lambda: "new")
    files, freed = diskcache.prune(moment)
    assert files >= 1 and freed > 0
    monkeypatch.setattr(diskcache, "_MEMORY", {})
    found = {key: diskcache.cached("t", [key], functools.partial(str, f"computed {key}"))
             for key in ("read", "unused", "new")}
    assert found == {"read": "read", "unused": "computed unused", "new": "new"}
    assert diskcache.latest("slot", "stack", ["old"], lambda: "computed again") == "run"


def test_prune_script_refuses_a_missing_marker_or_no_days_and_removes_nothing(cache: Path) -> None:
    diskcache.cached("t", ["k"], lambda: "v")
    script = Path(__file__).resolve().parents[1] / "scripts" / "prune-cache"
    done = subprocess.run([sys.executable, str(script), "--unused-since", str(cache / "missing")],
                          capture_output=True, text=True, env={**os.environ, "TRAINYARD_CACHE": str(cache)})
    assert done.returncode == 2 and "--unused-since" in done.stderr and "no such file" in done.stderr
    for days in ("0", "-1", "nan"):
        done = subprocess.run([sys.executable, str(script), "--days", days], capture_output=True, text=True,
                              env={**os.environ, "TRAINYARD_CACHE": str(cache)})
        assert done.returncode == 2 and "above 0" in done.stderr, days
    assert len(list((cache / "t").glob("*.pickle"))) == 1
    marker = cache / "start"
    marker.touch()
    done = subprocess.run([sys.executable, str(script), "--unused-since", str(marker)],
                          capture_output=True, text=True, env={**os.environ, "TRAINYARD_CACHE": str(cache)})
    assert done.returncode == 0 and "removed" in done.stdout
