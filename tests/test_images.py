"""`trainyard images` names what the nodes will pull: every image reference in the render (containers, operator
arguments, the GPU Operator's operand entries) and the tags operators derive (the driver's `-<os>` suffix), and
nothing a stack never runs. The scan here reads every string of every rendered object, independently of
infra/offline/images.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.checks.charts import check_driver_image_known
from infra.checks.context import Context
from infra.commands import main
from infra.offline.clusters import split
from infra.offline.plan import objects
from infra.spec import load_file
from tests.conftest import ALL_STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack

# registry (a host with a dot)/path:tag or @sha256, alone or as a flag's value (`--flag=<image>`).
REFERENCE = re.compile(r"(?:^|=)([a-z0-9-]+(?:\.[a-z0-9-]+)+(?::[0-9]+)?/[a-z0-9._/-]+"
                       r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]*|@sha256:[0-9a-f]{64}))$")
# Named in prometheus-operator's arguments, pulled only for a ThanosRuler or a Thanos sidecar: no stack runs one.
NOT_PULLED = {"quay.io/thanos/thanos:v0.42.4"}
DRIVER = "nvcr.io/nvidia/driver"
UBUNTU = "ubuntu24.04"  # what onprem-lab and hybrid-burst's core declare as gpuNodeOs


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value.strip()


def _operand_entries(value: Any) -> Iterator[tuple[str, str, str]]:
    """(repository, image, version) of every switched-on entry of a ClusterPolicy."""
    if isinstance(value, dict):
        if value.get("enabled") is not False:
            if {"repository", "image", "version"} <= set(value) and value["repository"]:
                yield value["repository"], value["image"], str(value["version"])
            for item in value.values():
                yield from _operand_entries(item)
    elif isinstance(value, list):
        for item in value:
            yield from _operand_entries(item)


def referenced(stack_objects: list[dict[str, Any]], node_os: str | None) -> set[str]:
    found: set[str] = set()
    for obj in stack_objects:
        if obj.get("kind") == "CustomResourceDefinition":
            continue  # schema examples, not images
        found |= {match.group(1) for text in _strings(obj) if (match := REFERENCE.search(text))}
        if obj.get("kind") == "ClusterPolicy":
            for repository, image, version in _operand_entries(obj["spec"]):
                tag = f"{version}-{node_os}" if f"{repository}/{image}" == DRIVER else version
                found.add(f"{repository}/{image}:{tag}")
    return found - NOT_PULLED


def _listed(stack: str, capsys: pytest.CaptureFixture[str]) -> set[str]:
    assert main(["images", stack]) == 0
    return set(capsys.readouterr().out.split())


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_images_equal_every_reference_of_the_render(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    platform = platform_of(stack)
    expected: set[str] = set()
    for member, part in split(platform, capture_of(stack)).values():
        expected |= referenced([obj for _, obj in objects(part)], member.gpu_stack.driver_os)
    listed = _listed(stack, capsys)
    assert listed == expected
    reloader = "quay.io/prometheus-operator/prometheus-config-reloader:v0.93.1"
    assert reloader in listed  # every Prometheus and Alertmanager pod runs it
    drivers = {image for image in listed if image.startswith(DRIVER + ":")}
    if stack in ("onprem-lab", "hybrid-burst"):  # the operator installs the driver on the on-prem nodes
        assert drivers == {f"{DRIVER}:595.91.07-{UBUNTU}"}
    else:
        assert drivers == set()


def test_a_precompiled_driver_is_pulled_for_the_nodes_kernel_and_downloads_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    raw["cluster"]["existing"]["precompiledDriver"] = {"kernel": "6.8.0-60-generic"}
    capture = run_raw("onprem-lab", raw)
    driver = kube_objects(capture, "ClusterPolicy")[0]["spec"]["driver"]
    assert (driver["usePrecompiled"], driver["version"]) == (True, "595")
    chart_default = kube_objects(capture_of("onprem-lab"), "ClusterPolicy")[0]["spec"]["driver"]["version"]
    assert chart_default.split(".")[0] == "595"  # the branch of the pinned chart's driver
    platform = load_file(write_stack(tmp_path, raw, "onprem-lab"))
    stack_objects = [obj for _, obj in objects(capture)]
    assert f"{DRIVER}:595-6.8.0-60-generic-{UBUNTU}" in referenced(stack_objects, f"6.8.0-60-generic-{UBUNTU}")
    from infra.offline.images import stack_images

    assert {i for i in stack_images(stack_objects, platform.gpu_stack) if i.startswith(DRIVER + ":")} == {
        f"{DRIVER}:595-6.8.0-60-generic-{UBUNTU}"}
    policies = [p["metadata"]["name"] for p in kube_objects(capture, "NetworkPolicy")
                if p["metadata"].get("namespace") == "gpu-operator"]
    assert policies and not any("driver-packages" in name for name in policies)
    compiled = [p["metadata"]["name"] for p in kube_objects(capture_of("onprem-lab"), "NetworkPolicy")
                if p["metadata"].get("namespace") == "gpu-operator"]
    assert any("driver-packages" in name for name in compiled)  # the operator-built driver fetches headers


def test_a_driver_without_its_nodes_os_is_refused_naming_the_field(tmp_path: Path) -> None:
    assert check_driver_image_known(Context(platform_of("onprem-lab"), capture_of("onprem-lab"), None)) == []
    raw = raw_platform("onprem-lab")
    del raw["cluster"]["existing"]["gpuNodeOs"]
    platform = load_file(write_stack(tmp_path, raw, "onprem-lab"))
    found = check_driver_image_known(Context(platform, capture_of("onprem-lab"), None))
    assert [(f.subject, f.severity) for f in found] == [("cluster.existing.gpuNodeOs", "error")]
    raw["cluster"]["existing"]["gpuDriver"] = "preinstalled"  # the hosts bring the driver: nothing to tag
    platform = load_file(write_stack(tmp_path, raw, "onprem-lab"))
    assert check_driver_image_known(Context(platform, capture_of("onprem-lab"), None)) == []
    raw = raw_platform("azure-prod")
    raw["cluster"]["aks"]["gpuDriver"] = "operator"
    platform = load_file(write_stack(tmp_path, raw, "azure-prod"))
    found = check_driver_image_known(Context(platform, capture_of("azure-prod"), None))
    assert [f.subject for f in found] == ["cluster.aks.gpuDriver"]


def test_a_node_os_not_named_as_the_operator_names_it_is_bad_input(tmp_path: Path) -> None:
    from infra.spec import SpecError

    raw = raw_platform("onprem-lab")
    raw["cluster"]["existing"]["gpuNodeOs"] = "Ubuntu 24.04"
    with pytest.raises(SpecError, match=r"cluster\.existing\.gpuNodeOs"):
        load_file(write_stack(tmp_path, raw, "onprem-lab"))
