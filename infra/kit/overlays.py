"""The overlay kustomization through which the program installs a path of a vendored release, with our patches.

Why an overlay file rather than the Directory's own options: `kustomize.v2.Directory` takes only a directory, a
default namespace, a name prefix and skipAwait, and it hands no transforms to the objects it registers before
kustomize has built them. A kustomization of our own that names the release's path as its one resource and lists our
patches is what both engines run unchanged: `pulumi up` (the provider's built-in kustomize) and the offline engine
(`kubectl kustomize`, infra/offline/kustomize.py) read the same file, so they apply the same patches by the same
rules. The file's name is the hash of its content: a changed patch is a changed `directory` input (visible in
`pulumi preview` and `trainyard diff`), and the offline engine refuses an overlay edited by hand.
"""

from __future__ import annotations

import hashlib
import posixpath
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra.kit import paths
from infra.kit.paths import OVERLAYS

if TYPE_CHECKING:
    from infra.spec.versions import Manifests

KUSTOMIZATION = "kustomization.yaml"


def release_path(release: Manifests, path: str) -> str:
    """The overlay's resource: the release's folder, relative to the overlay (overlays sit two levels down)."""
    clean = posixpath.normpath(path)
    if path.startswith("/") or clean.startswith("..") or clean == ".":
        raise ValueError(f"'{path}': a folder inside {release.name} {release.release}, such as common/dex/base")
    return f"../../{release.sha256}/{clean}"


def overlay_text(release: Manifests, path: str, patches: Sequence[Mapping[str, Any]] = ()) -> str:
    """The kustomization: the release's folder as its one resource, then our patches (kustomize `patches:` entries,
    `{patch: <strategic merge or JSON 6902 text>, target: {kind:, name:, ...}}`)."""
    document: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                "resources": [release_path(release, path)]}
    if patches:
        document["patches"] = [dict(patch) for patch in patches]
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def overlay_dir(text: str) -> str:
    """The overlay's folder, relative to the project root (where `pulumi up` runs): named by its content."""
    return f"{OVERLAYS}/{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def write_overlay(release: Manifests, path: str, patches: Sequence[Mapping[str, Any]] = ()) -> str:
    """Writes the overlay (once: its name is its content) and returns its folder relative to the project root."""
    text = overlay_text(release, path, patches)
    folder = overlay_dir(text)
    target = paths.ROOT / folder / KUSTOMIZATION
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own per writer (parallel test workers write the same overlay), renamed whole into place.
        with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".partial", delete=False,
                                         encoding="utf-8") as staging:
            staging.write(text)
        Path(staging.name).replace(target)
    return folder
