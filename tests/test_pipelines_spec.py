"""The stack's `pipelines` section (infra/spec/pipelines/model.py): each bad input refused with one line naming the
field path and the fix (exit 2, nothing run), its nearest valid neighbour accepted; manager-only on a multi-cluster
stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.offline import engine
from infra.spec.input.keys import PIPELINES_DB_PASSWORD_KEY, PLATFORM_KEY
from infra.spec.pipelines.model import VENDORED_VERSIONS
from tests.conftest import platform_of, raw_platform, write_config
from tests.edits import Edit, drop_at, refused_then_accepted, render_refusal, set_at

# (case, stack, the refused edit, its nearest valid neighbour, the field path, words of the fix)
CASES: list[tuple[str, str, Edit, Edit, str, tuple[str, ...]]] = [
    ("unvendored version", "aws-prod", set_at("pipelines.version", "2.17.0"), set_at("pipelines.version", "2.16.0"),
     "pipelines.version", ("2.17.0", "2.16.0", "vendored")),
    ("an older version", "aws-prod", set_at("pipelines.version", "2.15.0"), set_at("pipelines.version", "2.16.0"),
     "pipelines.version", ("2.16.0",)),
    ("no front door", "onprem-lab", drop_at("frontDoor"), drop_at("pipelines"), "pipelines", ("frontDoor",)),
    ("database on scratch", "onprem-lab", set_at("pipelines.database.storageClass", "scratch"),
     set_at("pipelines.database.storageClass", "checkpoints"), "pipelines.database.storageClass",
     ("temporary", "checkpoints")),
    ("database on a Delete class", "aws-prod", set_at("pipelines.database.storageClass", "block"),
     set_at("pipelines.database.storageClass", "checkpoints"), "pipelines.database.storageClass",
     ("Delete", "Retain")),
    ("definitions on a Delete class", "onprem-lab", set_at("pipelines.definitions.storageClass", "block"),
     set_at("pipelines.definitions.storageClass", "checkpoints"), "pipelines.definitions.storageClass", ("Retain",)),
    ("database on a bucket mount", "gcp-prod", set_at("pipelines.database.storageClass", "datasets"),
     set_at("pipelines.database.storageClass", "checkpoints"), "pipelines.database.storageClass", ("bucket",)),
    ("no such class", "local", set_at("pipelines.database.storageClass", "fast-ssd"),
     set_at("pipelines.database.storageClass", "datasets"), "pipelines.database.storageClass",
     ("fast-ssd", "checkpoints")),
    ("size not a quantity", "local", set_at("pipelines.database.size", "lots"),
     set_at("pipelines.database.size", "5Gi"), "pipelines.database.size", ()),
    ("unknown key", "local", set_at("pipelines.database.replicas", 3), set_at("pipelines.database.size", "1Gi"),
     "pipelines.database.replicas", ()),
    ("no version", "local", set_at("pipelines", {"database": {"size": "5Gi"}}),
     set_at("pipelines", {"version": "2.16.0"}), "pipelines.version", ()),
]


@pytest.mark.parametrize(("stack", "refused", "accepted", "path", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_refused_with_its_path_and_the_neighbour_accepted(stack: str, refused: Edit, accepted: Edit, path: str,
                                                          words: tuple[str, ...]) -> None:
    refused_then_accepted(stack, refused, accepted, path, words)


def test_the_vendored_version_is_the_archive_s() -> None:
    assert VENDORED_VERSIONS == ("2.16.0",)
    assert all(platform_of(s).pipelines is not None for s in ("local", "onprem-lab", "aws-prod", "gcp-prod",
                                                              "azure-prod"))


def _with(stack: str, edit: Edit) -> dict[str, Any]:
    raw = raw_platform(stack)
    edit(raw)
    return raw


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(("config", "words"), [
    ({PLATFORM_KEY: _with("aws-prod", set_at("pipelines.version", "9.9.9"))}, ("pipelines.version", "2.16.0")),
    ({PLATFORM_KEY: _with("onprem-lab", set_at("pipelines.database.storageClass", "scratch"))},
     ("pipelines.database.storageClass", "temporary")),
    ({PLATFORM_KEY: _with("local", drop_at("frontDoor"))}, ("pipelines", "frontDoor")),
    # the root password in plaintext, which Pulumi would hand back unencrypted
    ({PLATFORM_KEY: raw_platform("local"), PIPELINES_DB_PASSWORD_KEY: "hunter2-but-long"},
     (PIPELINES_DB_PASSWORD_KEY, "secret")),
], ids=["version", "ephemeral class", "no front door", "password in plaintext"])
def test_cli_exits_2_with_one_line_and_writes_nothing(config: dict[str, Any], words: tuple[str, ...],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line, out_dir = render_refusal(write_config(tmp_path, config, "kfp"), tmp_path, capsys)
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    assert not out_dir.exists()


def test_an_empty_password_is_refused_by_the_program() -> None:
    with pytest.raises(Exception, match=f"{PIPELINES_DB_PASSWORD_KEY}: is empty"):
        engine.run("local", {PLATFORM_KEY: raw_platform("local"), PIPELINES_DB_PASSWORD_KEY: " "})


def test_pipelines_run_on_the_manager_only() -> None:
    hybrid = platform_of("hybrid-burst").hybrid
    assert hybrid is not None
    assert {name: member.pipelines is not None for name, member in hybrid.clusters.items()} == \
        {"core": True, "burst": False}
