"""Edits of a stack's platform mapping by dotted path, for the bad-input tables of the spec tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
