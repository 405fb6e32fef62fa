"""`--help` of the command and of every subcommand documents each argument and ends with the exit codes."""

from __future__ import annotations

import argparse

import pytest

from infra.commands import parser
from infra.commands.common import EXIT_CODES


def _commands(command: argparse.ArgumentParser, name: str = "trainyard") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, command)]
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                found += _commands(child, f"{name} {child_name}")
    return found


COMMANDS = _commands(parser())


def test_every_subcommand_is_found() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"trainyard plan", "trainyard render", "trainyard validate", "trainyard diff", "trainyard docs",
            "trainyard verify", "trainyard team add"} <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_help_documents_every_argument_and_the_exit_codes(name: str, command: argparse.ArgumentParser) -> None:
    undocumented = [action.dest for action in command._actions
                    if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and not action.help]
    assert undocumented == [], f"{name}: arguments without help: {undocumented}"
    text = command.format_help()
    assert EXIT_CODES in text
    for code in ("0 ", "1 ", "2 ", "3 "):
        assert f"\n  {code}" in text
