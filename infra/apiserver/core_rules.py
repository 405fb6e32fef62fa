"""What the API server refuses in core kinds beyond their OpenAPI schema (k8s.io/kubernetes/pkg/apis/core/validation,
validation.go): the rules a rendered object has been seen to break, each as the server words its field path.

- Service: `spec.ports` is required unless the Service is headless (`clusterIP: None`) or of type ExternalName; with
  more than one port each needs a `name`, and no two the same name.
"""

from __future__ import annotations

from typing import Any


def service_problems(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    ports = spec.get("ports") or []
    headless, external = spec.get("clusterIP") == "None", spec.get("type") == "ExternalName"
    problems = [] if ports or headless or external else [
        "spec.ports: Required value (a Service that is not headless or ExternalName needs a port)"]
    seen: set[str] = set()
    for index, port in enumerate(ports):
        name = port.get("name", "")
        if len(ports) > 1 and not name:
            problems.append(f"spec.ports.{index}.name: Required value (a Service of several ports names each)")
        elif name in seen:
            problems.append(f"spec.ports.{index}.name: Duplicate value: {name!r}")
        seen.add(name)
    return problems


RULES = {"Service": service_problems}


def core_problems(obj: dict[str, Any]) -> list[str]:
    """The API server's own refusals of a core object that its schema lets through."""
    rule = RULES.get(str(obj.get("kind", ""))) if obj.get("apiVersion") == "v1" else None
    return rule(obj) if rule is not None else []
