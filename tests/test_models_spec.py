"""The stack's `models` section and the teams' `serving` budgets (infra/spec/models/model.py): each bad input refused
with one line naming the field path (exit 2, nothing run), its nearest valid neighbour accepted. The rendered
registries: tests/test_model_registry.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.spec.input.keys import PLATFORM_KEY
from tests.conftest import raw_platform, write_stack
from tests.edits import Edit, drop_at, refused_then_accepted, render_refusal, set_at

# (case, stack, the refused edit, its nearest valid neighbour, the field path, words of the fix)
CASES: list[tuple[str, str, Edit, Edit, str, tuple[str, ...]]] = [
    ("models without a front door", "local", drop_at("frontDoor", "pipelines"),
     drop_at("frontDoor", "pipelines", "models", "teams.demo.serving"), "models", ("frontDoor",)),
    ("serving without models", "local", drop_at("models"), drop_at("models", "teams.demo.serving"),
     "teams.demo.serving", ("models",)),
    ("an unknown pool", "local", set_at("teams.demo.serving.pool", "tpu"), set_at("teams.demo.serving.pool", "gpu"),
     "teams.demo.serving.pool", ("tpu", "cpu, gpu")),
    ("gpus on a CPU pool", "local", set_at("teams.demo.serving.gpus", 1),
     lambda raw: raw["teams"]["demo"]["serving"].update(pool="gpu", gpus=1), "teams.demo.serving.gpus",
     ("no GPUs",)),
    ("a registry version not vendored", "aws-prod", set_at("models.registry.version", "0.3.8"),
     set_at("models.registry.version", "0.3.7"), "models.registry.version", ("0.3.8", "0.3.7", "vendored")),
    ("a serving version not vendored", "aws-prod", set_at("models.serving.version", "0.17.0"),
     set_at("models.serving.version", "0.16.0"), "models.serving.version", ("0.16.0",)),
    ("the database on a Delete class", "aws-prod", set_at("models.registry.database.storageClass", "block"),
     set_at("models.registry.database.storageClass", "checkpoints"), "models.registry.database.storageClass",
     ("Delete", "Retain")),
]


@pytest.mark.parametrize(("stack", "refused", "accepted", "path", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_refused_with_its_path_and_the_neighbour_accepted(stack: str, refused: Edit, accepted: Edit, path: str,
                                                          words: tuple[str, ...]) -> None:
    refused_then_accepted(stack, refused, accepted, path, words)


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize(("stack", "refused", "path"), [(c[1], c[2], c[4]) for c in CASES], ids=[c[0] for c in CASES])
def test_cli_exits_2_with_one_line_and_writes_nothing(stack: str, refused: Edit, path: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(stack)
    refused(raw)
    line, out_dir = render_refusal(write_stack(tmp_path, raw, "models"), tmp_path, capsys)
    assert f"{PLATFORM_KEY}.{path}" in line, line
    assert not out_dir.exists()
