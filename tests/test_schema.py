"""infra/apiserver/schema.py: core kinds against the Kubernetes schemas, problems remembered by content."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.schema import check_core


def _deployment(replicas: Any, name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "team"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}


@pytest.mark.parametrize("order", [[1, "1", True, None, 1], ["1", 1, None, True, "1"]])
def test_equal_objects_share_an_answer_and_each_value_and_type_gets_its_own(order: list[Any]) -> None:
    """The same object (same name) with 1, "1", true or null as replicas: the integer and null pass, the string
    and the boolean do not, whichever was validated first; a repeated object gets its first answer again."""
    for replicas in order:
        problems = check_core(_deployment(replicas), "1.34")
        assert (problems == []) is (replicas is None or type(replicas) is int), (replicas, problems)
        assert all("replicas" in problem for problem in problems)


def test_a_caller_that_changes_the_answer_does_not_change_the_next_one() -> None:
    first = check_core(_deployment("2"), "1.34")
    first.append("changed by a caller")
    assert check_core(_deployment("2"), "1.34") == first[:-1] and len(first) == 2


def test_the_kubernetes_version_is_part_of_the_answer() -> None:
    """A kind 1.25 serves and 1.34 does not: the answer of one version is not reused for the other."""
    autoscaler = {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
                  "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}}
    assert check_core(autoscaler, "1.25") == []
    assert check_core(autoscaler, "1.34") == [
        "no Kubernetes 1.34 schema for autoscaling/v2beta2 HorizontalPodAutoscaler"]
    assert check_core(autoscaler, "1.25") == []


def _service(ports: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gateway", "namespace": "istio-system"},
            "spec": {"selector": {"app": "gateway"}, "ports": ports, **spec}}


HTTP, HTTPS = {"name": "http2", "port": 80}, {"name": "https", "port": 443}


@pytest.mark.parametrize(("service", "refused"), [
    (_service([HTTP, HTTPS], type="NodePort"), ""),
    (_service([{"port": 443}]), ""),  # one port needs no name
    (_service([], type="NodePort"), "spec.ports: Required value"),  # the laptop gateway's Service as it was rendered
    (_service([], clusterIP="None"), ""),  # headless
    (_service([], type="ExternalName", externalName="db.example.com"), ""),
    (_service([HTTP, {"port": 443}]), "spec.ports.1.name: Required value"),
    (_service([HTTP, {**HTTPS, "name": "http2"}]), "spec.ports.1.name: Duplicate value: 'http2'"),
])
def test_the_api_servers_own_service_rules_beyond_the_schema(service: dict[str, Any], refused: str) -> None:
    problems = check_core(service, "1.34")
    assert [p for p in problems if p.startswith(refused)] if refused else problems == [], problems
