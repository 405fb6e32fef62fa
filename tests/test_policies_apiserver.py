"""The pack's API-server rules (crd-cel, operator-webhooks, apiserver-not-checked) as the Pulumi CLI runs them
(no CRD index handed over: the pinned directories plus the CRDs the stack registers; values unknown during
preview) and as `trainyard validate` runs them (once: no plan check repeats them)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from infra.checks.catalogue import run_checks
from infra.offline.engine import Capture
from tests.conftest import CRDS, capture_of, platform_of
from tests.test_policies import add, reg, violations

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

WIDGET = "kubernetes:example.com/v1:Widget"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def _crd(*rules: dict[str, str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": list(rules),
                                                        "properties": {"size": {"type": "integer"}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Cluster",
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def _widget(name: str, size: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}


@pytest.fixture
def no_crd_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As under the CLI on a machine without the pinned CRDs: only what the stack registers defines kinds."""
    monkeypatch.setenv("TRAINYARD_CRDS", str(tmp_path))


@pytest.mark.usefixtures("no_crd_dirs")
def test_under_the_cli_the_crds_the_stack_registers_are_enforced() -> None:
    crd = reg(CRD, "crd-widgets", _crd({"rule": "self.size <= 3", "message": "size at most 3"}), retain=True)
    found = violations(add(crd, reg(WIDGET, "w-edge", _widget("edge", 3)), reg(WIDGET, "w-big", _widget("big", 4))))
    assert [(v.policy, v.resource, v.message) for v in found] == [
        ("crd-cel", "Widget w-big", "Widget/big: spec: size at most 3")]


@pytest.mark.usefixtures("no_crd_dirs")
def test_a_rule_the_evaluator_lacks_is_listed_not_passed() -> None:
    crd = reg(CRD, "crd-widgets", _crd({"rule": "self.size.noSuchFunction()", "message": "m"}), retain=True)
    found = violations(add(crd, reg(WIDGET, "w", _widget("w", 1))))
    assert [(v.policy, v.level, v.message) for v in found] == [
        ("apiserver-not-checked", "advisory", "CRD rule of Widget spec not evaluated (function noSuchFunction() is "
         "not implemented): self.size.noSuchFunction()")]


@pytest.mark.usefixtures("no_crd_dirs")
def test_values_unknown_during_preview_are_listed_and_the_rest_judged() -> None:
    crd = reg(CRD, "crd-widgets", _crd({"rule": "self.size <= 3", "message": "size at most 3"}), retain=True)
    found = violations(add(crd, reg(WIDGET, "w-later", _widget("later", UNKNOWN_STRING_VALUE)),
                           reg(WIDGET, "w-big", _widget("big", 4))))
    unknown = "string value at .spec.size can't be known during preview"
    assert [(v.policy, v.level, v.resource, v.message) for v in found] == [
        ("apiserver-not-checked", "advisory", "Widget w-later", f"not checked before apply: {unknown}"),
        ("crd-cel", "mandatory", "Widget w-big", "Widget/big: spec: size at most 3"),
        # a resource rule that reads the unknown value stops there, as the SDK's analyzer reports it
        ("pinned-versions", "advisory", "Widget w-later", f"can't run during preview: {unknown}")]


def _with_queue_edit(stack: str, change: Any) -> Capture:
    capture = capture_of(stack)
    resources = list(capture.resources)
    position = next(i for i, r in enumerate(resources) if r.type.endswith(":ClusterQueue"))
    inputs = copy.deepcopy(resources[position].inputs)
    change(inputs)
    resources[position] = dataclasses.replace(resources[position], inputs=inputs)
    return dataclasses.replace(capture, resources=tuple(resources))


def test_validate_reports_each_refusal_once_naming_resource_field_and_rule() -> None:
    def lend_more_than_nominal(queue: dict[str, Any]) -> None:
        queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "999999"
        queue["spec"]["resourceGroups"][0]["coveredResources"].append("example.com/extra")

    platform = platform_of("onprem-lab")
    findings = run_checks(platform, _with_queue_edit("onprem-lab", lend_more_than_nominal), CRDS)
    about = [f for f in findings if "ClusterQueue/" in f.message or f.subject.startswith("ClusterQueue")]
    queue = about[0].subject.split()[-1]
    name = queue.removeprefix("cq-")
    assert [(f.check, f.subject, f.severity, f.message) for f in about] == [
        ("policy", f"ClusterQueue {queue}", "error", f"crd-cel: ClusterQueue/{name}: spec.resourceGroups[0]: flavors "
         "must have the same number of resources as the coveredResources"),
        ("policy", f"ClusterQueue {queue}", "error", f"operator-webhooks: kueue: ClusterQueue/{name}: spec."
         "resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than or equal to the nominalQuota"),
    ]
