"""`trainyard diff`: a pull request's change shows up as a unified diff of the rendered objects."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infra.review import diff
from infra.review.diff import diff_stack
from infra.spec import SpecError
from tests.conftest import ROOT


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def test_a_quota_change_is_shown_as_a_diff(clone: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diff, "cached", lambda kind, key, compute: compute())  # the base renders, cached or not
    stack = clone / "stacks" / "Pulumi.onprem-lab.yaml"
    text = stack.read_text(encoding="utf-8")
    assert "quota: {h100: 12, l40s: 8}" in text
    stack.write_text(text.replace("quota: {h100: 12, l40s: 8}", "quota: {h100: 10, l40s: 8}"), encoding="utf-8")
    assert diff_stack(clone, "onprem-lab", "HEAD") == 0
    out = capsys.readouterr().out
    assert "+++ b/manifests/_cluster/ClusterQueue-nlp.yaml" in out
    assert "nominalQuota: '12'" in out and "nominalQuota: '10'" in out
    removed = [line for line in out.splitlines() if line.startswith("-") and "nominalQuota: '12'" in line]
    added = [line for line in out.splitlines() if line.startswith("+") and "nominalQuota: '10'" in line]
    assert removed and added
    assert "# risk:" not in out  # a quota change loses nothing


def test_removing_a_team_lists_its_namespaces_and_volumes_as_risks_first(clone: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    stack = clone / "stacks" / "Pulumi.onprem-lab.yaml"
    text = stack.read_text(encoding="utf-8")
    team = text[text.index("      speech:\n"):text.index("    # Every runtime in runtimes/")]
    assert "namespaces: [speech, speech-eval]" in team
    stack.write_text(text.replace(team, ""), encoding="utf-8")
    assert diff_stack(clone, "onprem-lab", "HEAD") == 0
    out = capsys.readouterr().out.splitlines()
    risks = [line for line in out if line.startswith("# risk:")]
    assert out[:len(risks)] == risks  # above the diff
    assert len(risks) == 3 and "Namespace speech is deleted" in risks[0] and "speech-eval" in risks[1]
    assert "speech/checkpoints: its volume stays as a Released PersistentVolume (reclaimPolicy Retain)" in risks[0]
    # its models namespace, whose registry database's volume is retained as well
    assert "Namespace speech-models is deleted" in risks[2]
    assert "speech-models/metadata-mysql: its volume stays as a Released PersistentVolume" in risks[2]


def test_a_work_tree_that_does_not_load_stops_the_diff_naming_the_field(clone: Path) -> None:
    stack = clone / "stacks" / "Pulumi.local.yaml"
    text = stack.read_text(encoding="utf-8")
    assert "    storage: {profile: nfs" in text
    stack.write_text(text.replace("    storage: {profile: nfs", "    storag: {profile: nfs", 1), encoding="utf-8")
    with pytest.raises(SpecError, match=r"storag\b.*storage"):
        diff_stack(clone, "local", "HEAD")
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=clone, capture_output=True, text=True, check=True)
    assert len(worktrees.stdout.splitlines()) == 1, worktrees.stdout  # the base revision's tree is removed


def test_an_unchanged_tree_has_no_diff_and_its_base_is_rendered_once(clone: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert diff_stack(clone, "local", "HEAD") == 0
    assert capsys.readouterr().out == "# local: 0 file(s) differ between HEAD and the work tree\n"
    starts: list[Path] = []
    monkeypatch.setattr(diff, "_start_render", lambda tree, *_: starts.append(tree))  # a base render would fail
    assert diff_stack(clone, "local", "HEAD") == 0
    assert starts == [] and capsys.readouterr().out == "# local: 0 file(s) differ between HEAD and the work tree\n"


def test_the_base_is_known_by_its_files_the_stack_and_what_runs_it(clone: Path, tmp_path: Path) -> None:
    key = diff._base_key(clone, "HEAD", "local")
    assert key == diff._base_key(clone, "HEAD", "local") != diff._base_key(clone, "HEAD", "onprem-lab")
    stack = clone / "stacks" / "Pulumi.local.yaml"
    stack.write_text(stack.read_text(encoding="utf-8") + "# reviewed\n", encoding="utf-8")
    assert diff._base_key(clone, "HEAD", "local") == key  # the work tree is not the base
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "edit"], cwd=clone,
                   check=True)
    assert diff._base_key(clone, "HEAD", "local") != key
    outside = tmp_path / "Pulumi.x.yaml"  # a stack file the revision does not hold counts by its content
    for named in (str(outside), os.path.relpath(outside, clone)):
        outside.write_text("config: {}\n", encoding="utf-8")
        before = diff._base_key(clone, "HEAD", named)
        outside.write_text("config: {a: 1}\n", encoding="utf-8")
        assert diff._base_key(clone, "HEAD", named) != before, named
