"""The one error type that bad input produces: a single line that names the field path and the fix."""

from __future__ import annotations

from pydantic import ValidationError


class SpecError(Exception):
    """Raised for any stack-file mistake; str() is the one line the CLI prints."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in {"function-after", "function-before", "function-wrap", "tagged-union", "union"}:
            continue
        elif str(item).startswith(("function-", "constrained-", "str", "int", "dict[", "list[", "literal[")):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


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
