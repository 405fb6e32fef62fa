"""A pod spec as the API server validates it beyond the OpenAPI schema (k8s.io/kubernetes pkg/apis/core/validation,
validation.go ValidatePodSpec, at the stacks' Kubernetes 1.31-1.35), the rules a rendered manifest can break:

- containers: required and non-empty; each name a DNS-1123 label, unique across containers and init containers
  (validateContainers, validateInitContainers); an image (validateContainerCommon); `restartPolicy` only on init
  containers;
- volumes: names DNS-1123 labels, unique (ValidateVolumes); each volumeMount and volumeDevice names a volume of
  the pod (`Not found`), a device only a claim's; mount paths unique per container (ValidateVolumeMounts,
  ValidateVolumeDevices);
- ports: names IANA service names (validation.IsValidPortName), unique per container; containerPort and hostPort
  1-65535 (validateContainerPorts);
- resources (resources.py);
- restartPolicy: Always, OnFailure or Never (validateRestartPolicy; defaulted to Always before validation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from infra.apiserver.core_rules.fielderrors import (
    duplicate,
    forbidden,
    invalid,
    items,
    mapping,
    not_found,
    not_supported,
    required,
    text,
)
from infra.apiserver.core_rules.resources import requirement_problems
from infra.spec.names import dns1123_label

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
PORT_RANGE = "must be between 1 and 65535, inclusive"
CLAIM_SOURCES = ("persistentVolumeClaim", "ephemeral")  # what a block device may come from


def restart_policy(spec: dict[str, Any]) -> str:
    """The pod's restartPolicy after defaulting (SetDefaults_PodSpec: Always when absent)."""
    return text(spec.get("restartPolicy")) or "Always"


def port_name_problems(name: str) -> list[str]:
    """k8s.io/apimachinery validation.IsValidPortName (an IANA_SVC_NAME)."""
    problems = [] if len(name) <= 15 else ["must be no more than 15 characters"]
    if not re.fullmatch(r"[-a-z0-9]+", name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def _port_number(value: Any, path: str) -> list[str]:
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
        return [invalid(path, value, PORT_RANGE)]
    return []


def _ports(ports: Any, path: str) -> list[str]:
    problems: list[str] = []
    names: set[str] = set()
    for i, port in enumerate(items(ports)):
        port, where = mapping(port), f"{path}[{i}]"
        name = text(port.get("name"))
        if name:
            name_problems = port_name_problems(name)
            if name_problems:
                problems += [invalid(f"{where}.name", name, p) for p in name_problems]
            elif name in names:
                problems.append(duplicate(f"{where}.name", name))
            else:
                names.add(name)
        if not port.get("containerPort"):
            problems.append(required(f"{where}.containerPort"))
        else:
            problems += _port_number(port["containerPort"], f"{where}.containerPort")
        if port.get("hostPort"):
            problems += _port_number(port["hostPort"], f"{where}.hostPort")
        protocol = port.get("protocol", "TCP")  # defaulted to TCP
        if protocol not in PROTOCOLS:
            problems.append(not_supported(f"{where}.protocol", protocol, PROTOCOLS))
    return problems


def _mounts(container: dict[str, Any], volumes: dict[str, dict[str, Any]], path: str) -> list[str]:
    problems: list[str] = []
    paths: set[str] = set()
    for i, mount in enumerate(items(container.get("volumeMounts"))):
        mount, where = mapping(mount), f"{path}.volumeMounts[{i}]"
        name, mount_path = text(mount.get("name")), text(mount.get("mountPath"))
        if not name:
            problems.append(required(f"{where}.name"))
        if name not in volumes:
            problems.append(not_found(f"{where}.name", name))
        if mount_path in paths:
            problems.append(invalid(f"{where}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
    for i, device in enumerate(items(container.get("volumeDevices"))):
        name, where = text(mapping(device).get("name")), f"{path}.volumeDevices[{i}]"
        if not name:
            problems.append(required(f"{where}.name"))
        if name not in volumes:
            problems.append(not_found(f"{where}.name", name))
        elif not any(source in volumes[name] for source in CLAIM_SOURCES):
            problems.append(invalid(f"{where}.name", name, "can only use volume source type of "
                                    "PersistentVolumeClaim or Ephemeral for block mode"))
    return problems


def _container(container: dict[str, Any], volumes: dict[str, dict[str, Any]], path: str) -> list[str]:
    """validateContainerCommon: what every container kind must satisfy."""
    name = text(container.get("name"))
    problems = [invalid(f"{path}.name", name, p) for p in dns1123_label(name)] if name else [
        required(f"{path}.name")]
    if not text(container.get("image")):
        problems.append(required(f"{path}.image"))
    problems += _ports(container.get("ports"), f"{path}.ports")
    problems += _mounts(container, volumes, path)
    return problems + requirement_problems(container.get("resources"), f"{path}.resources")


def volumes_of(spec: dict[str, Any], path: str, injected: Iterable[str] = ()) -> tuple[dict[str, dict[str, Any]],
                                                                                        list[str]]:
    """The pod's usable volumes by name, and the refusals of their names (ValidateVolumes: a volume whose name is
    refused is not usable). `injected`: volumes a controller adds to the pods it creates (a StatefulSet's claim
    templates, a JobSet's volume claim policies)."""
    problems: list[str] = []
    usable: dict[str, dict[str, Any]] = {}
    for i, volume in enumerate(items(spec.get("volumes"))):
        volume, where = mapping(volume), f"{path}.volumes[{i}].name"
        name = text(volume.get("name"))
        found = [invalid(where, name, p) for p in dns1123_label(name)] if name else [required(where)]
        if name in usable:
            found.append(duplicate(where, name))
        if found:
            problems += found
        else:
            usable[name] = volume
    # The controller's claim volume replaces a declared one of the same name (its own webhook, if any, refuses that).
    return {**usable, **{name: {"persistentVolumeClaim": {}} for name in injected}}, problems


def pod_spec_problems(spec: Any, path: str, injected: Iterable[str] = ()) -> list[str]:
    """The API server's refusals of the pod spec at `path` (spec, spec.template.spec, ...)."""
    spec = mapping(spec)
    volumes, problems = volumes_of(spec, path, injected)
    containers, init = items(spec.get("containers")), items(spec.get("initContainers"))
    if not containers:
        problems.append(required(f"{path}.containers"))
    names: set[str] = set()
    for field, listed in (("containers", containers), ("initContainers", init)):
        for i, container in enumerate(listed):
            container, where = mapping(container), f"{path}.{field}[{i}]"
            problems += _container(container, volumes, where)
            name = text(container.get("name"))
            if name in names:
                problems.append(duplicate(f"{where}.name", name))
            # an unnamed init container is refused for its name alone, not as a duplicate of the next one
            elif name or field == "containers":
                names.add(name)
            if field == "containers" and "restartPolicy" in container:
                problems.append(forbidden(f"{where}.restartPolicy", "may not be set for non-init containers"))
    policy = restart_policy(spec)
    if policy not in RESTART_POLICIES:
        problems.append(not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES))
    return problems
