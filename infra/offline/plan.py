"""plan.json and manifests/: the reviewable, byte-stable rendering of one captured run."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import yaml

from infra.offline import engine
from infra.offline.charts import HOOK, Rendered
from infra.offline.clusters import split
from infra.offline.diskcache import cached, content_key, source_hash
from infra.offline.engine import Capture, Registration
from infra.offline.kustomize import DIRECTORY_TYPE, Kustomized
from infra.spec import Platform
from infra.spec.input.load import read_stack_config

KUBERNETES = "kubernetes:"
NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")


def plan_document(capture: Capture) -> dict[str, Any]:
    return {
        "stack": capture.stack,
        "project": capture.project,
        "resources": [
            {
                "type": r.type, "name": r.name, "parent": r.parent, "custom": r.custom, "remote": r.remote,
                "inputs": r.inputs, "dependsOn": list(r.depends_on), "protect": r.protect,
                "retainOnDelete": r.retain_on_delete, "provider": r.provider,
                **({_installer(r.chart): r.chart} if r.chart else {}),
            }
            for r in capture.resources
        ],
        "charts": [chart_summary(rendered) for rendered in capture.charts],
        # Only when there are some: the plans of stacks without one stay as they were.
        **({"kustomizations": [kustomization_summary(k) for k in capture.kustomizations]}
           if capture.kustomizations else {}),
        "outputs": capture.outputs,
    }


def _installer(ref: str) -> str:
    """The key naming what installs an object: `chart`, or `kustomization` for a kustomize.v2.Directory's."""
    return "kustomization" if ref.startswith(f"{DIRECTORY_TYPE}::") else "chart"


def chart_summary(rendered: Rendered) -> dict[str, Any]:
    """A chart's release, its pinned archive, what it installs, and the hooks helm.v4.Chart skips."""
    source = rendered.source
    return {
        "chart": source.ref, "release": source.release, "namespace": source.namespace,
        "archive": source.chart.archive, "version": source.chart.version, "digest": source.chart.digest,
        "objects": len(rendered.objects),
        "skippedHooks": [{"kind": h["kind"], "name": h["metadata"]["name"],
                          "hook": h["metadata"]["annotations"][HOOK]} for h in rendered.hooks],
    }


def kustomization_summary(kustomized: Kustomized) -> dict[str, Any]:
    """A Directory's release folder, its pinned archive, the overlay it builds and what it installs."""
    source = kustomized.source
    return {
        "kustomization": source.ref, "release": f"{source.release.name} {source.release.release}",
        "archive": source.release.archive, "sha256": source.release.sha256, "upstream": source.release.source,
        "commit": source.release.commit, "path": source.path, "overlay": source.directory,
        "namespace": source.namespace, "objects": len(kustomized.objects),
    }


def is_object(record: Registration) -> bool:
    """A Kubernetes object the program declares, or one a chart or kustomization installs (not a chart, a
    Directory or a provider)."""
    return record.custom and record.type.startswith(KUBERNETES) and not record.type.startswith(NOT_OBJECTS)


def objects(capture: Capture) -> list[tuple[Registration, dict[str, Any]]]:
    return [(record, record.inputs) for record in capture.resources if is_object(record)]


def manifest_path(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    folder = meta.get("namespace") or "_cluster"
    return f"{folder}/{obj['kind']}-{meta['name']}.yaml"


def render_plan_json(capture: Capture) -> str:
    """plan.json: sorted keys, two-space indent, UTF-8 as is (the layout of json.dumps(indent=2, sort_keys=True,
    ensure_ascii=False)), encoded by orjson: Python's indenting encoder took a quarter of a 1000-team render."""
    return orjson.dumps(plan_document(capture), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def write(capture: Capture, out: Path, clusters: Mapping[str, Capture] | None = None) -> int:
    """Write plan.json and manifests/ under `out` (replacing what was there); returns the object count. In a
    stack of several clusters (`clusters`: each one's part of the run) manifests/ has a folder per cluster."""
    manifests = out / "manifests"
    if manifests.exists():
        shutil.rmtree(manifests)
    manifests.mkdir(parents=True)
    (out / "plan.json").write_text(render_plan_json(capture), encoding="utf-8")
    parts = clusters or {"": capture}
    placed = [(folder, record, obj) for folder, part in parts.items() for record, obj in objects(part)]
    folders: set[str] = set()  # plain strings and one makedirs per folder: a large platform writes ~30 000 files
    for (folder, _, obj), text in zip(placed, _texts([(record, obj) for _, record, obj in placed]), strict=True):
        path = os.path.join(manifests, folder, manifest_path(obj))
        directory = os.path.dirname(path)
        if directory not in folders:
            os.makedirs(directory, exist_ok=True)
            folders.add(directory)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return len(placed)


def manifest_text(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False)


_CODE = source_hash(Path(__file__))  # how a manifest is written


def _all_texts(objs: list[dict[str, Any]]) -> list[str]:
    return [manifest_text(obj) for obj in objs]


def _texts(placed: list[tuple[Registration, dict[str, Any]]]) -> list[str]:
    """Each object's manifest. A chart's objects are nearly all of a stack's bytes (CRDs) and nearly all the time
    spent writing them: their texts are kept in the cache per chart, keyed by the objects' content_key, so equal
    keys write equal text."""
    texts = [""] * len(placed)
    by_chart: dict[str, list[int]] = defaultdict(list)
    for index, (record, obj) in enumerate(placed):
        if record.chart:
            by_chart[record.chart].append(index)
        else:
            texts[index] = manifest_text(obj)
    for indexes in by_chart.values():
        chart_objects = [placed[index][1] for index in indexes]
        chart_texts = cached("manifests", [content_key(chart_objects), yaml.__version__, _CODE],
                             partial(_all_texts, chart_objects))
        for index, text in zip(indexes, chart_texts, strict=True):
            texts[index] = text
    return texts


def render_stack(path: Path, platform: Platform, out: Path) -> tuple[Capture, int]:
    """Run a stack file's program and write its plan.json and manifests/ (a folder per cluster in a stack of
    several): the run and the number of Kubernetes objects written."""
    capture = engine.run(platform.stack, read_stack_config(path))
    clusters = {name: part for name, (_, part) in split(platform, capture).items() if name}
    return capture, write(capture, out, clusters or None)
