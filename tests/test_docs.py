"""Generated docs: written from the stack, checked for staleness, and complete for every stack."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra.commands.docs import run
from infra.docs.reference import stack_reference
from infra.spec.platform import PlatformSpec
from tests.conftest import ALL_STACKS, capture_of, platform_of, stack_file

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run


def test_docs_check_fails_when_a_stack_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stacks").mkdir()
    shutil.copy(stack_file("local"), tmp_path / "stacks" / "Pulumi.local.yaml")
    assert run(tmp_path, None, check=True) == 1  # nothing generated yet
    assert run(tmp_path, None, check=False) == 0
    assert run(tmp_path, None, check=True) == 0
    stack = tmp_path / "stacks" / "Pulumi.local.yaml"
    stack.write_text(stack.read_text(encoding="utf-8").replace("perNode: 2", "perNode: 1"), encoding="utf-8")
    capsys.readouterr()
    assert run(tmp_path, None, check=True) == 1
    assert "stale: docs/stacks/local.md" in capsys.readouterr().out


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_stack_page_names_every_pool_team_and_chart(stack: str) -> None:
    from infra.docs.stack import stack_page

    platform, capture = platform_of(stack), capture_of(stack)
    page = stack_page(platform, capture)
    for pool in platform.spec.pools:
        assert f"| {pool} |" in page
    for team in platform.spec.teams:
        assert f"| {team} |" in page
    for record in capture.resources:
        if record.type.startswith("kubernetes:helm.sh/"):
            assert f"| {record.name} |" in page


def test_reference_lists_every_top_level_key() -> None:
    text = stack_reference()
    for key in PlatformSpec.model_json_schema(by_alias=True)["properties"]:
        assert f"| `{key}` |" in text


def test_committed_docs_are_current() -> None:
    """CI fails when someone changes a stack or the schema without regenerating the docs (the runs: repo_runs)."""
    from tests.conftest import ROOT

    assert run(ROOT, None, check=True) == 0, "run `trainyard docs` and commit docs/"
