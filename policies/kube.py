"""Reading Kubernetes objects out of policy resources.

Props are Mappings and Sequences, not dicts and lists: the real analyzer hands policies proxies that
raise on values unknown during preview, so nothing here converts a whole object eagerly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource

from infra.vocabulary import (  # re-exported: the rules read pods through these
    GPU_RESOURCE_PREFIX,
    POD_SPEC_PATHS,
    TEAM_LABEL,
    containers,
    pod_specs,
    requests_gpu,
)

KUBERNETES = "kubernetes:"
CHART_TYPES = frozenset({"kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v3:Release"})
# A folder of a vendored, pinned release of upstream manifests (docs/manifests.md): reviewed like a chart.
KUSTOMIZE_TYPE = "kubernetes:kustomize/v2:Directory"
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


SCALARS = (str, bytes, int, float, type(None))  # leaves: no image below them, not worth a call


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
        for item in value.values():
            if not isinstance(item, SCALARS):
                yield from images(item)
    elif is_list(value):
        for item in value:
            if not isinstance(item, SCALARS):
                yield from images(item)


CHART_COMPONENTS = ("kueue", "kubeflow-trainer", "jobset")


def chart_versions(resources: Sequence[Any]) -> dict[str, tuple[str, Any]]:
    """Chart name (last path segment of its reference) -> (version, resource) for the charts we pin."""
    found: dict[str, tuple[str, Any]] = {}
    for resource in resources:
        if resource.resource_type in CHART_TYPES:
            chart = str(resource.props.get("chart") or "").rstrip("/").rsplit("/", 1)[-1]
            if chart in CHART_COMPONENTS:
                found[chart] = (str(resource.props.get("version") or "").lstrip("v"), resource)
    return found


def objects(resources: Sequence[PolicyResource], kind: str) -> list[PolicyResource]:
    return [r for r in resources if kind_of(r.resource_type) == kind]


def team_namespaces(resources: Sequence[Any]) -> set[str]:
    return {meta(ns.props)[1] for ns in objects(resources, "Namespace") if TEAM_LABEL in meta(ns.props)[2]}


# Kubernetes' own groups that take in tenants too; other `system:` identities are the cluster's components.
EVERYONE = ("system:authenticated", "system:unauthenticated", "system:serviceaccounts")


def _is_tenant(kind: str, name: str, namespace: str, tenant_namespaces: set[str], admins: set[str]) -> bool:
    if kind == "ServiceAccount":
        return namespace in tenant_namespaces
    if name in EVERYONE or name.removeprefix("system:serviceaccounts:") in tenant_namespaces:
        return True
    return not name.startswith("system:") and name not in admins


def from_chart(resource: PolicyResource) -> bool:
    """An object a Helm chart renders, or a vendored kustomization builds (its parent is the chart resource or the
    Directory)."""
    return resource.parent is not None and resource.parent.resource_type in (*CHART_TYPES, KUSTOMIZE_TYPE)


def tenant_subjects(subjects: Any, namespace: str, tenant_namespaces: set[str], admins: set[str]) -> list[str]:
    tenants = []
    for subject in items(subjects):
        kind, name = str(get(subject, "kind") or ""), str(get(subject, "name") or "")
        if _is_tenant(kind, name, str(get(subject, "namespace") or namespace), tenant_namespaces, admins):
            tenants.append(f"{kind} {name}")
    return tenants


__all__ = ["GPU_RESOURCE_PREFIX", "POD_SPEC_PATHS", "containers", "pod_specs", "requests_gpu"]
