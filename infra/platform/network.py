"""Network policies of the platform's own namespaces (kueue-system, kubeflow-system, velero, gpu-operator):
deny everything, then allow each flow the namespace needs, one NetworkPolicy per flow, named after it and
documented by its reason (docs/access.md lists them). Each component declares its namespace's flows (where
its ports are known) and calls guard_namespace; team namespaces have theirs in tenancy.py.

Two flows cannot name their peer: the API server calls webhooks and aggregated APIs from the control
plane's network, and the pods reach the API server at its endpoint addresses, neither of which is known at
plan time (managed control planes change them). Both are narrowed to their ports instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import NETWORKING_API, child_opts, kube_object, metadata
from infra.spec import Platform
from infra.spec.clouds import pod_credentials
from infra.spec.teams import INITIALIZER_JOBS, REPLICATED_JOB_LABEL, Destination, store_destinations
from infra.vocabulary import NAME_LABEL, TEAM_LABEL

ANYWHERE = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]


def range_egress(cidr: str, ports: Sequence[int]) -> dict[str, Any]:
    """An egress rule to an address range (an object store outside the cluster) on TCP ports."""
    return {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port} for port in ports]}


INITIALIZER_PODS = {"matchExpressions": [{"key": REPLICATED_JOB_LABEL, "operator": "In",
                                          "values": list(INITIALIZER_JOBS)}]}


def _egress_to(pods: dict[str, Any], destinations: Sequence[Destination]) -> dict[str, Any]:
    return {"podSelector": pods, "policyTypes": ["Egress"],
            "egress": [range_egress(d.cidr, d.ports) for d in destinations]}


def team_egress(platform: Platform, team: str) -> dict[str, dict[str, Any]]:
    """A team namespace's NetworkPolicies out of the cluster (infra/spec/teams.py): every pod to the object store
    and the cloud's credentials endpoint, the runtimes' initializer pods to the model hub."""
    spec = platform.spec
    store = store_destinations(spec.egress, spec.teams[team].egress_destinations(),
                               pod_credentials(spec.cluster.kind, platform.storage.profile))
    return {**({"allow-object-storage": _egress_to({}, store)} if store else {}),
            **({"allow-model-hub": _egress_to(INITIALIZER_PODS, spec.egress.model_hub)} if spec.egress.model_hub
               else {})}
# any pod of the cluster (Prometheus, wherever it runs)
CLUSTER_PODS: list[dict[str, Any]] = [{"namespaceSelector": {}}]
TEAM_PODS = [{"namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}}]
API_SERVER_PORTS = (443, 6443)  # the kubernetes Service's port, and the endpoints' usual port


class Flow(NamedTuple):
    name: str  # the NetworkPolicy's name: allow-<name>
    direction: str  # Ingress | Egress
    peers: list[dict[str, Any]]
    ports: Sequence[int]
    why: str


def tcp(ports: Sequence[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


DNS = Flow("dns", "Egress", [{"namespaceSelector": {"matchLabels": {NAME_LABEL: "kube-system"}},
                              "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}], (53,),
           "name resolution (cluster DNS, UDP and TCP)")
API_SERVER = Flow("api-server", "Egress", ANYWHERE, API_SERVER_PORTS,
                  "controllers watch and write objects through the API server")


def dns_egress() -> dict[str, Any]:
    """The egress rule to the cluster DNS, UDP and TCP, for a policy of its own pods."""
    return {"to": DNS.peers, "ports": [{"protocol": proto, "port": 53} for proto in ("UDP", "TCP")]}


def api_server_egress() -> dict[str, Any]:
    """The egress rule to the API server, on its ports (its addresses are not known at plan time)."""
    return {"to": API_SERVER.peers, "ports": tcp(API_SERVER.ports)}


def webhooks(port: int, what: str) -> Flow:
    return Flow("webhooks", "Ingress", ANYWHERE, (port,), f"the API server calls {what}")


def metrics(*ports: int) -> Flow:
    return Flow("metrics", "Ingress", CLUSTER_PODS, ports, "Prometheus scrapes the controllers' metrics")


def policies_for(flows: Sequence[Flow]) -> dict[str, dict[str, Any]]:
    """NetworkPolicy name -> spec: default-deny, then one allow per flow (DNS and the API server first)."""
    specs: dict[str, dict[str, Any]] = {"default-deny": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    for flow in (DNS, API_SERVER, *flows):
        ports = tcp(flow.ports) + ([{"protocol": "UDP", "port": 53}] if flow is DNS else [])
        rule = {"from" if flow.direction == "Ingress" else "to": flow.peers, "ports": ports}
        specs[f"allow-{flow.name}"] = {"podSelector": {}, "policyTypes": [flow.direction],
                                       flow.direction.lower(): [rule]}
    return specs


def guard_namespace(parent: pulumi.Resource, provider: k8s.Provider, namespace: str, created: pulumi.Resource,
                    flows: Sequence[Flow]) -> None:
    """The namespace's NetworkPolicies, children of the component that owns the namespace."""
    opts = child_opts(parent, provider, depends_on=[created])
    for name, spec in policies_for(flows).items():
        kube_object(f"{namespace}-{name}", NETWORKING_API, "NetworkPolicy", metadata(name, namespace), opts,
                    spec=spec)
