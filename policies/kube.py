"""Reading Kubernetes objects out of policy resources.

Props are Mappings and Sequences, not dicts and lists: the real analyzer hands policies proxies that
raise on values unknown during preview, so nothing here converts a whole object eagerly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource

from infra.platform.admission import WORKLOADS

KUBERNETES = "kubernetes:"
CHART_TYPES = frozenset({"kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v3:Release"})
GPU_RESOURCE_PREFIX = "nvidia.com/"

# Kind -> where its pod specs are ("*" walks a list): what admission checks, plus the controllers.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    **{workload.kind: workload.path for workload in WORKLOADS.values()},
    "ClusterTrainingRuntime": WORKLOADS["trainingruntimes"].path,
    **{kind: ("spec", "template", "spec") for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")},
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
TRAINING_RUNTIMES = frozenset({"TrainingRuntime", "ClusterTrainingRuntime"})


def is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def kind_of(resource_type: str) -> str:
    """'kubernetes:core/v1:Namespace' -> 'Namespace'; '' for anything that is not a Kubernetes object."""
    if not resource_type.startswith(KUBERNETES) or resource_type in CHART_TYPES:
        return ""
    return resource_type.rsplit(":", 1)[-1]


def get(value: Any, *path: str) -> Any:
    """value[path[0]][path[1]]..., or None where a step is missing."""
    for key in path:
        if not is_map(value) or key not in value:
            return None
        value = value[key]
    return value


def items(value: Any) -> list[Any]:
    return list(value) if is_list(value) else []


def meta(props: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
    """(namespace, name, labels) of an object."""
    labels = get(props, "metadata", "labels")
    return (str(get(props, "metadata", "namespace") or ""), str(get(props, "metadata", "name") or ""),
            labels if is_map(labels) else {})


def _walk(value: Any, path: tuple[str, ...]) -> Iterator[Mapping[str, Any]]:
    if not path:
        if is_map(value):
            yield value
        return
    head, rest = path[0], path[1:]
    if head == "*":
        for item in items(value):
            yield from _walk(item, rest)
    else:
        yield from _walk(get(value, head), rest)


def pod_specs(kind: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(_walk(props, POD_SPEC_PATHS.get(kind, ())) if kind in POD_SPEC_PATHS else [])


def containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = []
    for field in ("initContainers", "containers", "ephemeralContainers"):
        found += [c for c in items(spec.get(field)) if is_map(c)]
    return found


def requests_gpu(spec: Mapping[str, Any]) -> bool:
    for container in containers(spec):
        for part in ("requests", "limits"):
            amounts = get(container, "resources", part)
            if is_map(amounts) and any(str(key).startswith(GPU_RESOURCE_PREFIX) and str(amounts[key]) != "0"
                                       for key in amounts):
                return True
    return False


def images(value: Any) -> Iterator[str]:
    """Every container image reference in an object or in chart values ({repository, tag} pairs too), except
    under a component switched off (`enabled: false`), which deploys none."""
    if is_map(value):
        if value.get("enabled") is False:
            return
        image, repository = value.get("image"), value.get("repository")
        if isinstance(image, str) and isinstance(repository, str) and "version" in value:
            # An NVIDIA operand (ClusterPolicy): {repository, image, version}; a digest version takes '@'.
            version = str(value.get("version") or "")
            yield f"{repository}/{image}{'@' if version.startswith('sha256:') else ':'}{version}"
        elif isinstance(image, str):
            yield image
        repository, tag = value.get("repository"), value.get("tag")
        if isinstance(repository, str) and "tag" in value:
            registry = value.get("registry")
            prefix = f"{registry}/" if isinstance(registry, str) and registry else ""
            yield f"{prefix}{repository}:{tag or ''}"
        for key in value:
            yield from images(value[key])
    elif is_list(value):
        for item in value:
            yield from images(item)


def objects(resources: Sequence[PolicyResource], kind: str) -> list[PolicyResource]:
    return [r for r in resources if kind_of(r.resource_type) == kind]
