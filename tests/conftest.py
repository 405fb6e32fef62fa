"""Shared fixtures: stacks loaded, and run under the offline engine once for every worker and later session."""

from __future__ import annotations

import atexit
import copy
import dataclasses
import functools
import gc
import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline import engine
from infra.offline.diskcache import latest, source_hash
from infra.offline.engine import Registration
from infra.offline.plan import objects, write
from infra.spec import Platform, load_file, validate
from infra.spec.input.load import PLATFORM_KEY, read_stack_config, stack_names

ROOT = Path(__file__).resolve().parents[1]
ALL_STACKS = stack_names(ROOT)
# The per-stack invariants read one cluster's objects: they run on single-cluster stacks. A stack of several
# clusters runs every check on each of its clusters in tests/test_hybrid.py.
STACKS = [s for s in ALL_STACKS if "clusters" not in read_stack_config(ROOT / "stacks" / f"Pulumi.{s}.yaml")[
    PLATFORM_KEY]]
# The upstream CRDs: $TRAINYARD_CRDS (CI fetches them there with `make crds`), else ../shared/crds.
CRDS = Path(os.environ.get("TRAINYARD_CRDS") or ROOT.parent / "shared" / "crds")
ENGINE_RUN = engine.run  # the engine itself, whichever test replaces engine.run (repo_runs)


def _exit_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# An xdist worker has reported every result before its interpreter exits, and it holds every run it computed:
# freeing those objects one by one at exit kept the suite waiting 5 s after its last test. Exit handlers
# registered after this one (by modules the tests import) still run first; those registered before it (pytest's,
# logging's) are skipped, and nothing a worker leaves behind needs them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(_exit_now)


# A full collection walks every object alive: a worker holds six stacks' runs, the rendered charts and the compiled
# admission rules (hundreds of MB), and each program run it makes pushes Python's default thresholds past a full
# collection several times, which cost ~0.5-0.8 s each and a fifth of the suite's CPU (tests/test_cloud_common.py,
# test_storage.py, test_guards_admission.py, test_audit.py, test_kueue.py: 26 full collections, 21 s of 107 s).
# Young objects are still collected as often; a full collection waits for a hundred times as many young ones.
gc.set_threshold(700, 10, 1000)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure() -> None:
    """pytest's unraisable-exception plugin collects twice after the last test, to surface the errors of objects
    freed then: walking a worker's whole heap took ~10 s of each worker's CPU at the end of the suite. A collection
    skips frozen objects; what they hold is freed with the process, which ends right after."""
    gc.freeze()


def stack_file(stack: str) -> Path:
    return ROOT / "stacks" / f"Pulumi.{stack}.yaml"


@functools.cache
def platform_of(stack: str) -> Platform:
    return load_file(stack_file(stack))


@functools.cache
def capture_of(stack: str) -> engine.Capture:
    """A stack's offline run, computed by the first worker that needs it and read by the others, and by later
    sessions while nothing it depends on changes (diskcache: one file per stack, keyed by the stack file, every
    source file of the program, the locked dependencies and the Python that ran it)."""
    key = [hashlib.sha256(stack_file(stack).read_bytes()).hexdigest(), sys.version,
           source_hash(ROOT / "uv.lock", *sorted((ROOT / "infra").rglob("*.py")))]
    return latest("capture", stack, key, lambda: ENGINE_RUN(stack, read_stack_config(stack_file(stack))))


@pytest.fixture
def repo_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that run a repository stack whose file is unchanged get the session's run of it (capture_of), which
    the engine would compute again byte for byte (tests/test_offline_engine.py); any other run is the engine's."""
    def run(stack: str, config: dict[str, Any], program_path: Path = engine.PROGRAM) -> engine.Capture:
        if program_path == engine.PROGRAM and stack in ALL_STACKS and config == _repo_config(stack):
            return capture_of(stack)
        return ENGINE_RUN(stack, config, program_path)

    monkeypatch.setattr(engine, "run", run)


@functools.cache
def _repo_config(stack: str) -> dict[str, Any]:
    return read_stack_config(stack_file(stack))


def raw_platform(stack: str) -> dict[str, Any]:
    """A deep copy of a stack's trainyard:platform mapping, to derive variants from in tests (of the file read once:
    parsing it again for each variant cost more than running some of the tests)."""
    return copy.deepcopy(_repo_config(stack)[PLATFORM_KEY])


def run_raw(stack: str, raw: dict[str, Any]) -> engine.Capture:
    """Run the program for an edited platform mapping (validated first, as the CLI does)."""
    validate(raw, stack)
    return engine.run(stack, {PLATFORM_KEY: raw})


def write_stack(tmp_path: Path, raw: dict[str, Any], name: str = "test") -> Path:
    return write_config(tmp_path, {PLATFORM_KEY: raw}, name)


def write_config(tmp_path: Path, config: dict[str, Any], name: str = "test") -> Path:
    """A stack file holding the whole `config` (the platform and other keys, secrets included)."""
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input is refused before the program runs: no resource is registered."""
    def run(*_: object, **__: object) -> None:
        raise AssertionError("the program ran on a refused stack")
    monkeypatch.setattr(engine, "run", run)


def write_selected(capture: engine.Capture, out: Path, keep: Callable[[Registration], bool]) -> None:
    """The writer's plan.json and manifests/ for the registrations a test reads back (the charts' CRDs, most of a
    stack's bytes, are left out unless kept)."""
    write(dataclasses.replace(capture, resources=tuple(r for r in capture.resources if keep(r)), charts=()), out)


def kube_objects(capture: engine.Capture, kind: str | None = None, own: bool = False) -> list[dict[str, Any]]:
    """The Kubernetes objects of a run (of one kind); with `own`, only those this repository writes (no chart's)."""
    return [obj for record, obj in objects(capture)
            if (kind is None or obj.get("kind") == kind) and not (own and record.chart)]


@pytest.fixture
def crds_dir() -> Path:
    """The upstream CRDs; CI must have them, a developer machine may skip without them."""
    if not CRDS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{CRDS} is missing in CI: the schema tests must run there")
        pytest.skip(f"{CRDS} not present")
    return CRDS
