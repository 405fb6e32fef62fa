"""The `trainyard` command: one module per subcommand in this package, the parser built from COMMANDS.

Exit codes: 0 clean, 1 findings, 2 bad input, 3 a bug. Bad input prints one line, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from infra.commands.common import BAD_INPUT, EXIT_CODES, FINDINGS, INTERNAL
from infra.offline import engine
from infra.offline.chartcache import ChartCacheError
from infra.spec import SpecError

# Every subcommand, in the order `trainyard --help` lists them: infra/commands/<name>.py, each with register(sub).
# A module is imported when the parser is built; what a command needs at run time it imports when it runs, so
# that one command does not pay for another's imports (the kubernetes client, the offline API server).
COMMANDS = ("plan", "render", "validate", "diff", "docs", "verify", "accept", "admit", "team", "images",
            "simulate", "report")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="trainyard", description="Plan, render and check Trainyard stacks offline.",
                                  epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    _document_exit_codes(top)
    return top


def _document_exit_codes(command: argparse.ArgumentParser) -> None:
    """Every command's and subcommand's --help ends with the exit codes."""
    if EXIT_CODES not in (command.epilog or ""):
        command.epilog = f"{command.epilog}\n\n{EXIT_CODES}" if command.epilog else EXIT_CODES
    command.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _document_exit_codes(child)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (SpecError, ChartCacheError) as error:
        print(f"error: {error}", file=sys.stderr)
        return BAD_INPUT
    except engine.DuplicateResource as error:
        print(f"error: {error}", file=sys.stderr)
        return FINDINGS
    except OSError as error:  # a path the user gave that cannot be read or written
        print(f"error: {error.filename or ''}: {error.strerror or error}: check the path and its permissions",
              file=sys.stderr)
        return BAD_INPUT
    except Exception as error:  # an unexpected failure is a bug: one line, traceback only on request
        if os.environ.get("TRAINYARD_DEBUG"):
            raise
        print(f"internal error: {type(error).__name__}: {error} (set TRAINYARD_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return INTERNAL
