"""Charts pinned and local: every chart the platform installs is pinned by version and content digest,
placed in the local cache only after verification, and installed from there."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from infra.offline import charts
from infra.offline.chartcache import VENDORED, ChartCacheError, content_digest, ensure
from infra.offline.charts import Source, read_by_templates, unknown_keys
from infra.spec.versions import CHART_DIGESTS, Chart, Versions, installable_charts
from tests.conftest import STACKS, capture_of

needs_vendored = pytest.mark.skipif(not VENDORED.is_dir(), reason="no vendored charts in ../shared/charts")


def _archive(path: Path, files: dict[str, bytes], mtime: int = 0) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(body), mtime
            tar.addfile(info, io.BytesIO(body))
    path.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9 if mtime else 1, mtime=mtime))
    return path


def test_content_digest_ignores_packaging_and_sees_every_byte(tmp_path: Path) -> None:
    files = {"c/Chart.yaml": b"name: c\n", "c/values.yaml": b"a: 1\n"}
    one = _archive(tmp_path / "one.tgz", files)
    other = _archive(tmp_path / "other.tgz", dict(reversed(files.items())), mtime=1_700_000_000)
    assert one.read_bytes() != other.read_bytes()
    assert content_digest(one) == content_digest(other)
    changed = _archive(tmp_path / "changed.tgz", {**files, "c/values.yaml": b"a: 2\n"})
    assert content_digest(changed) != content_digest(one)


def test_default_pins_are_the_vendored_archives() -> None:
    charts = Versions().charts()
    assert {field: chart.archive for field, chart in charts.items()} == {
        "kueue": "kueue-0.19.2.tgz", "trainer": "kubeflow-trainer-2.2.1.tgz", "jobset": "jobset-0.12.0.tgz"}
    assert all(chart.digest for chart in (*charts.values(), *installable_charts()))


@needs_vendored
def test_every_pinned_digest_matches_its_vendored_archive() -> None:
    for archive, digest in CHART_DIGESTS.items():
        assert content_digest(VENDORED / archive) == digest, archive


@needs_vendored
def test_a_tampered_archive_is_refused_and_not_cached(tmp_path: Path) -> None:
    chart = Versions().jobset_chart()
    vendored = tmp_path / "vendored"
    vendored.mkdir()
    with tarfile.open(VENDORED / chart.archive) as source:
        files = {m.name: (source.extractfile(m) or io.BytesIO()).read() for m in source.getmembers() if m.isfile()}
    files["jobset/values.yaml"] += b"\n# edited\n"
    _archive(vendored / chart.archive, files)
    with pytest.raises(ChartCacheError, match="content digest"):
        ensure(chart, root=tmp_path, vendored=vendored)
    assert not (tmp_path / chart.path).exists()
    placed = ensure(chart, root=tmp_path, vendored=VENDORED)
    assert placed == tmp_path / chart.path and content_digest(placed) == chart.digest


@needs_vendored
def test_two_writers_placing_one_chart_at_once_both_succeed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`trainyard diff` renders two revisions at once on one cache: a second writer that places the same chart while
    the first is between copying and renaming must leave both with the verified archive."""
    chart = Versions().jobset_chart()
    rename = Path.replace
    renames: list[Path] = []

    def other_writer_first(self: Path, target: Path) -> Path:  # type: ignore[override]
        renames.append(target)
        if len(renames) == 1:
            ensure(chart, root=tmp_path, vendored=VENDORED)
        return rename(self, target)

    monkeypatch.setattr(Path, "replace", other_writer_first)
    placed = ensure(chart, root=tmp_path, vendored=VENDORED)
    assert renames == [placed, placed] and content_digest(placed) == chart.digest
    assert [p.name for p in placed.parent.iterdir()] == [placed.name]


def test_missing_archive_or_digest_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ChartCacheError, match="run scripts/fetch-charts"):
        ensure(Versions().kueue_chart(), root=tmp_path, vendored=tmp_path)
    with pytest.raises(ChartCacheError, match=r"fetch-charts --bump kueue 0\.19\.4"):
        ensure(Chart("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.19.4"), root=tmp_path)


@pytest.mark.parametrize("stack", STACKS)
def test_every_chart_is_installed_from_its_verified_cache_path(stack: str) -> None:
    charts = [r for r in capture_of(stack).resources if r.type == "kubernetes:helm.sh/v4:Chart"]
    assert charts
    by_archive = {chart.archive: chart for chart in installable_charts()}
    for record in charts:
        path = record.inputs["chart"]
        digest, archive = path.removeprefix(".charts/").split("/")
        assert by_archive[archive].path == path and CHART_DIGESTS[archive] == f"sha256:{digest}"
        assert "repositoryOpts" not in record.inputs and record.inputs["version"] == by_archive[archive].version


# --- rendered offline -------------------------------------------------------------------------------------

def test_unknown_values_keys_are_found_at_any_depth_and_free_form_defaults_take_anything() -> None:
    defaults = {"image": {"repository": "r", "tag": "t"}, "nodeSelector": {}, "extra": None, "list": [1]}
    assert list(unknown_keys({"image": {"repository": "x", "tag": "y"}}, defaults)) == []
    assert list(unknown_keys({"image": {"registry": "x"}}, defaults)) == ["image.registry"]
    assert list(unknown_keys({"imag": {}}, defaults)) == ["imag"]
    assert list(unknown_keys({"nodeSelector": {"a": "b"}, "extra": {"c": 1}, "list": [{"d": 2}]}, defaults)) == []


def _tiny_chart(tmp_path: Path, template: str) -> Path:
    return _archive(tmp_path / "tiny-0.1.0.tgz", {"tiny/Chart.yaml": b"apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
                                                  "tiny/templates/probe.yaml": template.encode()})


def test_the_stack_kubernetes_version_and_chart_apis_are_helm_capabilities(tmp_path: Path) -> None:
    archive = _tiny_chart(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n"
                          "  kube: {{ .Capabilities.KubeVersion.Version }}\n"
                          "  monitoring: '{{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1\" }}'\n"
                          "  release: {{ .Release.Name }}/{{ .Release.Namespace }}\n")
    source = Source("kubernetes:helm.sh/v4:Chart::probe", "probe", "probe-ns", Chart("tiny", "", "0.1.0"), {})
    for kubernetes, apis, has in (("1.33", [], "false"), ("1.34", ["monitoring.coreos.com/v1"], "true")):
        [probe], _, _ = charts._render(source, archive, kubernetes, apis)
        assert probe["data"] == {"kube": f"v{kubernetes}.0", "monitoring": has, "release": "probe/probe-ns"}


@pytest.mark.parametrize("stack", STACKS)
def test_chart_objects_join_the_capture_marked_with_their_chart(stack: str) -> None:
    capture = capture_of(stack)
    # A vendored kustomization's objects are marked with their Directory as a chart's are (docs/manifests.md).
    charts_by_ref = {r.ref(): r for r in capture.resources
                     if r.type in ("kubernetes:helm.sh/v4:Chart", "kubernetes:kustomize/v2:Directory")}
    installed = [r for r in capture.resources if r.chart]
    assert {r.chart for r in installed} == set(charts_by_ref)
    for record in installed:
        assert record.parent == record.chart and record.provider == charts_by_ref[record.chart].provider
        # CRDs, and Pipelines' journal and definitions volumes (infra/platform/kfp/pipelines.py) and each team
        # registry's database volume (infra/platform/models/registry.py)
        journal = record.inputs["kind"] == "PersistentVolumeClaim" and (
            record.chart.endswith("::pipelines") or record.chart.rpartition("::")[2].startswith("model-registry-"))
        assert record.retain_on_delete == (record.inputs["kind"] == "CustomResourceDefinition" or journal)
    kinds = {(r.chart.rpartition("::")[2], r.inputs["kind"]) for r in installed}
    assert {("kueue", "Deployment"), ("jobset", "Deployment"), ("kubeflow-trainer", "Deployment")} <= kinds
    assert all(not rendered.problems for rendered in capture.charts), [r.problems for r in capture.charts]


@pytest.mark.parametrize("stack", STACKS)
def test_the_jobset_controller_image_is_the_released_one(stack: str) -> None:
    [deployment] = [r.inputs for r in capture_of(stack).resources
                    if r.chart.endswith("::jobset") and r.inputs["kind"] == "Deployment"]
    images = {c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.k8s.io/jobset/jobset:v0.12.0"}


def test_a_disabled_subchart_installs_none_of_its_crds() -> None:
    """Trainer bundles JobSet 0.11's CRD; with jobset.install=false Helm installs only the JobSet chart's."""
    crds = [(r.chart, r.inputs["metadata"]["name"]) for r in capture_of("local").resources
            if r.inputs.get("kind") == "CustomResourceDefinition" and "jobset" in r.inputs["metadata"]["name"]]
    assert crds == [("kubernetes:helm.sh/v4:Chart::jobset", "jobsets.jobset.x-k8s.io")]


def test_a_key_values_yaml_leaves_out_counts_only_when_a_template_reads_it() -> None:
    templates = ("{{- if .Values.dcgmExporter.config.name }}\n"
                 "{{- range $key, $value := .Values.extraArgs }}\n- --{{ $key }}={{ $value }}\n{{- end }}")
    assert read_by_templates("dcgmExporter.config", templates)
    assert read_by_templates("extraArgs.balance-similar-node-groups", templates)  # a ranged, free-form map
    assert not read_by_templates("dcgmExporter.configs", templates)
    assert not read_by_templates("extraArg.v", templates)
    assert not read_by_templates("image", templates)


def test_a_template_parsed_before_gives_each_caller_its_own_equal_objects() -> None:
    """Template output is parsed once per text (charts._parsed): every later caller gets the same documents, an
    anchor's parts still one object within a document, and objects of its own to change."""
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: &l {app: x}, annotations: *l}\n"
            "data: {k: '1'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n---\n# only a comment\n")
    manifests = {"templates/a.yaml": text, "templates/NOTES.txt": "not YAML: {"}
    first, second = list(charts._documents(manifests)), list(charts._documents(manifests))
    assert first == second == [d for d in yaml.safe_load_all(text) if d]
    for documents in (first, second):
        assert documents[0]["metadata"]["labels"] is documents[0]["metadata"]["annotations"]
    assert second[0]["metadata"]["labels"] is not first[0]["metadata"]["labels"]
    first[0]["data"]["k"] = "changed"
    assert next(iter(charts._documents(manifests)))["data"]["k"] == "1"
