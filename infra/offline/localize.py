"""A newer Kubeflow Platform release, made on a connected machine the way ../shared/kustomize/SOURCE.txt describes
the 26.03 archive: the upstream tag's folders the platform uses, every remote base (`https://github.com/ORG/REPO/
PATH?ref=REF`) copied under `localized-files/github.com/ORG/REPO/REF/` as `kustomize localize` lays it out and its
line pointing there (the URL kept in a comment), packed reproducibly. `scripts/fetch-manifests --bump TAG` runs it
and prints the pin to review; nothing else in Trainyard downloads manifests.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

from infra.offline.manifestcache import (
    DOCUMENTED,
    KUSTOMIZATION_FILES,
    REMOTE,
    ManifestCacheError,
    remote_bases,
    sha256_of,
)
from infra.spec.versions import Manifests

NAME = "kubeflow-manifests"
UPSTREAM = "https://github.com/kubeflow/manifests"
# What the 26.03 archive holds (SOURCE.txt); applications/trainer is left out: Trainer comes from its chart.
KEPT = ("LICENSE", "README.md", "common", *(f"applications/{app}" for app in (
    "pipeline", "model-registry", "kserve", "profiles", "centraldashboard", "katib", "jupyter")))
GITHUB = re.compile(r"^https://github\.com/(?P<org>[^/]+)/(?P<repo>[^/]+)/(?P<path>[^?]+)\?ref=(?P<ref>[^&\s]+)$")
LOCALIZED = Path("localized-files") / "github.com"

Fetch = Callable[[str, Path], Path]  # (url, folder) -> the file downloaded into the folder


def download(url: str, into: Path) -> Path:
    target = into / url.rstrip("/").rsplit("/", 1)[-1]
    with urllib.request.urlopen(url, timeout=300) as response, target.open("wb") as out:
        shutil.copyfileobj(response, out)
    return target


def _unpacked(archive: Path, into: Path) -> tuple[Path, str]:
    """(the archive's one top folder, extracted; the commit GitHub records in its pax header, or '')."""
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(into, filter="data")
        commit = str(tar.pax_headers.get("comment", ""))
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise ManifestCacheError(f"{archive}: {len(tops)} top folders, expected one")
    return tops[0], commit


def _localized_line(line: str, file: Path, tree: Path, fetch: Fetch, scratch: Path) -> str:
    """A kustomization line naming a remote base -> the same entry pointing at its localized copy."""
    entry = line.strip().removeprefix("-").split(" #")[0].strip()
    found = GITHUB.match(entry)
    if not found:
        raise ManifestCacheError(f"{file.relative_to(tree)}: remote base {entry} is not https://github.com/ORG/REPO/"
                                 f"PATH?ref=REF: localize it by hand ({DOCUMENTED})")
    org, repo, path, ref = found["org"], found["repo"], found["path"], found["ref"]
    folder = tree / LOCALIZED / org / repo / ref
    top = path.split("/")[0]
    if not (folder / top).is_dir():  # the whole top folder of the path, as SOURCE.txt's argo manifests/
        source, _ = _unpacked(fetch(f"https://github.com/{org}/{repo}/archive/{ref}.tar.gz", scratch),
                              Path(tempfile.mkdtemp(dir=scratch)))
        shutil.copytree(source / top, folder / top)
    indent = line[:len(line) - len(line.lstrip())]
    return f"{indent}- {os.path.relpath(folder / path, file.parent)}  # localized from {entry}\n"


def localize(tree: Path, fetch: Fetch, scratch: Path) -> int:
    """Rewrites every remote base of the tree's kustomizations; returns how many lines changed."""
    changed = 0
    for file in sorted(f for name in KUSTOMIZATION_FILES for f in tree.rglob(name)):
        lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
        remote = [i for i, line in enumerate(lines)
                  if line.lstrip().startswith("- ") and REMOTE.search(line.strip().removeprefix("-").strip())]
        for index in remote:
            lines[index] = _localized_line(lines[index], file, tree, fetch, scratch)
        if remote:
            file.write_text("".join(lines), encoding="utf-8")
            changed += len(remote)
    return changed


def _pack(tree: Path, archive: Path) -> None:
    """Sorted entries, no owners, no times: the same tree packs to the same bytes (and so the same pin)."""
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [tree, *sorted(tree.rglob("*"))]:
            tar.add(path, arcname=str(Path(tree.name) / path.relative_to(tree)), recursive=False, filter=clean)
    archive.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))


def make_release(tag: str, vendored: Path, fetch: Fetch = download) -> Manifests:
    """The tag's release, localized and packed into `vendored`; its pin (sha256 of the archive's bytes)."""
    top = f"{NAME}-{tag}"
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        upstream, commit = _unpacked(fetch(f"{UPSTREAM}/archive/refs/tags/{tag}.tar.gz", scratch), scratch / "tag")
        tree = scratch / "release" / top
        for kept in KEPT:
            source, target = upstream / kept, tree / kept
            if not source.exists():
                raise ManifestCacheError(f"{UPSTREAM} {tag} has no {kept}: review KEPT in infra/offline/localize.py")
            target.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)
        localize(tree, fetch, scratch)
        left = remote_bases(tree)
        if left:
            raise ManifestCacheError(f"{len(left)} remote base(s) left, first {left[0]} ({DOCUMENTED})")
        vendored.mkdir(parents=True, exist_ok=True)
        archive = vendored / f"{top}-localized.tar.gz"
        _pack(tree, archive)
    return Manifests(NAME, tag, archive.name, sha256_of(archive), top, f"{UPSTREAM}/tree/{tag}", commit)
