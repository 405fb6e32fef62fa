"""The one error type that bad input produces: a single line that names the field path and the fix."""

from __future__ import annotations

import re

from pydantic import ValidationError


class SpecError(Exception):
    """Raised for any stack-file mistake; str() is the one line the CLI prints."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


# Entries pydantic adds to an error location for union members and validators, not stack-file keys.
_MARKER = re.compile(
    r"^(function-(after|before|wrap|plain)\[.*\]|constrained-\w+|str|int|float|bool|decimal|"
    r"(list|dict|set|tuple|literal|tagged-union|union)\[.*\]|[A-Z][A-Za-z0-9]*)$"
)


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item == "[key]":
            parts.append(" (a key)")
        elif not _MARKER.match(str(item)):
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


_PATH_IN_MESSAGE = re.compile(r"^([A-Za-z0-9_.\[\]-]+): (.+)$")


def rooted(root: str, message: str) -> SpecError:
    """A check's "field.path: what to do" message as a SpecError at that path under `root`."""
    match = _PATH_IN_MESSAGE.match(message)
    return SpecError(f"{root}.{match.group(1)}", match.group(2)) if match else SpecError(root, message)


def from_validation_error(error: ValidationError, root: str) -> SpecError:
    """The first pydantic error as a SpecError rooted at the stack-file key."""
    first = error.errors()[0]
    loc = _location(tuple(first["loc"]))
    path = f"{root}.{loc}" if loc else root
    kind = first["type"]
    message = str(first["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        message = "unknown key: remove it or check its spelling against docs/stack-reference.md"
    elif kind == "missing":
        message = "required key is missing"
    return SpecError(path, message)
