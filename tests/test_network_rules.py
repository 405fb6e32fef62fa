"""A platform namespace's NetworkPolicies as infra/platform/network.py builds them (tests/parts_program.py guards one
with a webhook and a metrics flow), judged by what they let through (tests/netpol.py): each flow's peer and port
admitted, the neighbouring port, protocol and peer refused; and a team's ways out of the cluster (team_egress)."""

from __future__ import annotations

from typing import Any

from infra.platform.network import (
    API_SERVER_PORTS,
    INITIALIZER_PODS,
    api_server_egress,
    dns_egress,
    policies_for,
    range_egress,
    tcp,
    team_egress,
)
from infra.spec import validate
from infra.vocabulary import TEAM_LABEL
from tests.conftest import platform_of, raw_platform
from tests.netpol import Endpoint, Pod, connects
from tests.parts import parts_objects, parts_of

GUARDED = Pod("guarded", {"app": "controller"})
DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
PROMETHEUS = Pod("monitoring", {"app": "prometheus"})


def _guarded() -> list[dict[str, Any]]:
    policies = parts_objects(parts_of("onprem-lab"), "NetworkPolicy")
    return [p for p in policies if p["metadata"]["namespace"] == "guarded"]


# (target, port, protocol, allowed) from a pod of the guarded namespace
REACHES: list[tuple[Endpoint, int, str, bool]] = [
    (DNS, 53, "UDP", True), (DNS, 53, "TCP", True), (DNS, 54, "UDP", False), (DNS, 52, "TCP", False),
    (Pod("kube-system", {"k8s-app": "coredns-autoscaler"}), 53, "UDP", False), (Pod("kube-system"), 53, "TCP", False),
    (Pod("other", {"k8s-app": "kube-dns"}), 53, "UDP", False),
    # the API server at addresses not known at plan time: any address, on its two ports only
    ("10.0.0.1", 443, "TCP", True), ("172.20.0.1", 6443, "TCP", True), ("fd00::1", 443, "TCP", True),
    ("10.0.0.1", 444, "TCP", False), ("10.0.0.1", 6444, "TCP", False), ("10.0.0.1", 443, "UDP", False),
    ("10.0.0.1", 53, "UDP", False),  # DNS is kube-dns's, not any address's
    (PROMETHEUS, 9090, "TCP", False), (Pod("guarded"), 8080, "TCP", False),  # no other egress, in or out
    # the API server's port on a pod is no API server: address blocks name addresses outside the cluster, not pods
    (Pod("other"), 443, "TCP", False), (Pod("guarded"), 6443, "TCP", False),
]
# (source, port, protocol, allowed) to a pod of the guarded namespace
REACHED_BY: list[tuple[Endpoint, int, str, bool]] = [
    ("10.0.0.5", 9443, "TCP", True), ("2001:db8::5", 9443, "TCP", True),  # the API server calls the webhook
    ("10.0.0.5", 9444, "TCP", False), ("10.0.0.5", 9442, "TCP", False), ("10.0.0.5", 9443, "UDP", False),
    (PROMETHEUS, 8080, "TCP", True), (PROMETHEUS, 8443, "TCP", True), (Pod("vision", {}, {TEAM_LABEL: "vision"}),
                                                                        8080, "TCP", True),
    (PROMETHEUS, 8081, "TCP", False), (PROMETHEUS, 8442, "TCP", False), (PROMETHEUS, 8080, "UDP", False),
    ("10.0.0.5", 8080, "TCP", False),  # metrics from the cluster's pods only, not from any address
    (PROMETHEUS, 443, "TCP", False),
    # the webhook rule's peers are address blocks, which name addresses outside the cluster (networking/v1), not pods
    (PROMETHEUS, 9443, "TCP", False),
]


def test_a_platform_pod_reaches_dns_and_the_api_server_only() -> None:
    policies = _guarded()
    assert [case for case in REACHES if connects(policies, GUARDED, case[0], case[1], case[2]) is not case[3]] == []


def test_a_policy_of_the_shared_dns_and_api_server_rules_reaches_those_two_only() -> None:
    """The key copier, Pipelines' pods, the label proxies and the team namespaces build their ways to DNS and the
    API server from dns_egress() and api_server_egress(): alone in one policy, they let through what a platform
    namespace's own policies do, and nothing else."""
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "copier-egress", "namespace": "guarded"},
              "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns_egress(), api_server_egress()]}}
    assert [case for case in REACHES if connects([policy], GUARDED, case[0], case[1], case[2]) is not case[3]] == []


def test_a_platform_pod_is_reached_by_its_webhook_caller_and_the_scraper_only() -> None:
    policies = _guarded()
    assert [case for case in REACHED_BY
            if connects(policies, case[0], GUARDED, case[1], case[2]) is not case[3]] == []


def test_a_guarded_namespace_has_default_deny_and_one_policy_per_flow_in_one_direction() -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in _guarded()}
    assert list(policies_for([])) == ["default-deny", "allow-dns", "allow-api-server"]
    assert set(policies) == {"default-deny", "allow-dns", "allow-api-server", "allow-webhooks", "allow-metrics"}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert {name: spec["policyTypes"] for name, spec in policies.items() if name != "default-deny"} == {
        "allow-dns": ["Egress"], "allow-api-server": ["Egress"], "allow-webhooks": ["Ingress"],
        "allow-metrics": ["Ingress"]}
    assert all(spec["podSelector"] == {} for spec in policies.values())
    records = [r for r in parts_of("onprem-lab").resources if r.inputs.get("kind") == "NetworkPolicy"
               and r.inputs["metadata"]["namespace"] == "guarded"]
    assert records and all(r.depends_on == ("kubernetes:core/v1:Namespace::ns-guarded",) for r in records)
    assert all(r.parent == "trainyard:platform:Tenancy::tenancy" for r in records)  # the owning component's
    assert all(r.provider == "pulumi:providers:kubernetes::k8s" for r in records)
    # resource names in the URN: namespace and policy, so that two namespaces' policies never collide
    assert sorted(r.name for r in records) == sorted(f"guarded-{name}" for name in policies)
    assert API_SERVER_PORTS == (443, 6443)


def test_the_port_builders_are_tcp_and_an_address_range_rule_names_its_range() -> None:
    assert tcp([443, 80]) == [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 80}]
    assert range_egress("10.0.0.0/8", [443]) == {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                                                 "ports": [{"protocol": "TCP", "port": 443}]}


def test_team_egress_opens_each_declared_store_range_to_every_pod_and_the_hub_to_initializers_only() -> None:
    egress = team_egress(platform_of("gcp-prod"), "vision")
    assert list(egress) == ["allow-object-storage", "allow-model-hub"]
    store = egress["allow-object-storage"]
    assert store["podSelector"] == {} and store["policyTypes"] == ["Egress"]
    assert [(rule["to"][0]["ipBlock"]["cidr"], [p["port"] for p in rule["ports"]]) for rule in store["egress"]] == [
        ("199.36.153.8/30", [443]), ("169.254.169.254/32", [80]), ("169.254.169.252/32", [988])]
    hub = egress["allow-model-hub"]
    assert hub["podSelector"] == INITIALIZER_PODS and hub["policyTypes"] == ["Egress"]
    assert hub["egress"] == [range_egress("0.0.0.0/0", [443])]
    assert INITIALIZER_PODS == {"matchExpressions": [{"key": "jobset.sigs.k8s.io/replicatedjob-name",
                                                      "operator": "In",
                                                      "values": ["dataset-initializer", "model-initializer"]}]}


def test_team_egress_is_empty_without_destinations_and_follows_a_teams_own_store() -> None:
    assert team_egress(platform_of("local"), "demo") == {}
    assert list(team_egress(platform_of("onprem-lab"), "nlp")) == ["allow-model-hub"]
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["objectStorage"] = [{"cidr": "10.40.0.0/16", "ports": [443, 7480]}]
    platform = validate(raw, "onprem-lab")
    assert team_egress(platform, "nlp")["allow-object-storage"]["egress"] == [range_egress("10.40.0.0/16",
                                                                                          [443, 7480])]
    assert "allow-object-storage" not in team_egress(platform, "vision")
