"""What the charts install is checked like our own objects: hooks helm.v4.Chart would skip, objects declared
twice, every image fully qualified and pinned, and integers that stay integers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.checks.charts import check_chart_hooks, check_declared_once, check_images
from infra.checks.context import Context
from infra.commands import main
from infra.kit.manifests import ManifestLoader
from infra.offline.engine import Capture, _plain
from infra.offline.images import object_images, qualified, stack_images
from infra.offline.plan import manifest_path, objects, render_plan_json
from tests.conftest import STACKS, capture_of, platform_of, write_selected

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

STACK = "local"


def _context(capture: Capture) -> Context:
    return Context(platform_of(STACK), capture, None)


def _with_hook(hook: str) -> Capture:
    capture = capture_of(STACK)
    kueue = next(r for r in capture.charts if r.source.release == "kueue")
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "cert-gen", "namespace": "kueue-system", "annotations": {"helm.sh/hook": hook}}}
    charts = tuple(dataclasses.replace(r, hooks=(*r.hooks, job)) if r is kueue else r for r in capture.charts)
    return dataclasses.replace(capture, charts=charts)


@pytest.mark.parametrize(("hook", "fails"), [("pre-install", True), ("post-install,post-upgrade", True),
                                             ("pre-upgrade", True), ("pre-delete", False), ("test", False),
                                             ("post-delete", False)])
def test_an_install_or_upgrade_hook_fails_the_plan_a_delete_or_test_hook_does_not(hook: str, fails: bool) -> None:
    findings = check_chart_hooks(_context(_with_hook(hook)))
    assert [f.subject for f in findings] == (["chart kueue"] if fails else [])
    assert all("Job cert-gen" in f.message and f.severity == "error" for f in findings)


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_relies_on_no_skipped_hook(stack: str) -> None:
    assert check_chart_hooks(Context(platform_of(stack), capture_of(stack), None)) == []


def test_gpu_operator_hooks_left_are_delete_hooks_only() -> None:
    [gpu] = [r for r in capture_of("onprem-lab").charts if r.source.release == "gpu-operator"]
    hooks = {h["metadata"]["annotations"]["helm.sh/hook"] for h in gpu.hooks}
    assert hooks and hooks <= {"pre-delete", "post-delete"}


def test_an_object_from_a_chart_and_from_the_program_is_declared_twice() -> None:
    capture = capture_of(STACK)
    ours = next(r for r in capture.resources if not r.chart and r.inputs.get("kind") == "Namespace")
    clash = dataclasses.replace(ours, name="copy", urn=ours.urn + "-copy", chart="kubernetes:helm.sh/v4:Chart::kueue")
    findings = check_declared_once(_context(dataclasses.replace(capture, resources=(*capture.resources, clash))))
    assert [f.subject for f in findings] == [f"Namespace/{ours.inputs['metadata']['name']}"]
    assert check_declared_once(_context(capture)) == []


@pytest.mark.parametrize(("image", "ok"), [
    ("registry.k8s.io/jobset/jobset:v0.12.0", True),
    ("nvcr.io/nvidia/driver@sha256:" + "a" * 64, True),
    ("localhost:5000/x:1", True),
    ("registry.example.com:5000/ml/x:1", True),
    ("jobset/jobset:v0.12.0", False),  # Docker Hub implied: not fully qualified
    ("python:3.12", False),
    ("docker.io/library/python", False),  # no tag
    ("docker.io/library/python:latest", False),
])
def test_fully_qualified_and_pinned(image: str, ok: bool) -> None:
    assert qualified(image) is ok


def test_operator_images_include_enabled_operands_only() -> None:
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "spec": {
        "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07",
                   "manager": {"repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager",
                               "version": "v0.12.0"}},
        "vgpuManager": {"enabled": False, "image": "vgpu-manager", "repository": "", "version": ""}}}
    assert object_images(policy) == {"nvcr.io/nvidia/driver:595.91.07",
                                     "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"}


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_of_every_stack_is_fully_qualified(stack: str) -> None:
    capture = capture_of(stack)
    objects = [r.inputs for r in capture.resources if r.custom and r.type.startswith("kubernetes:")]
    images = stack_images(objects)
    assert "registry.k8s.io/jobset/jobset:v0.12.0" in images and "registry.k8s.io/kueue/kueue:v0.19.2" in images
    assert check_images(Context(platform_of(stack), capture, None)) == []
    if stack == "onprem-lab":  # the operator's operands and the Velero plugin come through CRs and values
        assert any(image.startswith("nvcr.io/nvidia/k8s/dcgm-exporter:") for image in images)
        assert any("velero-plugin-for-" in image for image in images)


def test_an_unqualified_image_fails_the_plan() -> None:
    capture = capture_of(STACK)
    record = next(r for r in capture.resources if r.chart.endswith("::jobset") and r.inputs["kind"] == "Deployment")
    broken = json.loads(json.dumps(record.inputs).replace("registry.k8s.io/jobset/jobset", "jobset/jobset"))
    edited = tuple(dataclasses.replace(r, inputs=broken) if r is record else r for r in capture.resources)
    [finding] = check_images(_context(dataclasses.replace(capture, resources=edited)))
    assert "jobset/jobset:v0.12.0" in finding.message and finding.severity == "error"


def test_images_command_lists_them_sorted_once_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["images", STACK]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == sorted(set(lines)) and all(qualified(line) for line in lines)
    assert "registry.k8s.io/jobset/jobset:v0.12.0" in lines


def _floats(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [f for item in value.values() for f in _floats(item)]
    if isinstance(value, list):
        return [f for item in value for f in _floats(item)]
    return [value] if isinstance(value, float) else []


def test_whole_numbers_decode_as_integers_and_fractions_stay() -> None:
    assert _plain({"port": 53.0, "ratio": 0.5, "list": [1.0, 2.5], "flag": True}) == {
        "port": 53, "ratio": 0.5, "list": [1, 2.5], "flag": True}
    assert type(_plain(53.0)) is int and _plain(True) is True


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_and_manifests_hold_integers(stack: str, tmp_path: Path) -> None:
    capture = capture_of(stack)
    assert _floats(json.loads(render_plan_json(capture))) == []  # every object, the charts' too
    # The manifests the program registers (numbers that crossed the SDK's protobuf, where 53 became 53.0), written
    # by the writer and read back from disk; the charts' objects (parsed from YAML, megabytes of CRDs) are checked
    # in plan.json above.
    write_selected(capture, tmp_path, lambda record: not record.chart)
    own = [tmp_path / "manifests" / manifest_path(obj) for record, obj in objects(capture) if not record.chart]
    assert len(own) > 50
    for path in own:
        assert _floats(yaml.load(path.read_text(encoding="utf-8"), Loader=ManifestLoader)) == [], path
    ports = [port["port"] for r in capture.resources if r.inputs.get("kind") == "NetworkPolicy"
             for rule in r.inputs["spec"].get("egress", []) for port in rule.get("ports", [])]
    assert 53 in ports and all(type(port) is int for port in ports if not isinstance(port, str))
