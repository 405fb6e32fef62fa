"""The survivors of a mutation run judged equivalent, kept as data (benchmarks/mutation_judged/<module>.toml), and
each survivor's mutated line read from mutmut's mutants tree, so a judgment is checked against the mutant it names:
a judgment whose mutant now reads differently (the module changed and mutmut numbered its mutants anew) or is no
longer a survivor (a test kills it now) is stale, and a survivor without one is unjudged.

A judgment file:

    [reasons]                                  # optional: reasons only this file uses
    retain-only = "whenDeleted is only compared with 'Retain' ..."

    [mutants.x__volume_claims__mutmut_77]      # the mutant's name without its module's prefix
    mutated = '... the mutant's "+" lines, stripped, joined with " / " ...'
    why = "retain-only"                        # a key of [reasons] here or in _reasons.toml, or a sentence
"""

from __future__ import annotations

import ast
import difflib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

JUDGED = Path(__file__).resolve().parent / "mutation_judged"
SHARED_REASONS = "_reasons.toml"
ORIGINAL = "__mutmut_orig"


@dataclass(frozen=True)
class Judgment:
    mutated: str
    why: str


class JudgmentError(ValueError):
    """A judgment file that does not parse or names a reason nobody wrote."""


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise JudgmentError(f"{path.name}: {error}") from None


def judgments(folder: Path = JUDGED) -> dict[str, Judgment]:
    """Full mutant name -> its judgment, from every judgment file, each `why` resolved to its reason's text."""
    shared = _read(folder / SHARED_REASONS).get("reasons", {})
    found: dict[str, Judgment] = {}
    for path in sorted(folder.glob("*.toml")):
        if path.name == SHARED_REASONS:
            continue
        data = _read(path)
        unknown = set(data) - {"reasons", "mutants"}
        if unknown:
            tables = ", ".join(sorted(unknown))
            raise JudgmentError(f"{path.name}: unknown table(s) {tables} (only [reasons] and [mutants])")
        reasons = shared | data.get("reasons", {})
        for key, entry in data.get("mutants", {}).items():
            where = f"{path.name}: mutants.{key}"
            if set(entry) != {"mutated", "why"}:
                raise JudgmentError(f"{where}: give exactly `mutated` and `why`")
            why = str(entry["why"])
            if " " not in why and why not in reasons:
                raise JudgmentError(f"{where}: why = {why!r} is no reason of this file nor of {SHARED_REASONS}")
            found[f"{path.stem}.{key}"] = Judgment(str(entry["mutated"]), reasons.get(why, why))
    return found


@cache
def _functions(path: Path) -> dict[str, str]:
    """Every function's (and method's) name -> its source lines, in one mutated module (read once: a module's
    mutants file holds all its mutants, megabytes for the webhooks)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno])
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def mutated_line(mutants: Path, name: str) -> str:
    """What a mutant changes: its "+" lines against the original function, stripped and joined with " / " (its "-"
    lines, marked `deleted:`, when it only removes). `name` is mutmut's full mutant name."""
    module, _, key = name.rpartition(".")
    base = mutants / Path(*module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    functions = _functions(path)
    function = key.rsplit("__mutmut_", 1)[0]
    original, mutant = functions[function + ORIGINAL], functions[key].replace(key, function + ORIGINAL, 1)
    diff = list(difflib.unified_diff(original.splitlines(), mutant.splitlines(), n=0, lineterm=""))[2:]
    added = [line[1:].strip() for line in diff if line.startswith("+")]
    removed = [line[1:].strip() for line in diff if line.startswith("-")]
    return " / ".join(added) if added else "deleted: " + " / ".join(removed)


@dataclass(frozen=True)
class Verdicts:
    judged: dict[str, str]         # survivor -> why it is equivalent
    unjudged: dict[str, str]       # survivor -> its mutated line
    stale: dict[str, str]          # judged name -> what is wrong with its judgment


def verdicts(survivors: list[str], mutants: Path, prefix: str, known: dict[str, Judgment],
             timeouts: Sequence[str] = ()) -> Verdicts:
    """The survivors of one guarded module (names starting with `prefix`) against the judgments. A judged mutant
    that ran into the CPU-time limit this time is not stale: a timeout depends on the machine's load."""
    judged: dict[str, str] = {}
    unjudged: dict[str, str] = {}
    stale: dict[str, str] = {}
    for name in survivors:
        line = mutated_line(mutants, name)
        judgment = known.get(name)
        if judgment is None:
            unjudged[name] = line
        elif judgment.mutated != line:
            stale[name] = f"judged {judgment.mutated!r}, the mutant now reads {line!r}"
        else:
            judged[name] = judgment.why
    gone = sorted(name for name in known if name.startswith(prefix) and name not in survivors and name not in timeouts)
    stale |= {name: "no longer survives: remove its judgment" for name in gone}
    return Verdicts(judged, unjudged, stale)
