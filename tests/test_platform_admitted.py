"""The platform passes its own admission: every object a stack renders into a team namespace, evaluated
against every ValidatingAdmissionPolicy the stack renders whose rules and binding match it, as the API
server would on CREATE (by the deployer, who is no tenant and no controller)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.vocabulary import TEAM_LABEL
from tests.cel import denials
from tests.conftest import STACKS, capture_of, kube_objects

DEPLOYER = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}


def _matches(policy: dict[str, Any], obj: dict[str, Any], plural: str) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    return any(plural in rule["resources"] and group in rule["apiGroups"] and "CREATE" in rule["operations"]
               for rule in policy["matchConstraints"]["resourceRules"])


def admitted_in_team_namespaces(stack: str) -> tuple[int, list[str]]:
    """(objects checked, denials) for the stack's own objects in its team namespaces."""
    capture = capture_of(stack)
    teams = {ns["metadata"]["name"] for ns in kube_objects(capture, "Namespace")
             if TEAM_LABEL in ns["metadata"].get("labels", {})}
    policies = {p["metadata"]["name"]: p["spec"] for p in kube_objects(capture, "ValidatingAdmissionPolicy")}
    checked, refused = 0, []
    for obj in kube_objects(capture):
        namespace = obj["metadata"].get("namespace")
        if namespace not in teams:
            continue
        checked += 1
        plural = obj["kind"].lower() + "s"
        for name, policy in sorted(policies.items()):
            if _matches(policy, obj, plural):
                refused += [f"{obj['kind']} {namespace}/{obj['metadata']['name']}: {name}: {message}"
                            for message in denials(policy, obj, plural, namespace, user=DEPLOYER)]
    return checked, refused


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_the_platform_puts_in_a_team_namespace_is_admitted(stack: str) -> None:
    checked, refused = admitted_in_team_namespaces(stack)
    assert checked > 0
    assert refused == []


def test_a_platform_job_in_a_team_namespace_would_be_refused() -> None:
    """The check above can fail: an unqueued Job where the bucket-versioning jobs used to run is refused."""
    capture = capture_of("onprem-lab")
    policy = next(p["spec"] for p in kube_objects(capture, "ValidatingAdmissionPolicy")
                  if p["metadata"]["name"] == "trainyard-queue-required")
    job = next(j for j in kube_objects(capture, "Job") if j["metadata"]["name"].startswith("bucket-versioning-"))
    assert job["metadata"]["namespace"] == "rook-ceph"
    moved = {**job, "metadata": {**job["metadata"], "namespace": "vision"}}
    assert denials(policy, moved, "jobs", "vision", user=DEPLOYER)
