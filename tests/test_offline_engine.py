"""The offline engine: what each team and pool becomes, determinism, duplicate detection."""

from __future__ import annotations

import dataclasses
import filecmp
import functools
import gc
import importlib
import inspect
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pulumi
import pytest

from infra.kit.objects import _retain_crds
from infra.offline import engine, plan
from infra.offline.chartcache import ChartCacheError
from infra.offline.charts import CHART_TYPE
from infra.offline.plan import objects, plan_document, render_plan_json, write
from infra.spec.input.load import PLATFORM_KEY, read_stack_config
from infra.spec.pools import GPU_RESOURCE, POOL_LABEL
from infra.spec.versions import Versions
from tests.conftest import ALL_STACKS, STACKS, capture_of, kube_objects, platform_of, stack_file


def _by_name(objs: list[dict], name: str, namespace: str | None = None) -> dict:
    matches = [o for o in objs if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace]
    assert len(matches) == 1, f"{name} in {namespace}: {len(matches)} objects"
    return matches[0]


def test_each_team_becomes_namespaces_quota_and_queues() -> None:
    capture, platform = capture_of("onprem-lab"), platform_of("onprem-lab")
    for team_name, team in platform.spec.teams.items():
        cq = _by_name(kube_objects(capture, "ClusterQueue"), team_name)
        selected = cq["spec"]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert selected == [*platform.spec.namespaces(team_name), f"{team_name}-accept"]
        flavors = {f["name"]: f for f in cq["spec"]["resourceGroups"][0]["flavors"]}
        assert set(flavors) == set(team.quota)
        for pool_name in team.quota:
            quota = team.pool_quota(pool_name)
            if quota.gpus is not None:
                gpu = next(r for r in flavors[pool_name]["resources"] if r["name"] == GPU_RESOURCE)
                assert int(gpu["nominalQuota"]) == quota.gpus
        for ns in platform.spec.namespaces(team_name):
            _by_name(kube_objects(capture, "Namespace"), ns)
            lq = _by_name(kube_objects(capture, "LocalQueue"), team_name, ns)
            assert lq["spec"]["clusterQueue"] == team_name


def test_each_pool_becomes_labelled_tainted_nodes_and_a_flavor() -> None:
    capture, platform = capture_of("onprem-lab"), platform_of("onprem-lab")
    patches = {r.inputs["metadata"]["name"]: r for r in capture.resources if r.type == "kubernetes:core/v1:NodePatch"}
    for pool_name, pool in platform.spec.pools.items():
        for node in pool.nodes or []:
            record = patches[node]
            assert record.retain_on_delete, "destroy must not strip labels from existing nodes"
            assert record.inputs["metadata"]["labels"][POOL_LABEL] == pool_name
            taints = record.inputs.get("spec", {}).get("taints", [])
            assert bool(taints) == pool.is_gpu
        flavor = _by_name(kube_objects(capture, "ResourceFlavor"), pool_name)
        assert flavor["spec"]["nodeLabels"][POOL_LABEL] == pool_name
        assert ("topologyName" in flavor["spec"]) == (pool.topology is not None)
    assert len(patches) == sum(len(p.nodes or []) for p in platform.spec.pools.values())


def test_queue_objects_wait_for_the_kueue_release() -> None:
    capture = capture_of("onprem-lab")
    for record in capture.resources:
        if record.type.startswith("kubernetes:kueue.x-k8s.io/"):
            assert "kubernetes:helm.sh/v4:Chart::kueue" in record.depends_on, record.name
        if record.type.endswith(":ClusterTrainingRuntime"):
            assert "kubernetes:helm.sh/v4:Chart::kubeflow-trainer" in record.depends_on


def test_everything_in_cluster_uses_the_stack_provider() -> None:
    """Node patches have their own provider (the stack provider waits for them); everything else uses it."""
    for record in capture_of("onprem-lab").resources:
        if record.custom and record.type.startswith("kubernetes:"):
            expected = "nodes" if record.type == "kubernetes:core/v1:NodePatch" else "kubernetes"
            assert record.provider == f"pulumi:providers:kubernetes::{expected}", record.name


def test_kubeconfig_is_masked_as_a_secret() -> None:
    provider = next(r for r in capture_of("onprem-lab").resources if r.type == "pulumi:providers:kubernetes")
    config = read_stack_config(stack_file("onprem-lab"))
    # the lab file has no kubeconfig: the provider falls back to the ambient one, never a plaintext copy
    assert "kubeconfig" not in provider.inputs or provider.inputs["kubeconfig"] == "[secret]"
    run = engine.run("onprem-lab", {**config, "trainyard:kubeconfig": {"secure": "v1:abcd"}})
    provider = next(r for r in run.resources if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"


def test_two_runs_render_byte_identical_trees(tmp_path: Path) -> None:
    config = read_stack_config(stack_file("onprem-lab"))
    first, second = tmp_path / "a", tmp_path / "b"
    write(capture_of("onprem-lab"), first)  # the session's run, made in another process
    write(engine.run("onprem-lab", config), second)
    comparison = filecmp.dircmp(first, second)
    assert (first / "plan.json").read_bytes() == (second / "plan.json").read_bytes()
    stack = [comparison]
    files = 0
    while stack:
        current = stack.pop()
        assert not current.left_only and not current.right_only and not current.diff_files, (
            current.left_only, current.right_only, current.diff_files)
        files += len(current.same_files)
        stack.extend(current.subdirs.values())
    assert files > 20


def _tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_chart_manifests_read_from_the_cache_are_those_written_afresh(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    full = capture_of("local")
    sizes = Counter(r.chart for r in full.resources if r.chart)
    two_charts = sorted(sizes, key=lambda chart: (sizes[chart], chart))[:2]  # the smallest: the test stays quick
    capture = dataclasses.replace(full, resources=tuple(r for r in full.resources if r.chart in ("", *two_charts)))
    monkeypatch.setenv("TRAINYARD_CACHE", str(tmp_path / "cache"))
    with monkeypatch.context() as uncached:
        uncached.setattr(plan, "cached", lambda kind, key, compute: compute())
        write(capture, tmp_path / "fresh")
    write(capture, tmp_path / "stored")
    monkeypatch.setattr(plan, "_all_texts", lambda objs: pytest.fail("a chart's manifests were written again"))
    write(capture, tmp_path / "read")
    fresh = _tree(tmp_path / "fresh")
    assert sum(1 for name in fresh if name.startswith("manifests/")) > len(capture.resources) // 2
    assert fresh == _tree(tmp_path / "stored") == _tree(tmp_path / "read")


def _chart_capture(data: dict[str, Any]) -> engine.Capture:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}, "data": data}
    record = engine.Registration(type="kubernetes:core/v1:ConfigMap", name="c", urn="urn:c", parent="", custom=True,
                                 remote=False, inputs=obj, depends_on=(), protect=False, retain_on_delete=False,
                                 provider="", chart=f"{CHART_TYPE}::x")
    return engine.Capture(stack="s", project="p", resources=(record,), outputs={})


def test_a_cached_chart_manifest_is_never_another_objects_text(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects Python finds equal (1, 1.0, True), that print alike in JSON, or that differ only in sharing a part
    (a YAML anchor) each get their own text from one cache."""
    shared = {"k": "v"}
    variants: list[dict[str, Any]] = [{"a": shared, "b": shared}, {"a": {"k": "v"}, "b": {"k": "v"}},
                                      {"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": None}, {"a": 1}]
    monkeypatch.setenv("TRAINYARD_CACHE", str(tmp_path / "cache"))
    texts = []
    for number, data in enumerate(variants):
        write(_chart_capture(data), tmp_path / str(number))
        texts.append((tmp_path / str(number) / "manifests" / "n" / "ConfigMap-c.yaml").read_text(encoding="utf-8"))
    assert texts == [plan.manifest_text(_chart_capture(data).resources[0].inputs) for data in variants]
    assert "&id001" in texts[0] and len(set(texts)) == len(variants) - 1  # the last repeats the third


@pytest.mark.parametrize("stack", STACKS)
def test_charts_are_listed_by_name_not_in_the_order_they_registered(stack: str) -> None:
    """Registrations arrive as their inputs resolve, which varies between runs; plan.json must not follow that."""
    refs = [rendered.source.ref for rendered in capture_of(stack).charts]
    assert len(refs) > 1 and refs == sorted(set(refs))


def test_duplicate_urns_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mocks merge two registrations with one URN silently; the engine must not."""
    import infra.platform.tenancy as tenancy

    original = tenancy.Tenancy._namespace

    def twice(self, team, ns, provider):  # type: ignore[no-untyped-def]
        original(self, team, ns, provider)
        pulumi.ComponentResource("trainyard:test:Dup", "dup", None, pulumi.ResourceOptions(parent=self))

    monkeypatch.setattr(tenancy.Tenancy, "_namespace", twice)
    with pytest.raises(engine.DuplicateResource, match="registered twice"):
        engine.run("onprem-lab", read_stack_config(stack_file("onprem-lab")))


def test_plan_json_is_sorted_and_complete() -> None:
    capture = capture_of("onprem-lab")
    keys = [(r.type, r.name) for r in capture.resources]
    assert keys == sorted(keys)
    text = render_plan_json(capture)
    assert '"stack": "onprem-lab"' in text and '"retainOnDelete": true' in text
    config = read_stack_config(stack_file("onprem-lab"))
    assert config[PLATFORM_KEY]["cluster"]["existing"]["context"] in text


def test_outputs_echo_the_inputs_for_objects_and_add_computed_ones(tmp_path: Path) -> None:
    """The engine answers registrations itself (outputs = inputs, no decode/encode round trip); what a program
    reads back must still be exactly what it declared, and types with computed outputs still get them."""
    program = tmp_path / "program.py"
    program.write_text(
        "import pulumi\n"
        "import pulumi_kubernetes as k8s\n"
        "provider = k8s.Provider('k', context='c')\n"
        "opts = pulumi.ResourceOptions(provider=provider)\n"
        "cm = k8s.core.v1.ConfigMap('cm', metadata={'name': 'cm', 'labels': {'a': 'b'}},\n"
        "                           data={'k': 'v', 'nested': '{\"x\": [1, 2]}'}, opts=opts)\n"
        "raw = pulumi.CustomResource('kubernetes:core/v1:ConfigMap', 'raw',\n"
        "                            {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'raw'},\n"
        "                             'data': {'n': '1'}}, opts)\n"
        f"chart = k8s.helm.v4.Chart('c', chart='{Versions().jobset_chart().path}', version='0.12.0', opts=opts)\n"
        "pulumi.export('kubernetes', '1.34')\n"
        "pulumi.export('data', cm.data)\n"
        "pulumi.export('labels', cm.metadata.labels)\n"
        "pulumi.export('id', raw.id)\n"
        "pulumi.export('chart', chart.resources)\n"
    )
    capture = engine.run("echo", {}, program_path=program)
    assert capture.outputs == {"data": {"k": "v", "nested": '{"x": [1, 2]}'}, "labels": {"a": "b"},
                               "id": "raw-id", "chart": [], "kubernetes": "1.34"}
    installed = [r for r in capture.resources if r.chart == "kubernetes:helm.sh/v4:Chart::c"]
    assert installed and all(r.parent == "kubernetes:helm.sh/v4:Chart::c" for r in installed)
    assert {"kubernetes:apps/v1:Deployment", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"} <= {
        r.type for r in installed}


def test_the_sdks_debug_lines_reach_a_logger_that_logs_debug_and_only_then(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The engine builds the SDK's per-RPC debug lines only when the root logger would read them (the mocks' engine
    hands them to it): the same lines at debug level, none otherwise; the SDK's own debug is back after a run."""
    program = tmp_path / "program.py"
    program.write_text("import pulumi_kubernetes as k8s\nk8s.core.v1.ConfigMap('cm', metadata={'name': 'cm'})\n")
    sdk_debug = pulumi.log.debug
    with caplog.at_level(logging.DEBUG):
        engine.run("echo", {}, program_path=program)
    registering = "registering resource: ty=kubernetes:core/v1:ConfigMap"
    assert any(r.levelno == logging.DEBUG and r.getMessage().startswith(registering) for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        engine.run("echo", {}, program_path=program)
    assert not [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert pulumi.log.debug is sdk_debug


def test_full_collections_are_rarer_while_a_program_runs_and_as_before_after(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text("import gc\nimport pulumi\npulumi.export('thresholds', list(gc.get_threshold()))\n")
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        assert engine.run("echo", {}, program_path=program).outputs["thresholds"] == [700, 10, 1000]
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_chart_not_installed_from_the_verified_cache_is_refused(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text("import pulumi_kubernetes as k8s\n"
                       "k8s.helm.v4.Chart('c', chart='oci://example.invalid/c', version='1.0.0')\n")
    with pytest.raises(ChartCacheError, match="not a pinned archive in the chart cache"):
        engine.run("echo", {}, program_path=program)


@functools.cache
def _class_source(module: str, kind: str) -> str:
    return inspect.getsource(getattr(importlib.import_module(module), kind))


def test_objects_register_under_the_types_pulumi_kubernetes_uses() -> None:
    """kube_object registers built-in kinds under the type of pulumi-kubernetes' own class (so the provider,
    policies and existing state treat them alike), and custom resources as its CustomResource does."""
    checked = 0
    for stack in ("onprem-lab", "aws-prod"):
        for record, obj in objects(capture_of(stack)):
            if record.type.endswith("Patch"):
                continue
            group, _, version = obj["apiVersion"].rpartition("/")
            try:
                module = importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0] or 'core'}.{version}")
                getattr(module, obj["kind"])  # networking.istio.io/v1 Sidecar is not networking.k8s.io's
            except (ModuleNotFoundError, AttributeError):
                assert record.type == f"kubernetes:{obj['apiVersion']}:{obj['kind']}", record.ref()
                continue
            assert f"'{record.type}'" in _class_source(module.__name__, obj["kind"]), record.ref()
            checked += 1
    assert checked > 50



@pytest.mark.parametrize("stack", ALL_STACKS)
def test_plan_json_has_the_layout_of_the_standard_library_encoder(stack: str) -> None:
    """Same bytes as json.dumps(indent=2, sort_keys=True, ensure_ascii=False) on every stack (the plans hold no
    float, the one kind the two encoders spell differently: 1e16 against 1e+16)."""
    capture = capture_of(stack)
    expected = json.dumps(plan_document(capture), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert render_plan_json(capture) == expected


def test_plan_json_keeps_unicode_escapes_and_empty_containers_as_the_standard_library_does() -> None:
    capture = engine.Capture("s", "p", (), {"text": "ü\n\t\u2028\x7f\"\\", "empty": {}, "none": [], "n": None,
                                             "flag": True, "big": 2**62, "neg": -3, "é": 1, "Z": 2}, ())
    expected = json.dumps(plan_document(capture), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert render_plan_json(capture) == expected


def _chart_children(transforms: list[Any]) -> dict[str, engine.Registration]:
    chart = engine.Registration(type=CHART_TYPE, name="velero", urn=f"urn:pulumi:s::p::{CHART_TYPE}::velero",
                                parent="", custom=False, remote=True, inputs={}, depends_on=(), protect=False,
                                retain_on_delete=False, provider="")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "backups.velero.io"}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "velero", "namespace": "velero"}}
    return {child.inputs["kind"]: child for child in engine._children(chart, (crd, config), transforms)}


def test_a_charts_transforms_decide_what_its_children_keep() -> None:
    """As Pulumi's engine does for a component's children: no transform, nothing retained; helm_chart()'s
    transform retains CRDs only; what a transform returns (props and options) is what is registered."""
    assert not any(child.retain_on_delete for child in _chart_children([]).values())
    kept = _chart_children([_retain_crds])
    assert kept["CustomResourceDefinition"].retain_on_delete and not kept["ConfigMap"].retain_on_delete

    def label_and_protect(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        props = dict(args.props)
        props["metadata"] = {**cast(dict[str, Any], props["metadata"]), "labels": {"seen": "yes"}}
        return pulumi.ResourceTransformResult(props=props, opts=pulumi.ResourceOptions.merge(
            args.opts, pulumi.ResourceOptions(protect=True)))

    both = _chart_children([_retain_crds, label_and_protect])
    assert all(child.protect and child.inputs["metadata"]["labels"] == {"seen": "yes"} for child in both.values())
    assert both["CustomResourceDefinition"].retain_on_delete and not both["ConfigMap"].retain_on_delete
