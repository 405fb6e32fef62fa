"""Every `trainyard ...` command written in README.md and docs/*.md (shell blocks and inline `.venv/bin/trainyard`
spans) parses with the real command line and names a stack that exists; those that run offline (plan, validate,
render, team add) are run as written on the stack they name and must exit 0, as the docs promise. verify needs a
live cluster, diff a git remote, and docs rewrites the pages (tests/test_docs.py checks them): parsed only."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from infra.commands import main, parser
from tests.conftest import ALL_STACKS, CRDS, ROOT, stack_file

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(?:sh|bash|shell|console)?\n(.*?)```", re.S)
INLINE = re.compile(r"(?<!`)`(\.venv/bin/trainyard [^`]+)`(?!`)")
COMMAND = re.compile(r"^(?:\$ )?(?:\.venv/bin/)?trainyard\s+(.+)$")
SHELL_OPERATOR = re.compile(r"\s+(?:[0-9]*[<>]|\||&&|;)")
OFFLINE = {"plan", "validate", "render", "team"}


def command_words(line: str) -> tuple[str, ...]:
    """The words trainyard receives: the shell's redirections, pipes and command lists are the shell's."""
    return tuple(shlex.split(SHELL_OPERATOR.split(line, maxsplit=1)[0], comments=True))


def test_shell_operators_end_the_command() -> None:
    assert command_words("images onprem-lab > images.txt") == ("images", "onprem-lab")
    assert command_words("plan local --out 'a b' | tee x  # note") == ("plan", "local", "--out", "a b")
    assert command_words("validate aws-prod 2>&1") == ("validate", "aws-prod")
    assert command_words("plan local && echo ok; ls") == ("plan", "local")


def documented() -> list[tuple[str, tuple[str, ...]]]:
    found: dict[tuple[str, ...], str] = {}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        lines = [line.strip() for block in BLOCK.findall(text) for line in block.replace("\\\n", " ").splitlines()]
        lines += INLINE.findall(text)
        for line in lines:
            match = COMMAND.match(line)
            if match and "<" not in match.group(1):  # `<stack>`, `<ctx>`: a template, not a command
                found.setdefault(command_words(match.group(1)), doc.name)
    return sorted((doc, argv) for argv, doc in found.items())


COMMANDS = documented()


def test_the_docs_show_commands_of_every_offline_kind() -> None:
    assert {argv[0] for _, argv in COMMANDS} >= {"plan", "validate", "team"}


@pytest.mark.parametrize(("doc", "argv"), COMMANDS, ids=[f"{d}: {' '.join(a)}" for d, a in COMMANDS])
def test_each_documented_command_parses_and_names_a_stack(doc: str, argv: tuple[str, ...]) -> None:
    args = parser().parse_args(list(argv))
    stack = getattr(args, "stack", None)
    assert stack is None or stack in ALL_STACKS, f"{doc}: {' '.join(argv)} names no stack of stacks/"


RUNNABLE = [(doc, argv) for doc, argv in COMMANDS if argv[0] in OFFLINE and "/tmp/" not in " ".join(argv)]


@pytest.mark.parametrize(("doc", "argv"), RUNNABLE, ids=[f"{d}: {' '.join(a)}" for d, a in RUNNABLE])
def test_each_offline_command_runs_as_written(doc: str, argv: tuple[str, ...], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    command = list(argv)
    if command[0] == "team":  # edits the stack file: run it on a copy of the stack it names
        copy = tmp_path / f"Pulumi.{command[2]}.yaml"
        shutil.copy(stack_file(command[2]), copy)
        command[2] = str(copy)
    if "--crds" in command:
        if not CRDS.is_dir():
            pytest.skip(f"{CRDS} not present")
        command[command.index("--crds") + 1] = str(CRDS)
    if "--out" in command:
        command[command.index("--out") + 1] = str(tmp_path / "out")
    code = main(command)
    out, err = capsys.readouterr()
    assert code == 0, f"{doc}: trainyard {' '.join(argv)} exited {code}: {err}{out[-2000:]}"
