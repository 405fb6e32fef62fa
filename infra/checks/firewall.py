"""Admission webhooks and aggregated APIs reachable from the control plane, over a captured stack.

GKE nodes are private here, and GKE's own firewall rule lets the control plane reach them on 443 and 10250 only.
Every webhook of the plan (ours and the rendered charts') is followed to the port its server listens on: the
Service's targetPort, a named one through the container ports of the pods the Service selects. A port outside
GKE's own rule that no ingress firewall rule opens is a finding: the API server could not call that webhook (with
failurePolicy Fail every object it guards would be refused), or that APIService (API discovery degrades and
namespace deletion hangs). APIServices are followed the same way, from spec.service.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from infra import vocabulary
from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.clouds import CLOUDS

CHECK = "firewall"
FIREWALL = "gcp:compute/firewall:Firewall"
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
SERVER_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def _target(service: Mapping[str, Any], port: int, servers: list[Mapping[str, Any]]) -> int | None:
    """The port a Service's `port` reaches on its pods, or None when the plan does not tell."""
    entry = next((p for p in service.get("spec", {}).get("ports", []) if p.get("port") == port), None)
    if entry is None:
        return None
    target = entry.get("targetPort", port)
    if isinstance(target, int):
        return target
    selector = service["spec"].get("selector") or {}
    for template in servers:
        labels = template.get("metadata", {}).get("labels", {})
        if selector and selector.items() <= labels.items():
            for container in vocabulary.containers(template.get("spec", {})):
                for declared in container.get("ports", []):
                    if declared.get("name") == target:
                        return int(declared["containerPort"])
    return None


def webhook_ports(objects: Iterable[Mapping[str, Any]]) -> dict[int | None, list[str]]:
    """Server port -> the webhooks served on it ("<configuration>/<webhook>"); None: a port the plan cannot tell."""
    objects = list(objects)
    services = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects
                if o.get("kind") == "Service"}
    servers: dict[str | None, list[Mapping[str, Any]]] = {}
    for obj in objects:
        if obj.get("kind") in SERVER_KINDS:
            servers.setdefault(obj["metadata"].get("namespace"), []).extend(
                vocabulary.pod_templates(str(obj["kind"]), obj))
    found: dict[int | None, list[str]] = {}

    def add(name: str, reference: Mapping[str, Any] | None) -> None:
        if reference is None:  # a URL webhook or a local APIService: nothing the API server calls on a node
            return
        service = services.get((reference.get("namespace"), reference.get("name")))
        port = None if service is None else _target(service, int(reference.get("port", 443)),
                                                     servers.get(reference.get("namespace"), []))
        found.setdefault(port, []).append(name)

    for config in objects:
        if config.get("kind") in WEBHOOK_KINDS:
            for webhook in config.get("webhooks", []):
                add(f"{config['metadata']['name']}/{webhook.get('name')}", webhook.get("clientConfig", {}).get(
                    "service"))
        elif config.get("kind") == "APIService":  # an aggregated API: the API server proxies every request to it
            add(f"APIService {config['metadata']['name']}/", config.get("spec", {}).get("service"))
    return found


def _opened(rules: Iterable[Mapping[str, Any]]) -> set[int]:
    ports: set[int] = set()
    for rule in rules:
        if rule.get("direction", "INGRESS") != "INGRESS" or not rule.get("sourceRanges"):
            continue
        for allow in rule.get("allows", []):
            if allow.get("protocol") not in ("tcp", "all"):
                continue
            for item in allow.get("ports", []):
                low, _, high = str(item).partition("-")
                ports |= set(range(int(low), int(high or low) + 1))
    return ports


def check_webhook_firewall(ctx: Context) -> list[Finding]:
    open_ports = CLOUDS[ctx.platform.spec.cluster.kind].control_plane_ports
    if open_ports is None:  # no firewall between the control plane and the nodes
        return []
    opened = open_ports | _opened(r.inputs for r in ctx.capture.resources if r.type == FIREWALL)
    findings = []
    for port, webhooks in sorted(webhook_ports(ctx.objects()).items(), key=lambda item: item[0] or 0):
        names = ", ".join(sorted({name.split("/")[0] for name in webhooks}))
        shown = f"{len(webhooks)} webhook(s) or API(s) of {names}"
        if port is None:
            findings.append(Finding(CHECK, "webhooks", f"{shown}: the plan does not tell which port the server "
                                    "listens on (no Service, or a named targetPort no selected pod declares)"))
        elif port not in opened:
            findings.append(Finding(CHECK, f"webhook port {port}", f"{shown} listen on {port}, which the GKE "
                                    "control plane cannot reach on private nodes (only 443 and 10250 are open): "
                                    "add the port to the component's webhook_ports or api_ports "
                                    "(infra/components.py), which the GKE firewall rule opens"))
    return findings
