"""Edits of a stack's platform mapping by dotted path, and the refused-then-accepted check of the spec tests' bad-input
tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.commands import main
from infra.spec import SpecError, validate
from infra.spec.input.load import PLATFORM_KEY
from tests.conftest import raw_platform

Edit = Callable[[dict[str, Any]], None]


def set_at(path: str, value: Any) -> Edit:
    """Set `path` (a.b.c) to `value`, making the missing mappings on the way."""
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = raw
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return edit


def drop_at(*paths: str) -> Edit:
    """Remove each of `paths` (a.b.c), which must exist."""
    def edit(raw: dict[str, Any]) -> None:
        for path in paths:
            *parents, last = path.split(".")
            node = raw
            for key in parents:
                node = node[key]
            node.pop(last)
    return edit


def refused_then_accepted(stack: str, refused: Edit, accepted: Edit, path: str, words: tuple[str, ...]) -> None:
    """The stack with `refused` fails validation at `path` (under the platform key) with each of `words` in its
    message; with its nearest valid neighbour `accepted` instead, it validates."""
    raw = raw_platform(stack)
    refused(raw)
    with pytest.raises(SpecError) as caught:
        validate(raw, stack)
    assert caught.value.path == f"{PLATFORM_KEY}.{path}", str(caught.value)
    for word in words:
        assert word in caught.value.message, f"{word!r} not in {caught.value.message!r}"
    raw = raw_platform(stack)
    accepted(raw)
    validate(raw, stack)


def render_refusal(stack_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, Path]:
    """`trainyard render` of a bad stack file: exit 2 with exactly one line and no traceback; (the line, the output
    directory asked for)."""
    out_dir = tmp_path / "out"
    code = main(["render", str(stack_file), "--out", str(out_dir)])
    out, err = capsys.readouterr()
    assert code == 2, err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err + out, err
    return lines[0], out_dir
