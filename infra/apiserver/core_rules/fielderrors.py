"""The API server's validation errors as it prints them (k8s.io/apimachinery/pkg/util/validation/field, errors.go):
`<path>: <type>[: <value>][: <detail>]`, and defensive readers of an object that no schema has vetted yet.

Values print as the server prints simple ones: a string quoted (`"2"`), a number bare (`70000`). A structured value
(a label map, a selector) is printed as compact JSON, where the server prints Go syntax
(`map[string]string{"app":"x"}`): the path and the detail, which say what to fix, are the server's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_value(value)}: {detail}"


def duplicate(path: str, value: Any) -> str:
    return f"{path}: Duplicate value: {_value(value)}"


def not_found(path: str, value: Any) -> str:
    return f"{path}: Not found: {_value(value)}"


def not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    return f"{path}: Unsupported value: {_value(value)}: supported values: " + ", ".join(
        json.dumps(s) for s in supported)


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def mapping(value: Any) -> dict[str, Any]:
    """The value when it is a mapping, else empty: a wrong type is the schema check's finding, not a crash here."""
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""
