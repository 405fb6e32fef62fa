"""A newer release is made as SOURCE.txt describes the vendored one (localize.py), here from local stand-ins for the
upstream tag and the remote base's repository: it keeps the release's folders, localizes the remote base so it
builds offline, packs reproducibly, and its pin places and builds like the vendored release's."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from infra.offline import localize
from infra.offline.kustomize import kubectl
from infra.offline.manifestcache import ManifestCacheError, ensure, remote_bases, sha256_of

TAG = "9.99"
REMOTE = "https://github.com/acme/workflows/manifests/base/crds?ref=v1.2.3"
CONFIGMAP = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-acme\n  namespace: kubeflow\n"


def _tarball(path: Path, files: dict[str, bytes], commit: str = "") -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": commit} if commit else {}) as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def _upstream(where: Path, entry: str) -> dict[str, Path]:
    kept = {f"manifests-{TAG}/{kept}/README.md" if "/" in kept or kept == "common" else f"manifests-{TAG}/{kept}":
            b"x\n" for kept in localize.KEPT}
    tag = _tarball(where / "tag.tar.gz", {
        **kept, f"manifests-{TAG}/applications/trainer/README.md": b"not kept\n",
        f"manifests-{TAG}/common/argo/kustomization.yaml": f"resources:\n  - {entry}\n".encode()},
        commit="abc123")
    repo = _tarball(where / "repo.tar.gz", {
        "workflows-1.2.3/manifests/base/crds/kustomization.yaml": b"resources:\n- cm.yaml\n",
        "workflows-1.2.3/manifests/base/crds/cm.yaml": CONFIGMAP,
        "workflows-1.2.3/docs/index.md": b"not copied\n"})
    return {f"{localize.UPSTREAM}/archive/refs/tags/{TAG}.tar.gz": tag,
            "https://github.com/acme/workflows/archive/v1.2.3.tar.gz": repo}


def _fetcher(urls: dict[str, Path], asked: list[str]) -> localize.Fetch:
    def fetch(url: str, into: Path) -> Path:
        asked.append(url)
        target = into / Path(url).name
        target.write_bytes(urls[url].read_bytes())
        return target
    return fetch


def test_a_new_release_is_localized_packed_reproducibly_and_builds_offline(tmp_path: Path) -> None:
    asked: list[str] = []
    urls = _upstream(tmp_path, REMOTE)
    release = localize.make_release(TAG, tmp_path / "vendored", _fetcher(urls, asked))
    assert sorted(asked) == sorted(urls)
    assert (release.name, release.release, release.top, release.commit) == (
        "kubeflow-manifests", TAG, f"kubeflow-manifests-{TAG}", "abc123")
    assert release.archive == f"kubeflow-manifests-{TAG}-localized.tar.gz"
    assert release.sha256 == sha256_of(tmp_path / "vendored" / release.archive)
    again = localize.make_release(TAG, tmp_path / "again", _fetcher(urls, []))
    assert again.sha256 == release.sha256  # same inputs, same bytes
    tree = ensure(release, root=tmp_path / "root", source=tmp_path / "vendored")
    assert not (tree / "applications" / "trainer").exists() and remote_bases(tree) == []
    line = (tree / "common" / "argo" / "kustomization.yaml").read_text(encoding="utf-8")
    assert line == ("resources:\n  - ../../localized-files/github.com/acme/workflows/v1.2.3/manifests/base/crds"
                    f"  # localized from {REMOTE}\n")
    assert not (tree / "localized-files" / "github.com" / "acme" / "workflows" / "v1.2.3" / "docs").exists()
    built = subprocess.run([str(kubectl()), "kustomize", str(tree / "common" / "argo")], capture_output=True,
                           text=True, check=True)
    assert built.stdout.encode() == CONFIGMAP


def test_a_remote_base_that_is_not_a_github_ref_stops_the_bump(tmp_path: Path) -> None:
    urls = _upstream(tmp_path, "git@gitlab.example:acme/workflows.git//base?ref=v1")
    with pytest.raises(ManifestCacheError, match=r"common/argo/kustomization\.yaml: remote base git@gitlab"):
        localize.make_release(TAG, tmp_path / "vendored", _fetcher(urls, []))
    assert not (tmp_path / "vendored").exists()
