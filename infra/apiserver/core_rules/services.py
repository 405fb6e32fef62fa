"""What the API server refuses in a Service beyond its OpenAPI schema (k8s.io/kubernetes/pkg/apis/core/validation,
validation.go ValidateService): `spec.ports` is required unless the Service is headless (`clusterIP: None`) or of
type ExternalName; with more than one port each needs a `name`, and no two the same name.
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

