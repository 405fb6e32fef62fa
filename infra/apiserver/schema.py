"""Schema checks of every declared object: custom resources against the upstream CRDs that match the
pinned versions (including fields the API server would prune silently), core objects against the
Kubernetes OpenAPI schemas of kubernetes-validate in strict mode."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

from infra.apiserver.core_rules import core_problems, template_problems
from infra.components import crd_directories
from infra.kit.manifests import ManifestLoader
from infra.offline.diskcache import cached, content_key, remembered, source_hash
from infra.spec import Finding
from infra.spec.names import dns1123_subdomain

# API group -> the component whose CRDs define it (a directory under --crds).
CRD_COMPONENTS = crd_directories()
SECRET = "[secret]"  # how plan.json shows a Pulumi secret: its type is unknown offline
ROOT_KEYS = frozenset({"apiVersion", "kind", "metadata"})
_CODE = source_hash(Path(__file__))


def default_crds_dir(root: Path) -> Path | None:
    """$TRAINYARD_CRDS (where `make crds` fetched them), else ../shared/crds, when present."""
    candidate = Path(os.environ.get("TRAINYARD_CRDS") or root.parent / "shared" / "crds")
    return candidate if candidate.is_dir() else None


_NAMES_KIND = re.compile(r"^    kind: (\w+)$", re.MULTILINE)  # spec.names.kind in controller-gen's layout


@functools.cache
def _archive_crds(archive: Path) -> dict[str, str]:
    """Kind -> CRD text, for the CRDs a chart archive ships in its (and its subcharts') crds/ folders. Parsed
    only when an object of that kind is checked: the ten prometheus-operator CRDs are 5 MB of YAML."""
    found = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:  # in archive order: a gzip stream cannot seek back without decompressing again
            path = PurePosixPath(member.name)
            if member.isfile() and path.parent.name == "crds" and path.suffix == ".yaml":
                text = tar.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
                kind = _NAMES_KIND.search(text)
                if kind:
                    found[kind.group(1)] = text
    return dict(sorted(found.items()))


@functools.lru_cache(maxsize=64)
def _parsed(*texts: str) -> list[dict[str, Any]]:
    """The CRDs in YAML texts, parsed once per content (diskcache) and kept for this process: read, never changed
    (CrdIndex converts a schema into a new one)."""
    def parse() -> list[dict[str, Any]]:
        return [crd for text in texts for crd in yaml.load_all(text, Loader=ManifestLoader)
                if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition"]
    return cached("crds", [_CODE, yaml.__version__, *(hashlib.sha256(t.encode()).hexdigest() for t in texts)], parse)


class CrdIndex:
    """openAPIV3Schema per (group, version, kind), read from one component directory each (or a vendored chart
    archive, a `.tgz` path relative to the CRD root, for components whose CRDs ship in their chart; none without a
    root), then completed by the CRDs the stack's charts install, for kinds the directories do not define."""

    def __init__(self, root: Path | None, dirs: dict[str, str], installed: Sequence[dict[str, Any]] = ()) -> None:
        self.schemas: dict[tuple[str, str, str], dict[str, Any]] = {}  # as the CRDs have them
        self.plain_status: set[tuple[str, str, str]] = set()  # versions without the status subresource
        self._python: dict[tuple[str, str, str], dict[str, Any]] = {}  # patterns for Python, on first lookup
        self.missing: list[str] = []
        self.from_dirs = root is not None
        self._unparsed: dict[str, str] = {}  # kind -> CRD text from chart archives
        for rel in sorted(dirs.values()):
            if root is None:
                break
            folder = root / rel
            if rel.endswith(".tgz") and folder.is_file():
                self._unparsed.update(_archive_crds(folder.resolve()))
                continue
            if not folder.is_dir():
                self.missing.append(rel)
                continue
            for crd in _parsed(*(path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.yaml")))):
                self._add(crd)
        self.install(installed)

    def install(self, crds: Iterable[dict[str, Any]]) -> None:
        """Add the CRDs a cluster holds beyond the pinned directories (a chart's or a kustomization's, such as
        Argo's in Kubeflow Pipelines), for kinds the directories do not define."""
        for crd in crds:
            if crd.get("kind") == "CustomResourceDefinition":
                self._add(crd, replace=False)

    def _add(self, crd: dict[str, Any], replace: bool = True) -> None:
        spec = crd["spec"]
        for version in spec["versions"]:
            key = (spec["group"], version["name"], spec["names"]["kind"])
            schema = version.get("schema", {}).get("openAPIV3Schema")
            if version.get("served", True) and schema is not None and (replace or key not in self.schemas):
                self.schemas[key] = schema
                self._python.pop(key, None)
                if "status" in (version.get("subresources") or {}):
                    self.plain_status.discard(key)
                else:
                    self.plain_status.add(key)

    def keeps_status(self, api_version: str, kind: str) -> bool:
        """Whether a create keeps the object's `status`: a CRD version without the status subresource stores it
        as part of the object (KFP's ScheduledWorkflow even requires it); everywhere else the server drops it."""
        group, _, version = api_version.rpartition("/")
        self.schema(api_version, kind)  # a chart archive's CRD is parsed on first use
        return (group, version, kind) in self.plain_status

    def schema(self, api_version: str, kind: str) -> dict[str, Any] | None:
        """The served version's schema, its patterns made Python's (converted for the kinds checked only: the
        pinned directories hold a hundred CRDs, a stack uses a few)."""
        group, _, version = api_version.rpartition("/")
        if kind in self._unparsed:
            for crd in _parsed(self._unparsed.pop(kind)):
                self._add(crd)
        key = (group, version, kind)
        if key not in self._python and key in self.schemas:
            self._python[key] = _python_patterns(self.schemas[key])
        return self._python.get(key)


def _python_patterns(schema: Any) -> Any:
    """CRD patterns are Go RE2, which takes an inline flag anywhere (AdmissionCheck's `^(?i)[a-z]...`); Python's
    re wants global flags first. A leading `^(?i)` means the same as `(?i)^`."""
    if isinstance(schema, dict):
        return {key: (f"(?i)^{value[len('^(?i)'):]}" if key == "pattern" and isinstance(value, str)
                      and value.startswith("^(?i)") else _python_patterns(value)) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_python_patterns(item) for item in schema]
    return schema


def pruned_fields(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Paths the API server would drop: object keys that a structural schema does not declare."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if not path and key in ROOT_KEYS:
                continue
            if key in properties:
                yield from pruned_fields(item, properties[key], child)
            elif isinstance(additional, dict):
                yield from pruned_fields(item, additional, child)
            elif additional is not True:
                yield child
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            yield from pruned_fields(item, schema["items"], f"{path}[{position}]")


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message[:240]}"


def check_custom(obj: dict[str, Any], index: CrdIndex) -> list[str]:
    """The CRD schema's refusals of the object itself (those of the Jobs a controller will make of it:
    core_rules.template_problems)."""
    schema = index.schema(obj.get("apiVersion", ""), obj.get("kind", ""))
    if schema is None:
        return [f"no CRD for {obj.get('apiVersion')} {obj.get('kind')} in the pinned CRD directories"]
    problems = [f"{p}: not in the CRD schema; the API server would prune it silently"
                for p in pruned_fields(obj, schema)]
    validator = jsonschema.Draft7Validator(schema)
    problems += [_describe(e) for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]
    metadata = obj.get("metadata", {})
    name = metadata.get("name", "")
    if not isinstance(name, str) or not name or dns1123_subdomain(name):
        problems.append(f"metadata.name: '{name}' is not a DNS subdomain")
    # The API server reads metadata as ObjectMeta whatever the CRD's schema says: labels and annotations are
    # string-to-string maps.
    for key in ("labels", "annotations"):
        value = metadata.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            problems.append(f"metadata.{key}: must be a mapping of strings to strings")
    return problems


@functools.cache
def _core_validator(kind: str, api_version: str, k8s_version: str) -> jsonschema.Validator | None:
    version = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= k8s_version][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv_utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", k8s_version)
    except FileNotFoundError:
        return None
    registry = Resource.from_contents(schema) @ _definitions(folder, k8s_version)
    return jsonschema.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(folder: str, k8s_version: str) -> Registry[Any]:
    """The shared definitions every kind's schema refers to (4 MB of JSON): read once per version, not per kind."""
    return Resource.from_contents(kv_utils.schema_contents(f"{folder}/_definitions.json", k8s_version)) @ Registry()


def is_core_kind(obj: dict[str, Any], k8s_version: str) -> bool:
    """Whether Kubernetes itself serves the object's kind at this version."""
    return _core_validator(obj.get("kind", ""), obj.get("apiVersion", ""), k8s_version) is not None


def check_core(obj: dict[str, Any], k8s_version: str) -> list[str]:
    """kubernetes-validate's strict schemas (unknown fields are errors), validators cached per kind. An object's
    problems are kept for this process by its content_key: a stack's runs and their variants validate the same
    objects again and again, the charts' CRDs of megabytes among them."""
    return remembered("core-schema", [k8s_version, content_key(obj)], lambda: _check_core(obj, k8s_version))


def _check_core(obj: dict[str, Any], k8s_version: str) -> list[str]:
    validator = _core_validator(obj.get("kind", ""), obj.get("apiVersion", ""), k8s_version)
    if validator is None:
        return [f"no Kubernetes {k8s_version} schema for {obj.get('apiVersion')} {obj.get('kind')}"]
    errors = (e for e in validator.iter_errors(obj) if e.instance != SECRET)
    return [_describe(e) for e in sorted(errors, key=lambda e: list(e.absolute_path))] + core_problems(obj)


def is_custom(obj: dict[str, Any], index: CrdIndex | None) -> bool:
    """A kind of a pinned component's group, or one a CRD of the stack defines."""
    api_version = obj.get("apiVersion", "")
    defined = index is not None and index.schema(api_version, obj.get("kind", "")) is not None
    return api_version.rpartition("/")[0] in CRD_COMPONENTS or defined


def schema_findings(objects: list[dict[str, Any]], index: CrdIndex | None, k8s_version: str) -> list[Finding]:
    findings: list[Finding] = []
    for obj in objects:
        subject = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if is_custom(obj, index):
            # Without CRD directories, a pinned component's kind that no chart defines stays unchecked.
            schema = index.schema(obj.get("apiVersion", ""), obj.get("kind", "")) if index is not None else None
            known = index is not None and (index.from_dirs or schema is not None)
            # a runtime or JobSet whose Jobs the API server would refuse is a platform that cannot run
            problems = check_custom(obj, index) + template_problems(obj) if index is not None and known else []
        else:
            problems = check_core(obj, k8s_version)
        findings += [Finding("schema", subject, problem) for problem in problems]
    if index is not None and index.from_dirs:
        findings += [Finding("schema", f"crds/{rel}", "CRD directory missing: custom resources of this "
                             "component were not checked") for rel in index.missing]
    return findings

