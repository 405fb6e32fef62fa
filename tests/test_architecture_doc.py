"""docs/architecture.md's "Where does my change go" table names files that exist, for every kind of change the
issue asks about; and every repository path the hand-written docs mention exists (a moved module breaks the test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.kit.paths import DOCS, ROOT

ARCHITECTURE = DOCS / "architecture.md"
KINDS = ("command", "check", "component", "cloud", "runtime", "policy", "stack field")
TOP = "infra|policies|tests|scripts|benchmarks|runtimes|examples|stacks|docs"
PATH = re.compile(rf"(?<![\w./-])((?:{TOP})/[A-Za-z0-9_./<>*-]*)")
HAND_WRITTEN = sorted({*DOCS.glob("*.md"), ROOT / "README.md", ROOT / "policies" / "README.md",
                       ROOT / "runtimes" / "README.md", ROOT / "examples" / "README.md"}
                      - {DOCS / "stack-reference.md", DOCS / "checks.md", DOCS / "access-matrix.md"})


def _table() -> dict[str, list[str]]:
    section = ARCHITECTURE.read_text(encoding="utf-8").split("## Where does my change go", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0].strip(): [p for p in re.findall(r"`([^`]+)`", cells[1]) if "/" in p] for cells in rows[1:]}


def _exists(path: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/.,:;"))
    return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / pattern).exists()


def test_the_table_covers_every_kind_of_change() -> None:
    rows = _table()
    for kind in KINDS:
        assert any(kind in row for row in rows), f"no row for adding a {kind}"
    assert all(rows.values()), "a row names no file"


@pytest.mark.parametrize("path", sorted({p for paths in _table().values() for p in paths}))
def test_each_path_in_the_table_exists(path: str) -> None:
    assert _exists(path), f"docs/architecture.md names {path}, which is not in the repository"


def test_a_missing_path_is_noticed() -> None:
    assert _exists("infra/commands/<name>.py")
    assert not _exists("infra/offline/checks.py")  # where the checks lived before infra/checks/


@pytest.mark.parametrize("doc", HAND_WRITTEN, ids=[str(d.relative_to(ROOT)) for d in HAND_WRITTEN])
def test_paths_the_docs_mention_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8").replace("&lt;", "<").replace("&gt;", ">").replace("$PULUMI_STACK", "<stack>")
    missing = [p for p in sorted(set(PATH.findall(text))) if not p.endswith("-") and not _exists(p)]
    assert missing == [], f"{doc.relative_to(ROOT)} mentions paths that do not exist: {missing}"
