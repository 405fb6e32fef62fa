"""team-store-egress: what each team pod must reach (its team's bucket, its in-pod volume driver, its initializer's
hf:// source) is judged against the rendered NetworkPolicies. An undeclared store refuses the stack naming
egress.objectStore, an undeclared model hub warns naming egress.modelHub; a policy missing from the render is an
error naming the namespace; the shipped cloud stacks pass."""

from __future__ import annotations

from typing import Any

import pytest

from infra.checks.team_egress import egress_findings, opens, reaches, selects
from infra.spec import Finding, validate
from infra.spec.teams import INITIALIZER_JOBS, REPLICATED_JOB_LABEL
from tests.conftest import capture_of, kube_objects, platform_of, raw_platform

CLOUD_STACKS = ("aws-prod", "gcp-prod", "azure-prod")


def _without(objs: list[dict[str, Any]], namespace: str, name: str) -> list[dict[str, Any]]:
    return [o for o in objs if not (o.get("kind") == "NetworkPolicy" and o["metadata"].get("namespace") == namespace
                                    and o["metadata"]["name"] == name)]


def _subjects(found: list[Finding]) -> list[tuple[str, str]]:
    return [(f.subject, f.severity) for f in found]


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_the_shipped_cloud_stacks_reach_their_store_and_hub(stack: str) -> None:
    assert egress_findings(platform_of(stack), kube_objects(capture_of(stack))) == []


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_an_undeclared_store_refuses_the_stack_naming_the_field(stack: str) -> None:
    raw = raw_platform(stack)
    del raw["egress"]["objectStore"]
    _, missing = reaches(validate(raw, stack), [])
    assert _subjects(missing) == [("egress.objectStore", "error")]
    assert "nlp, research, vision" in missing[0].message or "nlp, vision" in missing[0].message
    # a team's own destination is a declaration too: only the other teams are named
    raw["teams"]["nlp"]["objectStorage"] = [{"cidr": "10.0.0.0/24"}]
    _, missing = reaches(validate(raw, stack), [])
    assert "nlp" not in missing[0].message.split(":")[0]
    assert reaches(validate(raw_platform(stack), stack), [])[1] == []


def test_a_missing_store_policy_is_an_error_naming_the_namespace_and_each_destination() -> None:
    objs = _without(kube_objects(capture_of("aws-prod")), "vision", "allow-object-storage")
    found = egress_findings(platform_of("aws-prod"), objs)
    assert {f.subject for f in found} == {"Namespace vision"}
    targets = sorted(f.message.split(" must reach ")[1].split(" (")[0] for f in found)
    assert targets == ["169.254.170.23/32 port 80", "3.5.0.0/19 port 443", "52.216.0.0/15 port 443",
                       "54.231.0.0/17 port 443"]


def test_the_gcs_fuse_sidecar_needs_the_store_too() -> None:
    objs = _without(kube_objects(capture_of("gcp-prod")), "nlp", "allow-object-storage")
    found = egress_findings(platform_of("gcp-prod"), objs)
    assert {f.subject for f in found} == {"Namespace nlp"}
    assert all("GCS FUSE sidecar" in f.message and "in the gcp object store" in f.message for f in found)
    targets = sorted(f.message.split(" must reach ")[1].split(" (")[0] for f in found)
    assert targets == ["169.254.169.252/32 port 988", "169.254.169.254/32 port 80", "199.36.153.8/30 port 443"]


def test_an_initializer_needs_the_model_hub() -> None:
    objs = kube_objects(capture_of("azure-prod"))
    found = egress_findings(platform_of("azure-prod"), _without(objs, "vision", "allow-model-hub"))
    assert {f.subject for f in found} == {"Namespace vision"}
    assert all("model-initializer pods" in f.message or "dataset-initializer pods" in f.message for f in found)
    assert any("hf://" in f.message for f in found)
    raw = raw_platform("azure-prod")
    del raw["egress"]["modelHub"]
    _, missing = reaches(validate(raw, "azure-prod"), objs)
    assert _subjects(missing) == [("egress.modelHub", "warning")]
    assert "torchtune-llama3.2-1b" in missing[0].message


def test_on_prem_stores_and_a_workers_teams_are_judged_elsewhere() -> None:
    needed, missing = reaches(platform_of("onprem-lab"), [])
    assert (needed, missing) == ([], [])
    hybrid = platform_of("hybrid-burst").hybrid
    assert hybrid is not None
    assert reaches(hybrid.clusters["burst"], [])[1] == []


INITIALIZER = {"matchExpressions": [{"key": REPLICATED_JOB_LABEL, "operator": "In", "values": list(INITIALIZER_JOBS)}]}


def _policy(selector: dict[str, Any], cidr: str, ports: list[dict[str, Any]], **block: Any) -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "spec": {"podSelector": selector, "policyTypes": ["Egress"],
                                              "egress": [{"to": [{"ipBlock": {"cidr": cidr, **block}}],
                                                          "ports": ports}]}}


HTTPS = [{"protocol": "TCP", "port": 443}]


def test_a_policy_opens_only_its_pods_ranges_and_ports() -> None:
    wide = _policy({}, "52.216.0.0/15", HTTPS)
    assert opens(wide, {}, "52.216.0.0/15", 443)
    assert opens(wide, {"a": "b"}, "52.217.0.0/16", 443)  # inside the range
    assert not opens(wide, {}, "52.216.0.0/14", 443)  # one bit wider than the rule
    assert not opens(wide, {}, "52.216.0.0/15", 80)
    assert not opens(_policy({}, "52.216.0.0/15", [{"protocol": "UDP", "port": 443}]), {}, "52.216.0.0/15", 443)
    assert opens(_policy({}, "0.0.0.0/0", [{"protocol": "TCP", "port": 400, "endPort": 443}]), {}, "1.2.3.0/24", 443)
    assert not opens(_policy({}, "0.0.0.0/0", [{"protocol": "TCP", "port": 400, "endPort": 442}]), {}, "1.2.3.0/24",
                     443)
    assert not opens(_policy({}, "0.0.0.0/0", HTTPS, **{"except": ["1.2.3.128/25"]}), {}, "1.2.3.0/24", 443)
    hub = _policy(INITIALIZER, "0.0.0.0/0", HTTPS)
    assert opens(hub, {REPLICATED_JOB_LABEL: "model-initializer"}, "0.0.0.0/0", 443)
    assert not opens(hub, {REPLICATED_JOB_LABEL: "node"}, "0.0.0.0/0", 443)
    assert not opens(hub, {}, "0.0.0.0/0", 443)


def test_selectors() -> None:
    assert selects({}, {})
    assert selects({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"})
    assert not selects({"matchLabels": {"a": "1"}}, {"a": "2"})
    assert selects({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {})
    assert not selects({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {})
    assert selects({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"})
