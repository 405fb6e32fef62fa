"""GKE with private nodes: the control plane reaches the platform's webhooks through a firewall rule of their
ports. The firewall check follows every rendered webhook to its server's port and fails when a port outside GKE's
own rule (443, 10250) is not opened."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from infra.checks.context import Context
from infra.checks.firewall import FIREWALL, check_webhook_firewall, webhook_ports
from infra.offline.engine import Registration
from tests.conftest import capture_of, platform_of
from tests.test_cloud_common import POOL_TYPES, of_type

STACK = "gcp-prod"


def _with_rules(rules: list[dict[str, Any]], extra: tuple[Registration, ...] = ()) -> Context:
    """gcp-prod's capture with its firewall rules replaced by `rules` (and `extra` registrations added); istiod's
    15017 stays open, so the cases below are about Kueue's, JobSet's and the Trainer's 9443."""
    capture = capture_of(STACK)
    kept = tuple(r for r in capture.resources if r.type != FIREWALL)
    added = tuple(Registration(FIREWALL, f"rule-{i}", "urn", "", True, False, rule, (), False, False, "")
                  for i, rule in enumerate([*rules, _rule("15017")]))
    return Context(platform_of(STACK), dataclasses.replace(capture, resources=kept + added + extra), None)


def _rule(*ports: str) -> dict[str, Any]:
    return {"direction": "INGRESS", "sourceRanges": ["172.16.0.0/28"], "allows": [{"protocol": "tcp",
                                                                                  "ports": list(ports)}]}


def test_the_firewall_opens_the_webhook_port_from_the_control_plane_to_every_node_pool() -> None:
    capture = capture_of(STACK)
    (rule,) = of_type(capture, FIREWALL).values()
    assert rule.inputs["direction"] == "INGRESS"
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["9443", "15017"]}]
    assert rule.inputs["sourceRanges"] == ["172.16.0.0/28"]  # the control plane range GKE reports (offline fake)
    accounts = {pool.inputs["nodeConfig"]["serviceAccount"] for pool in of_type(capture, POOL_TYPES[STACK]).values()}
    assert accounts == set(rule.inputs["targetServiceAccounts"])
    provider = of_type(capture, "pulumi:providers:kubernetes")["kubernetes"]
    assert f"{FIREWALL}::webhooks" in provider.depends_on  # no platform object before the webhooks are reachable
    assert check_webhook_firewall(Context(platform_of(STACK), capture, None)) == []


def test_every_rendered_webhook_is_followed_to_its_servers_port() -> None:
    ports = webhook_ports(Context(platform_of(STACK), capture_of(STACK), None).objects())
    served = {name.split("/")[0] for name in ports[9443]}
    # Kueue's Service names 9443; JobSet's and the Trainer's name the port `webhook`, declared by their pods.
    assert {"kueue-validating-webhook-configuration", "jobset-validating-webhook-configuration",
            "validator.trainer.kubeflow.org"} <= served
    # istiod's injector and validation webhooks (Service port 443 -> 15017); cert-manager's on 10250, open on GKE.
    assert {name.split("/")[0] for name in ports[15017]} == {"istio-sidecar-injector", "istio-validator-istio-system"}
    assert {name.split("/")[0] for name in ports[10250]} == {"cert-manager-webhook"}
    assert None not in ports


@pytest.mark.parametrize(("rules", "open_"), [
    ([], False),
    ([_rule("9444")], False),
    ([_rule("9444-9500")], False),
    ([_rule("9443")], True),
    ([_rule("9000-9443")], True),
    ([{**_rule("9443"), "sourceRanges": []}], False),  # from nowhere
    ([{**_rule("9443"), "direction": "EGRESS"}], False),
])
def test_a_webhook_port_no_ingress_rule_opens_is_a_finding(rules: list[dict[str, Any]], open_: bool) -> None:
    findings = check_webhook_firewall(_with_rules(rules))
    if open_:
        assert findings == []
    else:
        assert [f.subject for f in findings] == ["webhook port 9443"]
        assert "kueue-" in findings[0].message and "infra/cluster/gke/cluster.py" in findings[0].message


def _webhook_on(target: int) -> tuple[Registration, ...]:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": "x"},
               "spec": {"selector": {"app": "hook"}, "ports": [{"port": 443, "targetPort": target}]}}
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "hook"},
              "webhooks": [{"name": "hook.x", "clientConfig": {"service": {"name": "hook", "namespace": "x"}}}]}
    return tuple(Registration(f"kubernetes:{o['apiVersion'] if '/' in o['apiVersion'] else 'core/v1'}:{o['kind']}",
                              f"hook-{o['kind']}", "urn", "", True, False, o, (), False, False, "")
                 for o in (service, config))


def test_gke_s_own_ports_need_no_rule_and_one_past_them_does() -> None:
    opened = [_rule("9443")]
    assert check_webhook_firewall(_with_rules(opened, _webhook_on(10250))) == []
    assert [f.subject for f in check_webhook_firewall(_with_rules(opened, _webhook_on(10251)))] == [
        "webhook port 10251"]


def test_other_clusters_need_no_rule() -> None:
    capture = capture_of("aws-prod")
    assert not of_type(capture, FIREWALL) and check_webhook_firewall(Context(platform_of("aws-prod"), capture,
                                                                             None)) == []
