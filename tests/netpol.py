"""NetworkPolicy semantics (networking.k8s.io/v1) for tests that ask whether a connection is let through: a pod is
isolated in a direction once some policy of its namespace selects it for that direction, and then a connection needs
a rule of one such policy whose peers (none: every peer) match the other end and whose ports (none: every port)
match the port. A peer's namespaceSelector and podSelector hold together; a podSelector alone means the policy's
own namespace; an ipBlock matches an address, never a pod."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.apiserver.selectors import matches_selector
from infra.vocabulary import NAME_LABEL


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    def ns_labels(self) -> dict[str, str]:
        return {NAME_LABEL: self.namespace, **self.namespace_labels}


Endpoint = Pod | str  # a pod, or an address outside the cluster


def _peer_matches(peer: Mapping[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        if not isinstance(other, str):
            return False
        block, address = peer["ipBlock"], ipaddress.ip_address(other)
        network = ipaddress.ip_network(block["cidr"])
        return (address.version == network.version and address in network
                and not any(address in ipaddress.ip_network(e) for e in block.get("except", [])))
    if isinstance(other, str):
        return False
    if "namespaceSelector" in peer:
        namespace_ok = matches_selector(peer["namespaceSelector"], other.ns_labels())
    else:
        namespace_ok = other.namespace == policy_ns
    return namespace_ok and matches_selector(peer.get("podSelector"), dict(other.labels))


def _port_matches(ports: list[dict[str, Any]] | None, protocol: str, port: int) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol and (
        p.get("port") is None or p["port"] <= port <= p.get("endPort", p["port"])) for p in ports)


def _admits(policies: Iterable[dict[str, Any]], pod: Pod, direction: str, other: Endpoint, protocol: str,
            port: int) -> bool:
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    isolated = False
    for policy in policies:
        spec = policy["spec"]
        if policy["metadata"]["namespace"] != pod.namespace or direction not in spec.get("policyTypes", []):
            continue
        if not matches_selector(spec.get("podSelector"), dict(pod.labels)):
            continue
        isolated = True
        for rule in spec.get(key) or []:
            peers = rule.get(peers_key)
            if (not peers or any(_peer_matches(p, pod.namespace, other) for p in peers)) and \
                    _port_matches(rule.get("ports"), protocol, port):
                return True
    return not isolated


def connects(policies: list[dict[str, Any]], source: Endpoint, target: Endpoint, port: int,
             protocol: str = "TCP") -> bool:
    """Whether `source` may open a connection to `target`: its namespace's egress and the target's ingress both let
    it through (an address outside the cluster has no policies of its own)."""
    out = not isinstance(source, Pod) or _admits(policies, source, "Egress", target, protocol, port)
    into = not isinstance(target, Pod) or _admits(policies, target, "Ingress", source, protocol, port)
    return out and into
