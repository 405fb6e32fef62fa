"""ClusterTrainingRuntimes: the manifests in runtimes/, adapted to a stack's pools."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

RUNTIMES_DIR = Path(__file__).resolve().parents[2] / "runtimes"


def available() -> tuple[str, ...]:
    return tuple(sorted(path.stem for path in RUNTIMES_DIR.glob("*.yaml")))


def read(name: str) -> dict[str, Any]:
    document = yaml.safe_load((RUNTIMES_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("kind") != "ClusterTrainingRuntime":
        raise ValueError(f"runtimes/{name}.yaml is not a ClusterTrainingRuntime")
    return document


def pod_specs(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod spec of every replicated job in a runtime (mutable views into it)."""
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return [job["template"]["spec"]["template"]["spec"] for job in jobs]


def render(name: str, tolerations: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    runtime = copy.deepcopy(read(name))
    for pod in pod_specs(runtime):
        existing = pod.setdefault("tolerations", [])
        existing.extend(dict(t) for t in tolerations if dict(t) not in existing)
    return runtime
