"""Run the real Pulumi program (infra/__main__.py) under Pulumi's mocks and record every registration.

A fresh event loop and fresh runtime settings per run; the monitor records each RegisterResourceRequest
(with its options) and refuses resource references, which keeps remote components from flaking and
gives inputs the shape policy packs see.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import logging
import runpy
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func

from infra.kit import paths
from infra.kit.objects import type_token
from infra.offline import kustomize
from infra.offline.charts import CHART_TYPE, Rendered, child_name, render_all, source_of
from infra.offline.fakes import OfflineMocks, echoes_inputs, fake_id
from infra.offline.stacktrace import lean_stack_traces
from infra.spec import KUBECONFIG_KEY, PLATFORM_KEY, PROJECT
from infra.spec.input.keys import OFFLINE_MASK

PROGRAM = paths.PROGRAM
SECRET_SIG = "4dabf18193072939515e22adb298388d"
SECRET = OFFLINE_MASK


class DuplicateResource(Exception):
    """Two registrations with one URN: the real engine refuses them; mocks would merge them silently."""


@dataclass(frozen=True)
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    remote: bool
    inputs: dict[str, Any]
    depends_on: tuple[str, ...]
    protect: bool
    retain_on_delete: bool
    provider: str
    chart: str = ""  # for an object a chart or a kustomization installs: that chart's or Directory's ref

    def ref(self) -> str:
        return f"{self.type}::{self.name}"


@dataclass(frozen=True)
class Capture:
    stack: str
    project: str
    resources: tuple[Registration, ...]  # sorted by (type, name); chart objects included
    outputs: dict[str, Any]
    charts: tuple[Rendered, ...] = ()  # every chart, rendered (its hooks and values problems too)
    kustomizations: tuple[kustomize.Kustomized, ...] = ()  # every kustomize.v2.Directory, built


def _urn_ref(urn: str) -> str:
    """'urn:pulumi:s::p::a$b:c:D::name' (or a provider reference 'urn::id') -> 'b:c:D::name'."""
    if not urn:
        return ""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{parts[3]}"


def _plain(value: Any) -> Any:
    """Protobuf-decoded inputs with secrets masked and integers restored: a Struct holds every number as a
    double, and the provider sends a whole one to the API server as an integer (Go's JSON encoding)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return SECRET
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[Registration] = []
        self.transforms: dict[str, list[Any]] = {}  # URN -> the transforms in its options (a chart's: its children's)
        self.duplicates: list[str] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return super().RegisterResource(request)
        record = Registration(
            type=request.type,
            name=request.name,
            urn=urn,
            parent=_urn_ref(request.parent),
            custom=bool(request.custom),
            remote=bool(request.remote),
            inputs=_plain(json_format.MessageToDict(request.object)),
            depends_on=tuple(sorted(_urn_ref(dep) for dep in request.dependencies)),
            protect=request.HasField("protect") and request.protect,
            retain_on_delete=request.HasField("retainOnDelete") and request.retainOnDelete,
            provider=_urn_ref(request.provider),
        )
        transforms = pulumi_mocks._resolve_callbacks(request.transforms)  # the SDK's own token -> function lookup
        with self._lock:
            if transforms:
                self.transforms[urn] = transforms
            if urn in self._seen:
                self.duplicates.append(urn)
            self._seen.add(urn)
            self.records.append(record)
        if not echoes_inputs(request.type):
            return super().RegisterResource(request)
        # Outputs = inputs, as OfflineMocks would answer: reply with the request's own encoded properties
        # instead of decoding them for Mocks.new_resource and encoding its answer again.
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, fake_id(request.name), record.inputs)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=fake_id(request.name), object=request.object)

    def SupportsFeature(self, request: Any) -> Any:
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)

    def GetDeploymentInfo(self, request: Any) -> Any:
        info = super().GetDeploymentInfo(request)
        features = [f for f in info.supportedFeatures
                    if f != pulumi_mocks.resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES]
        del info.supportedFeatures[:]
        info.supportedFeatures.extend(features)
        return info


def stack_config(config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Stack-file config as the CLI hands it to a program: JSON strings, secure values masked."""
    values: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[key] = SECRET
            secret_keys.append(key)
        else:
            values[key] = value if isinstance(value, str) else json.dumps(value)
    if KUBECONFIG_KEY in values and KUBECONFIG_KEY not in secret_keys:
        secret_keys.append(KUBECONFIG_KEY)
    return values, secret_keys


@contextlib.contextmanager
def _debug_log_when_read() -> Iterator[None]:
    """The SDK logs a debug line per RPC, each built into a LogRequest for the mocks' engine, which hands it to the
    root logger, which drops it unless that logs debug: a tenth of a run's time. Built only when it would be read."""
    sdk_debug = pulumi.log.debug

    def debug(msg: str, resource: Any = None, stream_id: int | None = None, ephemeral: bool | None = None) -> None:
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            sdk_debug(msg, resource, stream_id, ephemeral)
    pulumi.log.debug = debug
    try:
        yield
    finally:
        pulumi.log.debug = sdk_debug


@contextlib.contextmanager
def _rare_full_collections() -> Iterator[None]:
    """A run allocates millions of objects that live until it ends (registrations, outputs, rendered charts): at
    Python's default thresholds they set off full collections, each walking every object alive (aws-prod, warm
    caches: 0.85 s of CPU a run, 0.68 s without). Young objects are collected as often; a full collection waits
    for a hundred times as many."""
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, 1000))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, full)


def run(stack: str, config: dict[str, Any], program_path: Path = PROGRAM) -> Capture:
    """Run a program (by default Trainyard's) for one stack: every registration, sorted, and the outputs."""
    with _rare_full_collections():
        return _run(stack, config, program_path)


def _run(stack: str, config: dict[str, Any], program_path: Path) -> Capture:
    if program_path == PROGRAM and PLATFORM_KEY not in config:
        raise ValueError(f"config has no {PLATFORM_KEY}")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        settings.reset_options(project=PROJECT, stack=stack, preview=False)
        values, secret_keys = stack_config(config)
        pulumi.runtime.set_all_config(values, secret_keys)
        monitor = RecordingMonitor(OfflineMocks())
        pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
        exported: dict[str, Any] = {}

        async def program() -> None:
            runpy.run_path(str(program_path), run_name="__main__")
            root = settings.get_root_resource()
            outputs = getattr(root, "outputs", {})
            exported.update(await pulumi.Output.from_input(dict(outputs)).future() or {})

        with lean_stack_traces(), _debug_log_when_read():
            loop.run_until_complete(run_pulumi_func(program))
    finally:
        pulumi.runtime.set_all_config({})
        settings.reset_options()
        asyncio.set_event_loop(None)
        loop.close()
    if monitor.duplicates:
        raise DuplicateResource(f"registered twice: {sorted(set(monitor.duplicates))[0]}")
    # Sorted: registration order varies from run to run, and plan.json lists the charts in this order.
    charts = _sorted_of(monitor.records, CHART_TYPE)
    rendered = render_all([source_of(c.ref(), c.inputs) for c in charts], str(exported.get("kubernetes", ""))) \
        if charts else ()
    directories = _sorted_of(monitor.records, kustomize.DIRECTORY_TYPE)
    built = kustomize.render_all([kustomize.source_of(d.ref(), d.inputs) for d in directories],
                                 [obj for r in rendered for obj in r.objects]) if directories else ()
    installed = [child for parent, objs in (*zip(charts, (r.objects for r in rendered), strict=True),
                                            *zip(directories, (k.objects for k in built), strict=True))
                 for child in _children(parent, objs, monitor.transforms.get(parent.urn, []))]
    resources = tuple(sorted((*monitor.records, *installed), key=lambda r: (r.type, r.name, r.urn)))
    return Capture(stack=stack, project=PROJECT, resources=resources, outputs=exported, charts=rendered,
                   kustomizations=built)


def _sorted_of(records: list[Registration], type_: str) -> list[Registration]:
    return sorted((record for record in records if record.type == type_), key=Registration.ref)


def _children(parent: Registration, objects: tuple[dict[str, Any], ...], transforms: list[Any]) -> list[Registration]:
    """The objects helm.v4.Chart or kustomize.v2.Directory registers: its children, on its provider, named
    `<name>:<namespace>/<object>`, each passed through its transforms as the engine does (helm_chart() and
    kustomize_directory() add the one that retains CRDs)."""
    prefix, _, _ = parent.urn.rpartition("::")
    children = []
    for obj in objects:
        type_, name = type_token(obj["apiVersion"], obj["kind"]), child_name(parent.name, obj)
        inputs, options = _transformed(type_, name, obj, transforms)
        children.append(Registration(
            type=type_, name=name, urn=f"{prefix.rsplit('::', 1)[0]}::{parent.type}${type_}::{name}",
            parent=parent.ref(), custom=True, remote=False, inputs=inputs, depends_on=(),
            protect=bool(options.protect), retain_on_delete=bool(options.retain_on_delete), provider=parent.provider,
            chart=parent.ref()))
    return children


def _transformed(type_: str, name: str, props: dict[str, Any],
                 transforms: list[Any]) -> tuple[dict[str, Any], pulumi.ResourceOptions]:
    options = pulumi.ResourceOptions()
    for transform in transforms:
        result = transform(pulumi.ResourceTransformArgs(custom=True, type_=type_, name=name, props=props,
                                                        opts=options))
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        if result is not None:
            props, options = dict(result.props), result.opts
    return props, options


async def _awaited(result: Any) -> Any:
    return await result
