"""The one error type that bad input produces: a single line that names the field path and the fix."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

# Control characters and line breaks (a YAML block scalar's final newline, a tab) shown escaped: the error stays one
# line, and the user sees what is in the value.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    return CONTROL_CHARACTERS.sub(lambda match: match.group(0).encode("unicode_escape").decode("ascii"), text)


class SpecError(Exception):
    """Raised for any stack-file mistake; str() is the one line the CLI prints."""

    def __init__(self, path: str, message: str) -> None:
        self.path = one_line(path)
        self.message = one_line(message)
        super().__init__(f"{self.path}: {self.message}" if self.path else self.message)


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
    if not match:
        return SpecError(root, message)
    joint = "" if match.group(1).startswith("[") else "."
    return SpecError(f"{root}{joint}{match.group(1)}", match.group(2))


# Every pattern a stack-file field is checked against, in words: a user is never shown a raw regex.
PATTERN_WORDS = {
    r"^[0-9]+h$": "a whole number of hours, e.g. 48h",
    r"^[0-9]+(s|m|h)$": "a whole number of seconds, minutes or hours, e.g. 90s, 10m, 1h",
    r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$": "a bucket name: 3 to 63 lowercase letters, digits, '.' and '-', "
                                          "starting and ending with a letter or digit",
    r"^[A-Za-z0-9][A-Za-z0-9/_-]*$": "letters, digits, '/', '_' and '-', starting with a letter or digit",
    r"^https?://\S+$": "an http:// or https:// URL without spaces",
    r"^vpc-[0-9a-f]+$": "a VPC id: vpc- followed by hexadecimal digits",
    r"^/subscriptions/.+/subnets/[^/]+$": "an Azure subnet resource id (/subscriptions/.../subnets/NAME)",
    r"^[a-z]{2}(-[a-z]+)+-[0-9]$": "an AWS region name, e.g. eu-central-1",
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$": "a Google Cloud project id: 6 to 30 lowercase letters, digits and '-', "
                                       "starting with a letter",
    r"^[a-z]+-[a-z]+[0-9]$": "a Google Cloud region name, e.g. europe-west4",
    r"^[a-z0-9]+$": "lowercase letters and digits only, e.g. westeurope",
    r"^[-\w.()]{1,90}$": "1 to 90 letters, digits, '-', '_', '.', '(' and ')'",
    r"^\S*$": "no spaces",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name: letters, digits and '_', not starting with a digit",
    r"^[1-7]g\.[0-9]+gb$": "a MIG profile such as 1g.10gb or 3g.40gb",
    r"^[a-z0-9-]+$": "lowercase letters, digits and '-'",
    r"^/": "an absolute path starting with /",
    r"^fs-[0-9a-f]+$": "an EFS file system id: fs- followed by hexadecimal digits",
    r"^subnet-[0-9a-f]+$": "a subnet id: subnet- followed by hexadecimal digits",
    r"^[a-z0-9][a-z0-9-]{1,40}$": "2 to 41 lowercase letters, digits and '-', starting with a letter or digit",
    r"^https://\S+$": "an https:// URL without spaces",
    r"^gke-security-groups@[a-z0-9.-]+\.[a-z]+$": "the Google group gke-security-groups@YOUR-DOMAIN "
                                                   "(Google Groups for RBAC requires this name)",
    r"^\S+$": "text without spaces, not empty",
    r"^[1-9][0-9]*[mhd]$": "a whole number of minutes, hours or days, e.g. 30m, 4h, 1d",
    r"^[1-9][0-9]*[hdw]$": "a whole number of hours, days or weeks, above 0, e.g. 36h, 15d, 2w",
    r"^[1-9][0-9]*[mh]$": "a whole number of minutes or hours, above 0, e.g. 90m, 2h",
    r"^/\S+\.ya?ml$": "an absolute path of a .yaml or .yml file, without spaces",
    r"^[a-z0-9][-a-z0-9.]*$": "a Kubernetes object name: lowercase letters, digits, '-' and '.', "
                              "starting with a letter or digit",
    r"^[A-Za-z][A-Za-z0-9-]*$": "an LDAP attribute name: letters, digits and '-', starting with a letter "
                                "(or DN, the entry's own name)",
    r"^[a-z0-9][a-z0-9._-]*$": "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit",
    r"^(ubuntu|rhel|rhcos|sles)[0-9]+(\.[0-9]+)?$": "an OS as the GPU Operator tags driver images: ID and VERSION_ID "
                                                    "of /etc/os-release joined, e.g. ubuntu24.04 or rhel9.4",
    r"^[0-9]+\.[0-9]+\.[0-9]+[-.A-Za-z0-9_]*$": "a kernel release as `uname -r` prints it, e.g. 6.8.0-60-generic",
}
_TYPE_WORDS = {
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "string_type": "text (quote it)", "bool_type": "true or false", "dict_type": "a mapping (key: value)",
    "list_type": "a list", "model_type": "a mapping (key: value)", "decimal_type": "a number",
    "decimal_parsing": "a number", "is_instance_of": "a number",
}


def shown(value: object) -> str:
    """A value as the user wrote it in YAML: text quoted, null, true/false, lists and mappings in flow style."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None or isinstance(value, bool | list | dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(first: Any, known: Sequence[str]) -> str:
    kind, value = first["type"], first.get("input")
    if kind == "extra_forbidden":
        key = str(first["loc"][-1]) if first["loc"] else ""
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f"did you mean `{near[0]}`?" if near else \
            (f"valid keys here: {', '.join(known)}" if known else "check its spelling against docs/stack-reference.md")
        return f"unknown key '{key}': {hint}"
    if kind == "missing":
        return "required key is missing: add it (see docs/stack-reference.md)"
    if kind == "string_pattern_mismatch":
        pattern = str((first.get("ctx") or {}).get("pattern", ""))
        words = PATTERN_WORDS.get(pattern, "a value of the documented form (docs/stack-reference.md)")
        return f"{shown(value)} has the wrong form: give {words}"
    if kind in _TYPE_WORDS:
        if isinstance(value, bool):
            return (f"{shown(value)} is a boolean (YAML reads yes/no/on/off/true/false as booleans): give "
                    f"{_TYPE_WORDS[kind]}")
        return f"{shown(value)} is not {_TYPE_WORDS[kind]}: give {_TYPE_WORDS[kind]}"
    message = str(first["msg"]).removeprefix("Value error, ")
    if kind.startswith(("greater_than", "less_than", "too_short", "too_long", "literal_error", "enum")):
        return f"{shown(value)}: {message[0].lower()}{message[1:]}"
    return message


def known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys (aliases where given) of the model found by following `loc` down from `model`; [] when the path
    leads to no model."""
    target: Any = model
    for item in loc:
        target = _step(target, item)
        if target is None:
            return []
    target = _model_in(target)
    if target is None:
        return []
    return sorted(info.alias or name for name, info in target.model_fields.items())


def _members(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: Annotated and Optional/unions unwrapped, containers kept whole."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    return next((m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)), None)


def _step(annotation: Any, item: int | str) -> Any:
    """One step of a location: a field of a model, a dict's value, a list's item; pydantic's markers pass."""
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel) and isinstance(item, str):
            for name, info in member.model_fields.items():
                if item in (name, info.alias):
                    return info.annotation
        elif get_origin(member) is dict and isinstance(item, str) and not _MARKER.match(item):
            return get_args(member)[1]
        elif get_origin(member) is list and isinstance(item, int):
            return get_args(member)[0]
    if isinstance(item, str) and _MARKER.match(item):
        named = [m for m in _members(annotation) if getattr(m, "__name__", None) == item]
        return named[0] if named else annotation
    return None


def from_validation_error(error: ValidationError, root: str, model: type[BaseModel] | None = None) -> SpecError:
    """The most useful pydantic error (an unknown key before the missing key it was meant to be, else the deepest)
    as a one-line SpecError rooted at the stack-file key."""
    errors = error.errors()
    # Of a union's alternatives, the one that got deepest into the value is the one the user meant.
    first = next((e for e in errors if e["type"] == "extra_forbidden"),
                 max(errors, key=lambda e: sum(1 for item in e["loc"] if not _MARKER.match(str(item)))))
    loc = _location(tuple(first["loc"]))
    path = f"{root}.{loc}" if loc else root
    known = known_keys(model, first["loc"][:-1]) if model is not None and first["type"] == "extra_forbidden" else []
    message = _message(first, known)
    # A check on a section names the field inside it first ("zones: ..."): that field is the path.
    return rooted(path, message) if first["type"] == "value_error" else SpecError(path, message)
