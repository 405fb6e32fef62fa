"""Every field of every stack against hostile values, one edit at a time: bad input must be refused with one line
naming the field path (infra.spec SpecError), never a traceback, and an accepted value must render objects that
still validate.

For each stack (the `trainyard:platform` mapping) every leaf and container, and every key of a mapping, is given
hostile values (empty, blank, a trailing newline, upper case, 300 characters, the wrong type, null, unicode, ...);
`infra.spec.validate` classifies each edit: accepted, refused cleanly, refused with an ugly message (several lines,
no field path, Python or pydantic noise) or a bug (any other exception). With `--render N`, up to N accepted edits
per stack that look wrong (upper case, blanks, unicode, empty text) are run through the program and every check,
as `trainyard validate` does: an error there is a bug too (the stack should have refused the value).

    python -m benchmarks.stack_fuzz [--stacks local aws-prod] [--render 8] [--crds ../shared/crds] [--quiet]
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.spec import SpecError, validate
from infra.spec.input.load import PLATFORM_KEY, read_stack_config, stack_names

ROOT = Path(__file__).resolve().parents[1]
Path_ = tuple[str | int, ...]
# What a user must never read in a one-line error: Python's or pydantic's own words.
NOISE = re.compile(r"<class|Traceback|pydantic|input_value=|input_type=|For further information|errors\.pydantic|"
                   r"\bNone\b|\bdict\[|\blist\[|Field required|Input should")
UNKNOWN_KEY = "zzUnknownKey"

STRING_EDITS: dict[str, Any] = {
    "empty": "", "blank": " ", "newline": None, "upper": None, "long": "a" * 300, "number": 7, "null": None,
    "list": ["x"], "map": {"x": "y"}, "accent": "é", "math": "\U0001d501", "space": None, "dash": "-",
}
NUMBER_EDITS: dict[str, Any] = {
    "zero": 0, "minus": -1, "huge": 10**30, "float": 1.5, "text": "1", "bool": True, "null": None,
}
BOOL_EDITS: dict[str, Any] = {"yes": "yes", "one": 1, "null": None}
# Keys a user names (pools, teams, clusters, ...) are strings like any other.
KEY_EDITS = ("empty", "blank", "newline", "upper", "long", "accent", "math", "space", "dash")


@dataclass(frozen=True)
class Edit:
    path: Path_
    kind: str  # what the node was: str, number, bool, list, map, key
    name: str  # which hostile edit
    raw: dict[str, Any]

    def where(self) -> str:
        return PLATFORM_KEY + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path)


def string_edits(value: str) -> dict[str, Any]:
    derived = {"newline": value + "\n", "upper": value.upper() if value.upper() != value else "UPPER",
               "space": (value[:1] + " " + value[1:]) if value else "a b"}
    return {name: derived.get(name, edit) for name, edit in STRING_EDITS.items()}


def hostile(value: Any) -> tuple[str, dict[str, Any]]:
    """The node's kind and its hostile replacements by name."""
    if isinstance(value, bool):
        return "bool", BOOL_EDITS
    if isinstance(value, int | float):
        return "number", NUMBER_EDITS
    if isinstance(value, str):
        return "str", string_edits(value)
    if isinstance(value, list):
        edits: dict[str, Any] = {"empty": [], "null-item": [None], "string": "x"}
        if value:
            edits["duplicate"] = [*value, copy.deepcopy(value[0])]
        return "list", edits
    if isinstance(value, dict):
        return "map", {"empty": {}, "unknown-key": {**value, UNKNOWN_KEY: 1}, "string": "x", "null": None}
    return "other", {}


def nodes(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every node below the root, parents before children."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield (*path, key), child
        yield from nodes(child, (*path, key))


def _copy_and_parent(raw: dict[str, Any], path: Path_) -> tuple[dict[str, Any], Any]:
    """A deep copy of the mapping, and the node that holds `path` in it."""
    out = copy.deepcopy(raw)
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    return out, parent


def replaced(raw: dict[str, Any], path: Path_, new: Any) -> dict[str, Any]:
    out, parent = _copy_and_parent(raw, path)
    parent[path[-1]] = copy.deepcopy(new)
    return out


def renamed(raw: dict[str, Any], path: Path_, key: str) -> dict[str, Any]:
    """The mapping with the key at `path` renamed, its place kept (ordering can matter to a message)."""
    out, parent = _copy_and_parent(raw, path)
    items = list(parent.items())
    parent.clear()
    parent.update((key if k == path[-1] else k, v) for k, v in items)
    return out


def edits(raw: dict[str, Any]) -> Iterator[Edit]:
    """Every hostile edit of a platform mapping, one at a time, in a stable order."""
    for path, value in nodes(raw):
        kind, by_name = hostile(value)
        for name, new in by_name.items():
            yield Edit(path, kind, name, replaced(raw, path, new))
        if isinstance(path[-1], str):
            keys = string_edits(path[-1])
            for name in KEY_EDITS:
                yield Edit(path, "key", name, renamed(raw, path, keys[name]))


def ugliness(error: SpecError) -> str | None:
    """Why a refusal's message falls short of one line naming the field path, or None."""
    text = str(error)
    if len(text.splitlines()) > 1:
        return "several lines"
    if not error.path:
        return "no field path"
    noise = NOISE.search(text)
    return f"noise {noise.group(0)!r}" if noise else None


def classify(edit: Edit, stack: str) -> tuple[str, str]:
    """('accepted' | 'refused' | 'ugly' | 'bug', detail)."""
    try:
        validate(edit.raw, stack)
    except SpecError as error:
        problem = ugliness(error)
        return ("ugly", f"{problem}: {str(error)!r}") if problem else ("refused", str(error))
    except Exception as error:
        return "bug", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return "accepted", ""


# Accepted edits worth running through the program: values a name, a path or a namespace should not take.
SUSPECT = {"empty", "blank", "newline", "upper", "accent", "math", "space", "dash", "long"}


def rendered_errors(edit: Edit, stack: str, crds: Path | None) -> list[str]:
    """The error findings of `trainyard validate` on the edited stack (or the exception the run raised)."""
    from infra.checks.catalogue import run_checks
    from infra.offline import engine

    try:
        platform = validate(edit.raw, stack)
        capture = engine.run(stack, {PLATFORM_KEY: edit.raw})
        return [f.line() for f in run_checks(platform, capture, crds) if f.severity == "error"]
    except SpecError as error:
        return [f"refused at run time: {error}"]
    except Exception as error:
        return [f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"]


def sweep(stack: str, render: int, crds: Path | None, quiet: bool) -> Counter[str]:
    raw = read_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")[PLATFORM_KEY]
    counts: Counter[str] = Counter()
    suspects: list[Edit] = []
    for edit in edits(raw):
        verdict, detail = classify(edit, stack)
        counts[verdict] += 1
        if verdict in ("bug", "ugly"):
            print(f"  {verdict.upper():4} {stack} {edit.where()} [{edit.kind} {edit.name}]: {detail}")
        elif verdict == "accepted" and edit.name in SUSPECT and edit.kind in ("str", "key"):
            suspects.append(edit)
            if not quiet:
                print(f"  accepted {stack} {edit.where()} [{edit.kind} {edit.name}]")
    # One suspect per field, so that a small budget still covers many fields.
    first: dict[Path_, Edit] = {}
    for edit in suspects:
        first.setdefault(edit.path, edit)
    for edit in list(first.values())[:render]:
        errors = rendered_errors(edit, stack, crds)
        counts["rendered"] += 1
        if errors:
            counts["render-bug"] += 1
            print(f"  RENDER {stack} {edit.where()} [{edit.kind} {edit.name}]: {errors[0]}"
                  + (f" (+{len(errors) - 1})" if len(errors) > 1 else ""))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stacks", nargs="*", default=stack_names(ROOT))
    parser.add_argument("--render", type=int, default=0, help="accepted suspect edits per stack to run and check")
    parser.add_argument("--crds", type=Path, default=None)
    parser.add_argument("--quiet", action="store_true", help="do not list the accepted suspect edits")
    args = parser.parse_args()
    total: Counter[str] = Counter()
    for stack in args.stacks:
        start = time.process_time()
        counts = sweep(stack, args.render, args.crds, args.quiet)
        total += counts
        tried = sum(counts[k] for k in ("accepted", "refused", "ugly", "bug"))
        print(f"{stack}: {tried} edits, {counts['accepted']} accepted, {counts['refused']} refused cleanly, "
              f"{counts['ugly']} ugly, {counts['bug']} bugs; rendered {counts['rendered']}, "
              f"{counts['render-bug']} failing ({time.process_time() - start:.1f} s CPU)")
    tried = sum(total[k] for k in ("accepted", "refused", "ugly", "bug"))
    print(f"all: {tried} edits, {total['accepted']} accepted, {total['refused']} refused cleanly, "
          f"{total['ugly']} ugly, {total['bug']} bugs; rendered {total['rendered']}, {total['render-bug']} failing")
    sys.exit(1 if total["bug"] or total["ugly"] or total["render-bug"] else 0)


if __name__ == "__main__":
    main()
