"""The local manifests cache (`.manifests/`): each vendored release of upstream kustomizations, its archive verified
against the sha256 pinned in infra/spec/versions.py, then extracted under `.manifests/<sha256>/` (the archive's top
folder stripped). The tree is staged under a name of its own and renamed into place whole, so a tree at its digest's
path is a verified one: nothing reads a half-extracted or unverified release.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import tempfile
from pathlib import Path

import yaml

from infra.kit import paths
from infra.offline.chartcache import ChartCacheError
from infra.spec.versions import Manifests

ROOT = paths.ROOT
# The vendored archives: ../shared/kustomize beside the checkout, unless the environment names another place.
VENDORED_ENV = "TRAINYARD_VENDORED_MANIFESTS"
DOCUMENTED = "docs/manifests.md"
# A kustomization entry kustomize would fetch: a URL, a git remote, or a `?ref=` of one.
REMOTE = re.compile(r"^(https?://|git@|ssh://|git::|github\.com/)|\?ref=")
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def vendored() -> Path:
    return Path(os.environ.get(VENDORED_ENV) or paths.SHARED / "kustomize")


class ManifestCacheError(ChartCacheError):
    """A release's archive is missing or does not match its pin (reported as a chart cache error is: exit 2)."""


def sha256_of(archive: Path) -> str:
    digest = hashlib.sha256()
    with archive.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def remote_bases(tree: Path) -> list[str]:
    """Every `resources`, `components` or `bases` entry in the tree that names a remote base (`file: entry`): a
    release must have them localized, or a build would read the network (`pulumi up` included)."""
    found = []
    for file in sorted(f for name in KUSTOMIZATION_FILES for f in tree.rglob(name)):
        document = yaml.load(file.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        for key in ("resources", "components", "bases"):
            entries = document.get(key) if isinstance(document, dict) else None
            found += [f"{file.relative_to(tree)}: {entry}" for entry in entries or []
                      if isinstance(entry, str) and REMOTE.search(entry)]
    return found


def _extract(release: Manifests, archive: Path, target: Path) -> None:
    """Into a staging folder beside the target, then renamed: two writers at once both end with the verified tree."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".partial-") as staging, \
            tarfile.open(archive, "r:gz") as tar:
        # The data filter refuses absolute paths, links out of the tree and device files.
        tar.extractall(staging, filter="data")
        top = Path(staging) / release.top
        if not top.is_dir():
            raise ManifestCacheError(f"{archive}: has no top folder {release.top}/ (infra/spec/versions.py "
                                     f"{release.name} names it)")
        remote = remote_bases(top)
        if remote:
            raise ManifestCacheError(f"{archive}: {len(remote)} remote base(s), first {remote[0]}: localize them "
                                     f"({DOCUMENTED})")
        try:
            top.rename(target)
        except OSError:  # another writer placed it first
            if not target.is_dir():
                raise


def ensure(release: Manifests, root: Path = ROOT, source: Path | None = None) -> Path:
    """The extracted tree of a pinned release: already placed, or placed now from the vendored archive after its
    sha256 matched the pin."""
    target = root / release.path
    if target.is_dir():
        return target
    archive = (source or vendored()) / release.archive
    if not archive.is_file():
        raise ManifestCacheError(f"{release.path} is not placed and {archive} is missing: copy the archive there and "
                                 f"run scripts/fetch-manifests (a newer release: {DOCUMENTED})")
    found = sha256_of(archive)
    if found != release.sha256:
        raise ManifestCacheError(f"{archive}: sha256 {found}, but infra/spec/versions.py pins {release.archive} at "
                                 f"{release.sha256}")
    _extract(release, archive, target)
    return target

