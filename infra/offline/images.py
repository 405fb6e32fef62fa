"""Every image a stack runs: the containers and init containers of every object, ours and the charts', and
the images operators start from the custom resources they receive (the GPU Operator's ClusterPolicy operands:
driver, toolkit, device plugin, DCGM exporter, validators...; prometheus-operator's Prometheus and Alertmanager,
and the config reloader it adds to each of their pods; KServe's storage initializer). The driver's tag is the one
the operator pulls: it appends the GPU nodes' OS (and, precompiled, their kernel) to driver.version.
`trainyard images STACK` lists them for mirroring into a private registry; the plan fails on one that is not
fully qualified and pinned.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infra.spec.cluster import GpuStack
from infra.spec.pins import unpinned_image

CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
# Custom resources whose operator turns {repository, image, version} entries into pods.
OPERAND_KINDS = frozenset({("nvidia.com", "ClusterPolicy"), ("nvidia.com", "NVIDIADriver")})
# Custom resources whose operator runs `spec.image` as the main container (prometheus-operator).
IMAGE_KINDS = frozenset({("monitoring.coreos.com", kind) for kind in ("Prometheus", "Alertmanager", "ThanosRuler")})
# KServe's storage containers: the init container it injects into every predictor pod that downloads a model.
CONTAINER_KINDS = frozenset({("serving.kserve.io", "ClusterStorageContainer")})
# Images an operator is told by argument and adds to the pods it builds: prometheus-operator's config reloader
# (the init-config-reloader and config-reloader containers of every Prometheus and Alertmanager pod), and
# cert-manager's ACME http01 solver (the pod that answers each http01 challenge).
OPERATOR_IMAGE_ARGS = ("--prometheus-config-reloader=", "--acme-http01-solver-image=")
# Images Kubeflow Pipelines starts in team namespaces for each run: Argo's executor (the workflow controller's
# `--executor-image <image>`), and KFP's driver and launcher (the API server's environment).
OPERATOR_IMAGE_FLAGS = ("--executor-image",)
OPERATOR_IMAGE_ENV = ("V2_DRIVER_IMAGE", "V2_LAUNCHER_IMAGE")


def _container_images(container: Any) -> Iterator[str]:
    if not isinstance(container, Mapping):
        return
    if "image" in container:
        yield str(container["image"])
    args = [str(arg) for arg in container.get("args") or ()]
    for index, arg in enumerate(args):
        yield from (arg[len(flag):] for flag in OPERATOR_IMAGE_ARGS if arg.startswith(flag))
        if arg in OPERATOR_IMAGE_FLAGS and index + 1 < len(args):
            yield args[index + 1]
    for env in container.get("env") or ():
        if isinstance(env, Mapping) and env.get("name") in OPERATOR_IMAGE_ENV and "value" in env:
            yield str(env["value"])


def _containers(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in CONTAINER_LISTS and isinstance(item, list):
                for container in item:
                    yield from _container_images(container)
            else:
                yield from _containers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _containers(item)


def _operands(value: Any, gpu: GpuStack | None, key: str = "") -> Iterator[str]:
    """{repository, image, version} entries of an operator's resource, except switched-off operands."""
    if isinstance(value, Mapping):
        if value.get("enabled") is False:
            return
        if isinstance(value.get("image"), str) and "repository" in value:
            version = str(value.get("version") or "")
            if key == "driver" and gpu is not None:
                version = gpu.driver_tag(version) or version
            separator = "@" if version.startswith("sha256:") else ":"
            yield f"{value['repository']}/{value['image']}{separator if version else ''}{version}"
        for name, item in value.items():
            yield from _operands(item, gpu, str(name))
    elif isinstance(value, list):
        for item in value:
            yield from _operands(item, gpu)


def object_images(obj: Mapping[str, Any], gpu: GpuStack | None = None) -> set[str]:
    """`gpu`: the cluster's GPU stack, which tells the driver's OS (and kernel); without it the driver is listed
    with the chart's version as its tag."""
    images = set(_containers(obj))
    kind = (str(obj.get("apiVersion", "")).rpartition("/")[0], obj.get("kind"))
    if kind in OPERAND_KINDS:
        images |= set(_operands(obj.get("spec", {}), gpu))
    if kind in IMAGE_KINDS and isinstance(obj.get("spec", {}).get("image"), str):
        images.add(obj["spec"]["image"])
    if kind in CONTAINER_KINDS:
        images |= set(_container_images(obj.get("spec", {}).get("container")))
    return images


def qualified(image: str) -> bool:
    """registry/repository:tag or registry/repository@sha256:...: the registry is explicit (a host with a dot
    or a port, or localhost), so a mirror can be configured for it, and the reference is pinned."""
    registry, _, rest = image.partition("/")
    explicit = bool(rest) and ("." in registry or ":" in registry or registry == "localhost")
    return explicit and not unpinned_image(image)


def stack_images(objects: list[dict[str, Any]], gpu: GpuStack | None = None) -> dict[str, list[str]]:
    """Image -> the objects that run it (`Kind/namespace/name`), sorted."""
    users: dict[str, set[str]] = {}
    for obj in objects:
        meta = obj.get("metadata", {})
        subject = "/".join(filter(None, (obj.get("kind"), meta.get("namespace"), meta.get("name"))))
        for image in object_images(obj, gpu):
            users.setdefault(image, set()).add(subject)
    return {image: sorted(users[image]) for image in sorted(users)}
