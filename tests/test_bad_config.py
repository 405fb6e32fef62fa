"""Bad stack files: each is refused with one line that names the field, exit 2, and no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.commands import main
from tests.conftest import raw_platform, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = raw
        for key in parents:
            target = target[key]
        target[last] = value
    return edit


def _delete(path: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = raw
        for key in parents:
            target = target[key]
        del target[last]
    return edit


# (case id, edit of the onprem-lab platform mapping, words the one-line error must contain)
CASES: list[tuple[str, Edit, tuple[str, ...]]] = [
    ("unknown top-level key", _set("colour", "blue"), ("trainyard:platform.colour", "unknown key")),
    ("unknown pool key", _set("pools.h100.gpuz", 8), ("pools.h100.gpuz", "unknown key")),
    ("unknown team key", _set("teams.nlp.quotas", {}), ("teams.nlp.quotas", "unknown key")),
    ("quota on a missing pool", _set("teams.nlp.quota", {"a100": 8}), ("teams.nlp.quota.a100", "no pool named")),
    ("team name not a DNS label", _set("teams.Vision_Team", {"quota": {"h100": 1}}), ("Vision_Team", "DNS label")),
    ("pool name not a DNS label", _set("pools.H100", {"gpu": "L4", "perNode": 1, "count": 1}), ("H100", "DNS label")),
    ("namespace not a DNS label", _set("teams.nlp.namespaces", ["NLP"]), ("teams.nlp.namespaces", "DNS label")),
    ("reserved namespace", _set("teams.nlp.namespaces", ["kube-system"]), ("teams.nlp.namespaces", "reserved")),
    ("namespace of two teams", _set("teams.nlp.namespaces", ["vision"]), ("teams.nlp.namespaces", "vision")),
    ("incompatible kueue/trainer", _set("versions", {"kueue": "0.19.4", "trainer": "2.3.0"}),
     ("versions", "incompatible", "kueue 0.19.4 / trainer 2.3.0")),
    ("incompatible trainer/jobset", _set("versions", {"trainer": "2.3.0", "kueue": "0.20.0", "jobset": "0.11.0"}),
     ("versions", "jobset 0.11.0")),
    ("unknown kueue release", _set("versions", {"kueue": "0.19.9"}), ("versions.kueue",)),
    ("kueue release without a chart digest", _set("versions", {"kueue": "0.19.4"}),
     ("versions.kueue", "0.19.4", "kueue-0.19.4.tgz", "scripts/fetch-charts --bump kueue 0.19.4")),
    ("unknown GPU model", _set("pools.h100.gpu", "H900"), ("pools.h100.gpu", "unknown GPU model")),
    ("GPU pool without perNode", _delete("pools.h100.perNode"), ("pools.h100", "perNode")),
    ("negative quota", _set("teams.nlp.quota.h100", -4), ("teams.nlp.quota.h100",)),
    ("GPU quota on the CPU pool", _set("teams.nlp.quota.cpu", 4), ("teams.nlp.quota.cpu", "no GPUs")),
    ("node in two pools", _set("pools.l40s.nodes", ["gpu-a01"]), ("pools.l40s.nodes", "gpu-a01")),
    ("both nodes and count", _set("pools.cpu.count", 3), ("pools.cpu", "not both")),
    ("bad memory quantity", _set("pools.cpu.memory", "lots"), ("pools.cpu.memory", "quantity")),
    ("lending above quota", _set("teams.nlp.quota.h100", {"gpus": 4, "lendingLimit": 6}),
     ("teams.nlp.quota.h100.lendingLimit", "at most")),
    ("unknown runtime", _set("trainer", {"runtimes": ["tensorflow"]}), ("trainer.runtimes", "tensorflow")),
    ("missing cluster", _delete("cluster"), ("trainyard:platform.cluster", "missing")),
    ("two cluster kinds not allowed", _set("cluster", {}), ("cluster", "exactly one")),
    ("bad capacity type", _set("pools.h100.capacityType", "cheap"), ("pools.h100.capacityType",)),
    ("bad taint effect", _set("pools.h100.taints", [{"key": "gpu", "effect": "Sometimes"}]),
     ("pools.h100.taints[0].effect",)),
    ("hostname topology level", _set("pools.h100.topology", {"host": "kubernetes.io/hostname"}),
     ("pools.h100.topology", "hostname")),
    ("drill backup age in days", _set("backup", {"drill": {"maxBackupAge": "2d"}}), ("backup.drill.maxBackupAge",)),
    ("fabric device without an RDMA fabric", _set("pools.l40s.fabricDevice", {"resource": "rdma/hca"}),
     ("pools.l40s", "fabricDevice")),
    ("fabric device not an extended resource", _set("pools.h100.fabricDevice", {"resource": "rdma"}),
     ("pools.h100.fabricDevice.resource", "extended resource")),
]


def _assert_one_clean_line(capsys: pytest.CaptureFixture[str], code: int, words: tuple[str, ...]) -> str:
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}: {err}{out}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "Traceback" not in out
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


@pytest.mark.parametrize(("edit", "words"), [(e, w) for _, e, w in CASES], ids=[c[0] for c in CASES])
def test_bad_platform_exits_2_with_field_path(edit: Edit, words: tuple[str, ...], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    edit(raw)
    path = write_stack(tmp_path, raw)
    _assert_one_clean_line(capsys, main(["plan", str(path)]), words)


@pytest.mark.parametrize(("text", "words"), [
    ("", ("empty",)),
    ("config:\n  trainyard:platform: {cluster: [\n", ("broken YAML", "line")),
    ("just a string\n", ("config",)),
    ("config:\n  other:key: 1\n", ("trainyard:platform",)),
    ("config:\n  trainyard:platform:\n    secure: v1:abc\n", ("must not be a secret",)),
    ("config:\n  trainyard:platfrom: {}\n  trainyard:platform: {}\n", ("trainyard:platfrom", "unknown config key")),
], ids=["empty file", "broken yaml", "not a mapping", "no platform key", "secret platform", "misspelt key"])
def test_bad_stack_file_exits_2(text: str, words: tuple[str, ...], tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text, encoding="utf-8")
    _assert_one_clean_line(capsys, main(["plan", str(path)]), words)


def test_missing_stack_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    _assert_one_clean_line(capsys, main(["plan", "no-such-stack"]), ("no such stack file",))


def test_declared_secret_keys_are_accepted_only_encrypted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    path = tmp_path / "Pulumi.secrets.yaml"
    config: dict[str, Any] = {"trainyard:platform": raw, "trainyard:backupCredentials": {"secure": "v1:abc"},
              "trainyard:kubeconfig": {"secure": "v1:def"}}
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    assert main(["plan", str(path)]) in (0, 1)
    capsys.readouterr()
    config["trainyard:backupCredentials"] = "[default]\naws_access_key_id=AKIA..."
    path.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    _assert_one_clean_line(capsys, main(["plan", str(path)]), ("trainyard:backupCredentials", "must be a secret"))
