"""Judged-equivalent mutants (benchmarks/mutation_judging.py): the shipped judgments parse and name real reasons, and
a judgment holds only while its mutant still survives and still reads as judged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.mutation_judging import JUDGED, Judgment, JudgmentError, judgments, mutated_line, verdicts
from benchmarks.mutation_score import GUARDED, folder

MUTANTS_FILE = '''
def x_pick__mutmut_orig(values, default=""):
    first = values.get("a", default)
    return first or "none"


def x_pick__mutmut_1(values, default=""):
    first = values.get("a", None)
    return first or "none"


def x_pick__mutmut_2(values, default=""):
    first = values.get("a", default)


class Cohort:
    def xǁCohortǁsize__mutmut_orig(self):
        return sum(self.items, start=0)

    def xǁCohortǁsize__mutmut_3(self):
        return sum(self.items, )
'''


@pytest.fixture()
def mutants(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(MUTANTS_FILE, encoding="utf-8")
    (tmp_path / "pkg" / "__init__.py").write_text(MUTANTS_FILE, encoding="utf-8")
    return tmp_path


def _folder(tmp_path: Path, body: str, shared: str = '[reasons]\nsame = "same result"\n') -> Path:
    (tmp_path / "_reasons.toml").write_text(shared, encoding="utf-8")
    (tmp_path / "pkg.mod.toml").write_text(body, encoding="utf-8")
    return tmp_path


def test_the_shipped_judgments_parse_and_each_judges_a_guarded_module_with_a_reason() -> None:
    found = judgments()
    prefixes = tuple(folder(module).name + "." for module in GUARDED)
    assert found and all(name.startswith(prefixes) for name in found)
    assert all(judgment.mutated and len(judgment.why) > 20 for judgment in found.values())
    # each file is named after the module it judges
    assert {path.stem for path in JUDGED.glob("*.toml")} - {"_reasons"} == {name.rsplit(".", 1)[0] for name in found}


def test_a_mutant_reads_as_its_changed_lines(mutants: Path) -> None:
    assert mutated_line(mutants, "pkg.mod.x_pick__mutmut_1") == 'first = values.get("a", None)'
    assert mutated_line(mutants, "pkg.mod.xǁCohortǁsize__mutmut_3") == "return sum(self.items, )"
    assert mutated_line(mutants, "pkg.mod.x_pick__mutmut_2") == 'deleted: return first or "none"'
    # a package's own module is its __init__.py
    assert mutated_line(mutants, "pkg.x_pick__mutmut_1") == 'first = values.get("a", None)'


def test_a_survivor_is_judged_only_while_it_reads_as_judged(mutants: Path) -> None:
    line = 'first = values.get("a", None)'
    assert verdicts(["pkg.mod.x_pick__mutmut_1"], mutants, "pkg.mod.",
                    {"pkg.mod.x_pick__mutmut_1": Judgment(line, "same")}).judged == {"pkg.mod.x_pick__mutmut_1": "same"}
    renumbered = verdicts(["pkg.mod.x_pick__mutmut_1"], mutants, "pkg.mod.",
                          {"pkg.mod.x_pick__mutmut_1": Judgment("first = values.get('b')", "same")})
    assert not renumbered.judged and "now reads" in renumbered.stale["pkg.mod.x_pick__mutmut_1"]
    unjudged = verdicts(["pkg.mod.x_pick__mutmut_1"], mutants, "pkg.mod.", {})
    assert unjudged.unjudged == {"pkg.mod.x_pick__mutmut_1": line} and not unjudged.judged


def test_a_judgment_whose_mutant_is_killed_now_is_stale_unless_it_timed_out(mutants: Path) -> None:
    known = {"pkg.mod.x_pick__mutmut_2": Judgment("deleted: return first or \"none\"", "same"),
             "other.x_f__mutmut_1": Judgment("x", "same")}
    assert verdicts([], mutants, "pkg.mod.", known).stale == {
        "pkg.mod.x_pick__mutmut_2": "no longer survives: remove its judgment"}
    assert verdicts([], mutants, "pkg.mod.", known, timeouts=["pkg.mod.x_pick__mutmut_2"]).stale == {}


def test_a_reason_key_resolves_to_its_text_here_or_shared(tmp_path: Path) -> None:
    folder = _folder(tmp_path, '[reasons]\nown = "own reason"\n[mutants.x_f__mutmut_1]\nmutated = "a"\nwhy = "own"\n'
                               '[mutants.x_f__mutmut_2]\nmutated = "b"\nwhy = "same"\n'
                               '[mutants.x_f__mutmut_3]\nmutated = "c"\nwhy = "A sentence says it."\n')
    found = judgments(folder)
    assert [found[f"pkg.mod.x_f__mutmut_{n}"].why for n in (1, 2, 3)] == ["own reason", "same result",
                                                                         "A sentence says it."]


@pytest.mark.parametrize("body, error", [
    ('[mutants.x_f__mutmut_1]\nmutated = "a"\nwhy = "nosuchreason"\n', "is no reason"),
    ('[mutants.x_f__mutmut_1]\nmutated = "a"\n', "exactly `mutated` and `why`"),
    ('[mutants.x_f__mutmut_1]\nmutated = "a"\nwhy = "same"\nnote = "x"\n', "exactly `mutated` and `why`"),
    ('[survivors.x_f__mutmut_1]\nmutated = "a"\nwhy = "same"\n', "unknown table(s) survivors"),
    ('[mutants.x_f__mutmut_1\n', "pkg.mod.toml"),
])
def test_a_judgment_file_that_does_not_hold_is_refused(tmp_path: Path, body: str, error: str) -> None:
    with pytest.raises(JudgmentError, match=re.escape(error)):
        judgments(_folder(tmp_path, body))
