"""GKE with private nodes: the control plane reaches the platform's webhooks through a firewall rule of their
ports. The firewall check follows every rendered webhook to its server's port and fails when a port outside GKE's
own rule (443, 10250) is not opened."""

from __future__ import annotations

import dataclasses
from pathlib import Path
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


VISIBILITY = _rule("8082")


def test_the_firewall_opens_the_webhook_port_from_the_control_plane_to_every_node_pool() -> None:
    capture = capture_of(STACK)
    (rule,) = of_type(capture, FIREWALL).values()
    assert rule.inputs["direction"] == "INGRESS" and rule.inputs["allows"] == [{"protocol": "tcp",
                                                                                 "ports": ["8082", "9443", "15017"]}]
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
    findings = check_webhook_firewall(_with_rules([*rules, VISIBILITY]))
    if open_:
        assert findings == []
    else:
        assert [f.subject for f in findings] == ["webhook port 9443"]
        assert "kueue-" in findings[0].message and "infra/components.py" in findings[0].message


def test_kueue_s_visibility_api_is_followed_to_8082_and_needs_its_port_open() -> None:
    ports = webhook_ports(Context(platform_of(STACK), capture_of(STACK), None).objects())
    assert sorted(ports[8082]) == ["APIService v1beta1.visibility.kueue.x-k8s.io/",
                                   "APIService v1beta2.visibility.kueue.x-k8s.io/"]
    findings = check_webhook_firewall(_with_rules([_rule("9443")]))  # the rule as it was: 9443 only
    assert [f.subject for f in findings] == ["webhook port 8082"]
    assert "APIService v1beta1.visibility.kueue.x-k8s.io" in findings[0].message
    assert check_webhook_firewall(_with_rules([_rule("9443"), VISIBILITY])) == []


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
    opened = [_rule("9443"), VISIBILITY]
    assert check_webhook_firewall(_with_rules(opened, _webhook_on(10250))) == []
    assert [f.subject for f in check_webhook_firewall(_with_rules(opened, _webhook_on(10251)))] == [
        "webhook port 10251"]


def test_other_clusters_need_no_rule() -> None:
    capture = capture_of("aws-prod")
    assert not of_type(capture, FIREWALL) and check_webhook_firewall(Context(platform_of("aws-prod"), capture,
                                                                             None)) == []


def test_filestore_classes_join_the_cluster_s_vpc_and_another_network_is_refused(tmp_path: Path) -> None:
    from infra.checks.gke_network import check_filestore_network
    from infra.spec import load_file
    from tests.conftest import kube_objects, raw_platform, run_raw, write_stack

    capture = capture_of(STACK)
    (network,) = of_type(capture, "gcp:compute/network:Network").values()
    assert network.inputs["name"] == "trainyard-prod-vpc"
    classes = [c for c in kube_objects(capture, "StorageClass") if c["provisioner"] == "filestore.csi.storage.gke.io"]
    assert classes and {c["parameters"]["network"] for c in classes} == {"trainyard-prod-vpc"}
    assert check_filestore_network(Context(platform_of(STACK), capture, None)) == []
    raw = raw_platform(STACK)
    raw.setdefault("storage", {})["gcp"] = {"network": "default"}  # the value every stack had before
    edited = run_raw(STACK, raw)
    platform = load_file(write_stack(tmp_path, raw, STACK))
    found = check_filestore_network(Context(platform, edited, None))
    assert {f.subject for f in found} == {"storage.gcp.network"} and len(found) == len(classes)
    assert "not the cluster's VPC 'trainyard-prod-vpc'" in found[0].message
