"""Every chart the program installs, rendered offline with Helm's own engine (helm_python, the Helm v4 SDK):
the exact values, release name and namespace of the chart's registration, the stack's Kubernetes version,
and as served API versions Helm's built-in ones plus every group/version the stack's charts define.

What `helm.v4.Chart` installs becomes one Registration per object, parented to the chart and named as
pulumi-kubernetes names a chart's children, so plan.json, manifests/ and every check see it. Hook objects
are not installed by `helm.v4.Chart` (pulumi-kubernetes#3284): they are kept apart, marked with their hook.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml
from helm_python import _native

from infra.kit import manifests
from infra.kit.manifests import ManifestLoader
from infra.offline.chartcache import ROOT, ChartCacheError, content_digest, ensure
from infra.offline.diskcache import cached, remembered, source_hash
from infra.spec.versions import CHART_CACHE, Chart

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"
HOOK = "helm.sh/hook"
CRD_KIND = "CustomResourceDefinition"
# Built-in kinds that have no namespace; custom kinds take their scope from the stack's CRDs.
CLUSTER_KINDS = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "CSINode",
    CRD_KIND, "DeviceClass", "FlowSchema", "IngressClass", "IPAddress", "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume",
    "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "ServiceCIDR", "StorageClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration",
    "VolumeAttachment", "VolumeAttributesClass",
})


@dataclass(frozen=True)
class Source:
    """One chart registration, as the program declared it."""

    ref: str  # the chart registration's `type::name`
    release: str
    namespace: str
    chart: Chart  # name and version from the archive's file name; digest from the table
    values: dict[str, Any]


@dataclass(frozen=True)
class Rendered:
    source: Source
    objects: tuple[dict[str, Any], ...]  # what helm.v4.Chart installs: crds/ first, then templates
    hooks: tuple[dict[str, Any], ...]  # hook objects, which helm.v4.Chart skips
    problems: tuple[str, ...]  # values that Helm would ignore or refuse; a template that fails


def source_of(ref: str, inputs: Mapping[str, Any]) -> Source:
    """A chart registration -> what to render; its `chart` is a cache path `.charts/<digest>/<archive>`."""
    path = str(inputs.get("chart", ""))
    digest, _, archive = path.removeprefix(f"{CHART_CACHE}/").rpartition("/")
    name, _, version = archive.removesuffix(".tgz").rpartition("-")
    chart = Chart(name, "", version)
    if not path.startswith(f"{CHART_CACHE}/") or chart.path != path or chart.digest != f"sha256:{digest}":
        raise ChartCacheError(f"{ref}: chart '{path}' is not a pinned archive in the chart cache: declare the "
                              "chart in infra/spec/versions.py and install it with helm_chart()")
    # The release is the resource's name unless the chart names it (a cluster-prefixed resource does).
    release = str(inputs.get("name") or ref.rpartition("::")[2])
    return Source(ref, release, str(inputs.get("namespace") or "default"), chart, dict(inputs.get("values") or {}))


def unknown_keys(values: Any, defaults: Any, path: str = "") -> Iterator[str]:
    """Keys the chart's values.yaml (with its subcharts') does not have: Helm ignores them silently. An empty
    or null default is free-form (nodeSelector: {}, podAnnotations: {}): anything may go under it."""
    if not isinstance(values, dict) or not isinstance(defaults, dict) or not defaults:
        return
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in defaults:
            yield where
        else:
            yield from unknown_keys(value, defaults[key], where)


def read_by_templates(key: str, templates: str) -> bool:
    """A key values.yaml leaves out still counts when a template reads it (documented in a comment only), or
    ranges over the map that holds it (free-form maps such as extraArgs with a few defaults)."""
    parent = key.rpartition(".")[0]
    ranged = bool(parent) and re.search(rf"range\s[^}}]*\.Values\.{re.escape(parent)}\s*}}", templates)
    return f".Values.{key}" in templates or bool(ranged)


def _with_nulls(merged: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """Coalesced defaults (subcharts' included) drop null keys, which values.yaml declares all the same."""
    combined = dict(merged)
    for key, value in own.items():
        if key not in combined:
            combined[key] = value
        elif isinstance(value, dict) and isinstance(combined[key], dict):
            combined[key] = _with_nulls(combined[key], value)
    return combined


def _parsed(text: str) -> list[Any]:
    """A template's output parsed once per text in this process: most of a chart's output (its CRDs) reads the
    same in every values variant and every stack, and unpickling it is far faster than parsing the YAML again."""
    return remembered("parsed", [hashlib.sha256(text.encode()).hexdigest()],
                      lambda: list(yaml.load_all(text, Loader=ManifestLoader)))


def _documents(manifests: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    for template in sorted(manifests):
        if template.endswith("NOTES.txt"):
            continue
        for document in _parsed(manifests[template]):
            if isinstance(document, dict) and document.get("kind"):
                yield document


def is_hook(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata", {}).get("annotations") or {}).get(HOOK))


def _group_versions(crds: Sequence[Mapping[str, Any]]) -> list[str]:
    served = set()
    for crd in crds:
        spec = crd.get("spec", {})
        for version in spec.get("versions", []):
            served.add(f"{spec.get('group')}/{version.get('name')}")
            served.add(f"{spec.get('group')}/{version.get('name')}/{spec.get('names', {}).get('kind')}")
    return sorted(served)


# Everything besides a release's inputs that decides its render: this code, the YAML loader's, Helm's and PyYAML's.
_CODE = [source_hash(Path(__file__), Path(manifests.__file__)), helm.__version__, yaml.__version__]
Documents = list[dict[str, Any]]


def _crds(chart: helm.Chart) -> dict[str, str]:
    """The crds/ files Helm installs before the templates (chart and enabled subcharts), by path."""
    return {entry["filename"]: entry["data"] for entry in chart.crds}


def _content(source: Source, archive: Path) -> str:
    """The pinned digest names the archive's content; a chart without one (a test's) is hashed."""
    return source.chart.digest or content_digest(archive)


def _chart_crds(source: Source, archive: Path) -> dict[str, Documents]:
    """Every crds/ file of the chart and its subcharts, parsed, by path: once per archive, however many values
    variants are rendered (the prometheus-operator CRDs are 5 MB of YAML, slower to parse than to render)."""
    def load() -> dict[str, Documents]:
        with helm.Chart.load(archive) as chart:
            return {path: list(_documents({path: text})) for path, text in _crds(chart).items()}
    return cached("chart-crds", [*_CODE, _content(source, archive)], load)


def _served(source: Source, archive: Path) -> list[str]:
    """The API versions (and version/kind pairs) the CRDs in the chart's crds/ folders serve, enabled subcharts or
    not. Kept as these strings, not the CRDs: a run needs them for every chart, and the CRDs are megabytes."""
    return cached("served", [*_CODE, _content(source, archive)],
                  lambda: _group_versions([crd for crds in _chart_crds(source, archive).values() for crd in crds]))


def _render(source: Source, archive: Path, kubernetes: str,
            api_versions: list[str]) -> tuple[Documents, Documents, tuple[str, ...]]:
    """(the templates' documents, the crds/ documents Helm installs, values problems) of one release, rendered once
    per inputs (diskcache) and fresh objects for each caller, so no two captures share one."""
    key = [*_CODE, _content(source, archive), source.values, source.release, source.namespace, kubernetes,
           api_versions]
    documents, crd_paths, problems = cached(
        "render", key, lambda: _render_now(source, archive, kubernetes, api_versions))
    parsed = _chart_crds(source, archive)
    return documents, [crd for path in crd_paths for crd in parsed[path]], problems


def _render_now(source: Source, archive: Path, kubernetes: str,
                api_versions: list[str]) -> tuple[Documents, list[str], tuple[str, ...]]:
    """(the templates' documents, the crds/ files Helm installs in its order, values problems)."""
    # A fresh load per render: rendering drops disabled subcharts from the loaded chart (and so their crds/ from
    # what it installs, as Helm does).
    with helm.Chart.load(archive) as chart:
        defaults = _with_nulls(chart.merge_values(None) or {}, chart.values or {})
        templates = "\n".join(str(t.get("data", "")) for t in chart.templates or [])
        problems = [f"values.{key}: not in the chart's values.yaml (Helm ignores it)"
                    for key in unknown_keys(source.values, defaults) if not read_by_templates(key, templates)]
        try:
            chart.validate_schema(source.values)
        except helm.HelmError as error:
            problems.append(f"values do not match the chart's values.schema.json: {error}")
        # Chart.render does not take capabilities; the C ABI does (kube_version, api_versions).
        options = {"name": source.release, "namespace": source.namespace, "is_install": True,
                   "kube_version": f"v{kubernetes}.0", "api_versions": api_versions}
        try:
            manifests = json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(source.values),
                                                       json.dumps(options)))
        except helm.HelmError as error:
            manifests = {}
            problems.append(f"render failed: {error}")
        return list(_documents(manifests)), sorted(_crds(chart)), tuple(problems)


def render_all(sources: Sequence[Source], kubernetes: str, root: Path = ROOT) -> tuple[Rendered, ...]:
    archives = {source.ref: ensure(source.chart, root) for source in sources}
    api_versions = sorted({version for s in sources for version in _served(s, archives[s.ref])})
    rendered = []
    for source in sources:
        documents, crds, problems = _render(source, archives[source.ref], kubernetes, api_versions)
        rendered.append(Rendered(source, (*crds, *(d for d in documents if not is_hook(d))),
                                 tuple(d for d in documents if is_hook(d)), problems))
    scoped = cluster_scoped([obj for r in rendered for obj in r.objects])
    return tuple(_with_namespace(r, scoped) for r in rendered)


def cluster_scoped(objects: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    return CLUSTER_KINDS | {obj["spec"]["names"]["kind"] for obj in objects
                            if obj["kind"] == CRD_KIND and obj.get("spec", {}).get("scope") == "Cluster"}


def _with_namespace(rendered: Rendered, cluster_scoped: frozenset[str]) -> Rendered:
    """Namespaced objects a template leaves without a namespace go to the release's, as the provider does."""
    def placed(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] in cluster_scoped or obj.get("metadata", {}).get("namespace"):
            return obj
        return {**obj, "metadata": {**obj.get("metadata", {}), "namespace": rendered.source.namespace}}
    return Rendered(rendered.source, tuple(placed(o) for o in rendered.objects),
                    tuple(placed(o) for o in rendered.hooks), rendered.problems)


def child_name(prefix: str, obj: Mapping[str, Any]) -> str:
    """pulumi-kubernetes' name for a chart's object: `<prefix>:<namespace>/<name>` (or `<prefix>:<name>`), the
    prefix being the chart resource's name (its release name unless the chart sets `name`)."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{prefix}:{namespace}/{meta.get('name')}" if namespace else f"{prefix}:{meta.get('name')}"
