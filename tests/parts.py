"""The tenancy and access components run alone under the offline engine (tests/parts_program.py), for tests that
judge the objects they build: a run takes a fraction of a second, where the whole program renders charts.

A stack's run is kept for the session, except under mutation testing (mutmut sets MUTANT_UNDER_TEST, to "stats" while
it links tests to the functions they call, then to each mutant's name): there each test makes its own run, since
mutmut runs for a mutant only the tests that called the mutated function, and a kept run would link only the first
test that read it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from infra.offline import engine
from infra.offline.plan import objects
from infra.spec import PLATFORM_KEY, validate
from tests.conftest import raw_platform

PROGRAM = Path(__file__).with_name("parts_program.py")
_KEPT: dict[str, engine.Capture] = {}


def run_parts(stack: str, raw: dict[str, Any]) -> engine.Capture:
    validate(raw, stack)
    return engine.run(stack, {PLATFORM_KEY: raw}, PROGRAM)


def parts_of(stack: str) -> engine.Capture:
    if "MUTANT_UNDER_TEST" in os.environ:
        return run_parts(stack, raw_platform(stack))
    if stack not in _KEPT:
        _KEPT[stack] = run_parts(stack, raw_platform(stack))
    return _KEPT[stack]


def parts_objects(capture: engine.Capture, kind: str | None = None) -> list[dict[str, Any]]:
    return [obj for _, obj in objects(capture) if kind is None or obj.get("kind") == kind]


def namespace_refs(capture: engine.Capture) -> dict[str, str]:
    """Namespace name -> its resource's reference (what an object that waits for it depends on)."""
    return {r.inputs["metadata"]["name"]: r.ref() for r in capture.resources if r.inputs.get("kind") == "Namespace"}
