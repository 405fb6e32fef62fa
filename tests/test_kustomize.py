"""Vendored kustomizations are pinned, placed verified, built offline like charts and checked like our own objects:
the Kubeflow Platform 26.03 release (../shared/kustomize) through kustomize_directory() and `kubectl kustomize`."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from infra.checks.catalogue import Context
from infra.checks.charts import check_declared_once, image_findings
from infra.commands import main
from infra.kit import paths
from infra.kit.overlays import overlay_text, write_overlay
from infra.offline import diskcache, engine, kustomize
from infra.offline.images import stack_images
from infra.offline.manifestcache import ManifestCacheError, ensure, sha256_of, vendored
from infra.offline.plan import objects, write
from infra.spec.versions import KUBEFLOW_MANIFESTS, Manifests
from tests.conftest import platform_of

RELEASE = KUBEFLOW_MANIFESTS
OAUTH2_PROXY = "common/oauth2-proxy/overlays/m2m-dex-only"
CERT_MANAGER = "common/cert-manager/base"
DIRECTORY = "kubernetes:kustomize/v2:Directory"
# The archive and its notes as vendored: the oracle for the pin and the counts, not this code's output.
SHARED = vendored()
needs_release = pytest.mark.skipif(
    not (paths.ROOT / RELEASE.path).is_dir() and not (SHARED / RELEASE.archive).is_file(),
    reason="kubeflow-manifests 26.03 neither placed in .manifests/ nor vendored in ../shared/kustomize")
needs_vendored = pytest.mark.skipif(not (SHARED / RELEASE.archive).is_file(), reason="no ../shared/kustomize")
SCRIPT = paths.ROOT / "scripts" / "fetch-manifests"

PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s
from infra.kit.objects import kustomize_directory
from infra.spec.versions import KUBEFLOW_MANIFESTS
provider = k8s.Provider('k', context='c')
opts = pulumi.ResourceOptions(provider=provider)
{body}
pulumi.export('kubernetes', '1.34')
"""
PATCHES = """[
    {'patch': 'apiVersion: apps/v1\\nkind: Deployment\\nmetadata: {name: oauth2-proxy, namespace: oauth2-proxy}\\n'
              'spec: {replicas: 3}\\n'},
    {'patch': '[{"op": "remove", "path": "/metadata/namespace"}]',
     'target': {'kind': 'ServiceAccount', 'name': 'oauth2-proxy'}},
]"""


@functools.cache
def _run(body: str, where: Path) -> engine.Capture:
    program = where / f"program-{abs(hash(body))}.py"
    program.write_text(PROGRAM.format(body=body), encoding="utf-8")
    return engine.run("kustomize-test", {}, program_path=program)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("programs")


def _declare(path: str, name: str = "kf", extra: str = "") -> str:
    return f"kustomize_directory('{name}', KUBEFLOW_MANIFESTS, '{path}', opts{extra})"


def _installed(capture: engine.Capture, name: str) -> list[engine.Registration]:
    return [r for r in capture.resources if r.chart == f"{DIRECTORY}::{name}"]


def _sums() -> dict[str, str]:
    lines = (SHARED / "SHA256SUMS").read_text(encoding="utf-8").split("\n")
    return {line.split()[1]: line.split()[0] for line in lines if line.strip()}


@needs_vendored
def test_the_pin_is_the_vendored_archive_as_its_notes_describe_it() -> None:
    assert _sums() == {RELEASE.archive: RELEASE.sha256}
    assert sha256_of(SHARED / RELEASE.archive) == RELEASE.sha256
    notes = (SHARED / "SOURCE.txt").read_text(encoding="utf-8")
    assert f"tag {RELEASE.release}, commit\n{RELEASE.commit}" in notes and "kubeflow/manifests" in notes
    assert RELEASE.source.endswith(f"kubeflow/manifests/tree/{RELEASE.release}")


@needs_release
@pytest.mark.parametrize(("path", "count"), [(OAUTH2_PROXY, 14), (CERT_MANAGER, 49)])
def test_a_release_folder_renders_offline_with_the_upstream_object_count(scratch: Path, path: str,
                                                                         count: int) -> None:
    """The counts SOURCE.txt gives for these folders; every object a child of the Directory, named as the provider
    names them, on its provider, CRDs retained on delete as a chart's are."""
    capture = _run(_declare(path), scratch)
    installed = _installed(capture, "kf")
    assert len(installed) == count == len(capture.kustomizations[0].objects)
    for record in installed:
        meta = record.inputs["metadata"]
        assert record.name == (f"kf:{meta['namespace']}/{meta['name']}" if meta.get("namespace") else
                               f"kf:{meta['name']}")
        assert record.parent == f"{DIRECTORY}::kf" and record.provider == "pulumi:providers:kubernetes::k"
        assert f"::{DIRECTORY}$kubernetes:" in record.urn
        assert record.retain_on_delete == (record.inputs["kind"] == "CustomResourceDefinition")
    if path == CERT_MANAGER:
        assert sum(r.retain_on_delete for r in installed) == 6


@needs_release
def test_the_plan_lists_each_kustomization_with_its_source_and_writes_its_manifests(scratch: Path,
                                                                                  tmp_path: Path) -> None:
    capture = _run(_declare(OAUTH2_PROXY), scratch)
    written = write(capture, tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    [summary] = plan["kustomizations"]
    assert summary == {
        "kustomization": f"{DIRECTORY}::kf", "release": "kubeflow-manifests 26.03", "archive": RELEASE.archive,
        "sha256": RELEASE.sha256, "upstream": "https://github.com/kubeflow/manifests/tree/26.03",
        "commit": RELEASE.commit, "path": OAUTH2_PROXY, "overlay": summary["overlay"], "namespace": "default",
        "objects": 14}
    assert (paths.ROOT / summary["overlay"] / "kustomization.yaml").read_text(encoding="utf-8") == \
        overlay_text(RELEASE, OAUTH2_PROXY)
    marked = [r for r in plan["resources"] if r.get("kustomization") == f"{DIRECTORY}::kf"]
    assert len(marked) == 14 and not any("chart" in r for r in plan["resources"])
    assert written == 14 and (tmp_path / "manifests" / "oauth2-proxy" / "Deployment-oauth2-proxy.yaml").is_file()
    assert (tmp_path / "manifests" / "_cluster" / "Namespace-oauth2-proxy.yaml").is_file()


@needs_release
def test_patches_and_the_default_namespace_apply_as_kustomize_and_the_provider_apply_them(scratch: Path) -> None:
    """A strategic merge patch and a JSON 6902 patch from the overlay; the SA the second leaves without a namespace
    gets the Directory's, the cluster-scoped Namespace none."""
    capture = _run(_declare(OAUTH2_PROXY, "patched", f", namespace='edge', patches={PATCHES}"), scratch)
    by_kind = {r.inputs["kind"]: r.inputs for r in _installed(capture, "patched")}
    assert by_kind["Deployment"]["spec"]["replicas"] == 3
    assert by_kind["ServiceAccount"]["metadata"]["namespace"] == "edge"
    assert "namespace" not in by_kind["Namespace"]["metadata"]
    assert by_kind["Service"]["metadata"]["namespace"] == "oauth2-proxy"
    unpatched = {r.inputs["kind"]: r.inputs for r in _installed(_run(_declare(OAUTH2_PROXY), scratch), "kf")}
    assert unpatched["Deployment"]["spec"]["replicas"] == 2  # common/oauth2-proxy/base/deployment.yaml


@needs_release
def test_a_build_is_cached_by_digest_path_overlay_and_kubectl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(diskcache.CACHE_ENV, str(tmp_path))
    builds: list[Path] = []
    build = kustomize._build

    def counted(folder: Path) -> list[dict[str, object]]:
        builds.append(folder)
        return build(folder)

    monkeypatch.setattr(kustomize, "_build", counted)
    source = kustomize.source_of("d::x", {"directory": write_overlay(RELEASE, OAUTH2_PROXY)})
    first = kustomize.render(source)
    monkeypatch.setattr(diskcache, "_MEMORY", {})  # a later process: only the disk has it
    assert kustomize.render(source) == first and len(builds) == 1
    assert len(list((tmp_path / "kustomize").glob("*.pickle"))) == 1
    patched = kustomize.source_of("d::x", {"directory": write_overlay(
        RELEASE, OAUTH2_PROXY, [{"patch": "[]", "target": {"kind": "Service"}}])})
    kustomize.render(patched)
    assert len(builds) == 2
    monkeypatch.setattr(kustomize, "_CODE", [*kustomize._CODE[:1], "1.38.0", *kustomize._CODE[2:]])
    kustomize.render(source)
    assert len(builds) == 3


@needs_release
def test_the_images_of_rendered_objects_are_the_stacks_and_pass_the_image_check(scratch: Path) -> None:
    capture = _run(_declare(OAUTH2_PROXY), scratch)
    images = stack_images([obj for _, obj in objects(capture)])
    # SOURCE.txt: oauth2-proxy 7.14.3 in this release.
    assert images == {"quay.io/oauth2-proxy/oauth2-proxy:v7.14.3": ["Deployment/oauth2-proxy/oauth2-proxy"]}
    assert image_findings([obj for _, obj in objects(capture)]) == []


@needs_release
def test_an_object_declared_by_us_and_by_a_kustomization_is_one_owner_too_many(scratch: Path) -> None:
    body = (_declare(OAUTH2_PROXY) + "\nk8s.core.v1.ServiceAccount('sa', metadata={'name': 'oauth2-proxy', "
            "'namespace': 'oauth2-proxy'}, opts=opts)")
    findings = check_declared_once(Context(platform_of("local"), _run(body, scratch), None))
    assert [(f.subject, f.message) for f in findings] == [
        ("ServiceAccount/oauth2-proxy/oauth2-proxy", f"declared 2 times, by {DIRECTORY}::kf, the program")]
    assert check_declared_once(Context(platform_of("local"), _run(_declare(OAUTH2_PROXY), scratch), None)) == []


def _fetch(vendored_dir: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--vendored", str(vendored_dir), "--root", str(root)],
                          capture_output=True, text=True, check=False)


@needs_vendored
def test_fetch_places_the_verified_tree_once(tmp_path: Path) -> None:
    done = _fetch(SHARED, tmp_path)
    assert done.returncode == 0, done.stderr
    tree = tmp_path / RELEASE.path
    assert (tree / OAUTH2_PROXY / "kustomization.yaml").is_file() and (tree / "LICENSE").is_file()
    assert [p.name for p in (tmp_path / ".manifests").iterdir()] == [RELEASE.sha256]  # no staging left
    assert _fetch(tmp_path / "elsewhere", tmp_path).returncode == 0  # placed already: nothing to read


def test_a_missing_archive_is_exit_2_with_one_line(tmp_path: Path) -> None:
    done = _fetch(tmp_path, tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and RELEASE.archive in done.stderr and "docs/manifests.md" in done.stderr


def test_an_archive_that_differs_from_its_pin_is_exit_2_with_one_line_and_not_placed(tmp_path: Path) -> None:
    (tmp_path / RELEASE.archive).write_bytes(b"not the release")
    done = _fetch(tmp_path, tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"sha256 {sha256_of(tmp_path / RELEASE.archive)}, but" in done.stderr and RELEASE.sha256 in done.stderr
    assert not (tmp_path / ".manifests").exists()


@needs_vendored
def test_a_pin_naming_another_digest_refuses_the_vendored_archive(tmp_path: Path) -> None:
    wrong = Manifests(**{**RELEASE.__dict__, "sha256": "0" * 64})
    with pytest.raises(ManifestCacheError, match=f"pins {RELEASE.archive} at {'0' * 64}"):
        ensure(wrong, root=tmp_path, source=SHARED)
    assert not (tmp_path / wrong.path).exists()


def test_a_directory_that_is_not_an_overlay_of_a_pinned_release_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text("import pulumi_kubernetes as k8s\n"
                       "k8s.kustomize.v2.Directory('d', directory='https://github.com/kubeflow/manifests/common')\n")
    with pytest.raises(ManifestCacheError, match="not an overlay of a pinned release"):
        engine.run("echo", {}, program_path=program)


def test_an_overlay_edited_by_hand_or_naming_an_unpinned_tree_is_refused() -> None:
    folder = write_overlay(RELEASE, "common/dex/base")
    file = paths.ROOT / folder / "kustomization.yaml"
    text = file.read_text(encoding="utf-8")
    try:
        file.write_text(text + "namespace: elsewhere\n", encoding="utf-8")
        with pytest.raises(ManifestCacheError, match="not as kustomize_directory\\(\\) wrote it"):
            kustomize.source_of("d::x", {"directory": folder})
        file.write_text(text.replace(RELEASE.sha256, "f" * 64), encoding="utf-8")
        with pytest.raises(ManifestCacheError, match="not an overlay of a pinned release"):
            kustomize.source_of("d::x", {"directory": folder})
    finally:
        file.write_text(text, encoding="utf-8")
    assert kustomize.source_of("d::x", {"directory": folder}).path == "common/dex/base"


@pytest.mark.parametrize("path", ["../../etc", "/common/dex/base", "."])
def test_a_path_outside_the_release_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match=r"a folder inside kubeflow-manifests 26\.03"):
        overlay_text(RELEASE, path)


def test_the_overlay_names_the_release_folder_then_our_patches() -> None:
    patch = {"patch": "[]", "target": {"kind": "Service", "name": "dex"}}
    assert yaml.safe_load(overlay_text(RELEASE, "common/dex/./base", [patch])) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [f"../../{RELEASE.sha256}/common/dex/base"], "patches": [patch]}


def _release_archive(where: Path, kustomization: str) -> Manifests:
    tree = where / "src" / "kf-test"
    (tree / "common" / "x").mkdir(parents=True)
    (tree / "common" / "x" / "kustomization.yaml").write_text(kustomization, encoding="utf-8")
    archive = where / "kf-test.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="kf-test")
    return Manifests("kf-test", "0.1", archive.name, sha256_of(archive), "kf-test", "https://example.invalid", "0")


@pytest.mark.parametrize(("entry", "refused"), [
    ("https://github.com/argoproj/argo-workflows/manifests/base/crds/minimal?ref=v3.7.3", True),
    ("github.com/argoproj/argo-workflows//manifests/base?ref=v3.7.3", True),
    ("../../localized-files/github.com/argoproj/argo-workflows/v3.7.3/manifests/base  # localized", False),
])
def test_a_release_that_names_a_remote_base_is_refused_not_placed(tmp_path: Path, entry: str, refused: bool) -> None:
    """kustomize would fetch a remote base over the network, on `pulumi up` too: such a release is not placed."""
    release = _release_archive(tmp_path, f"resources:\n- {entry}\n")
    if refused:
        with pytest.raises(ManifestCacheError, match=r"1 remote base\(s\), first common/x/kustomization.yaml"):
            ensure(release, root=tmp_path, source=tmp_path)
        assert not (tmp_path / release.path).exists()
    else:
        assert (ensure(release, root=tmp_path, source=tmp_path) / "common" / "x" / "kustomization.yaml").is_file()


def test_the_commands_report_a_manifests_problem_as_bad_input_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    def missing(*_: object, **__: object) -> engine.Capture:
        raise ManifestCacheError(f"{RELEASE.path} is not placed and x/{RELEASE.archive} is missing")

    monkeypatch.setattr(engine, "run", missing)
    assert main(["plan", "local"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {RELEASE.path} is not placed and x/{RELEASE.archive} is missing\n"
