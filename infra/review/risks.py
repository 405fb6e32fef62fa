"""What a change to the rendered platform destroys, or what the API server will refuse when it is applied, read
from the two renders `trainyard diff` compares (manifests/<namespace or _cluster>/<Kind>-<name>.yaml). Listed
above the diff, so that a reviewer sees them before the hundreds of lines a team's removal produces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from infra.spec.base import parse_quantity

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
# Fields a PersistentVolumeClaim and a StorageClass cannot change once created (the API server refuses the update,
# so Pulumi replaces the object). A claim's spec is immutable but for its storage request.
CLAIM_FIXED = ("storageClassName", "accessModes", "volumeMode", "volumeName", "selector", "dataSource",
               "dataSourceRef")
CLASS_FIXED = ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")
# The kinds whose content a risk reads; of the others (a CRD), the path alone says enough.
READ_KINDS = ("Namespace", "PersistentVolumeClaim", "StorageClass")


def objects(files: Mapping[str, str]) -> dict[str, dict[Key, dict[str, Any]]]:
    """The rendered objects of a render's files by cluster folder ('' in a single-cluster stack), then by kind,
    namespace and name, as their paths name them; only the kinds a risk reads are parsed (a chart's CRDs are
    megabytes of YAML that no risk looks into)."""
    found: dict[str, dict[Key, dict[str, Any]]] = {}
    for path, text in files.items():
        parts = path.split("/")
        if parts[0] != "manifests" or len(parts) not in (3, 4) or "-" not in parts[-1]:
            continue
        kind, name = parts[-1].removesuffix(".yaml").split("-", 1)
        parsed = yaml.load(text, Loader=yaml.CSafeLoader) if kind in READ_KINDS else None
        namespace = "" if parts[-2] == "_cluster" else parts[-2]
        found.setdefault(parts[1] if len(parts) == 4 else "", {})[(kind, namespace, name)] = \
            parsed if isinstance(parsed, dict) else {}
    return found


def _volume_fate(claim: Mapping[str, Any], known: Mapping[Key, Mapping[str, Any]]) -> str:
    """What happens to a deleted claim's volume: its StorageClass' reclaimPolicy (Kubernetes' default: Delete)."""
    name = claim.get("spec", {}).get("storageClassName")
    klass = known.get(("StorageClass", "", name or ""))
    if klass is None:
        return f"follows the reclaimPolicy of class {name or '(the default class)'}, which this stack does not declare"
    if klass.get("reclaimPolicy", "Delete") == "Retain":
        return "stays as a Released PersistentVolume (reclaimPolicy Retain): bind a new claim to it to keep the data"
    return f"is deleted with its data (class {name}: reclaimPolicy Delete)"


def _claim_risks(key: Key, before: Mapping[str, Any], after: Mapping[str, Any] | None,
                 base: Mapping[Key, Mapping[str, Any]], deleted_namespaces: set[str]) -> list[str]:
    _, namespace, name = key
    where = f"PersistentVolumeClaim {namespace}/{name}"
    if after is None:
        if namespace in deleted_namespaces:
            return []  # said once, for its namespace
        return [f"{where} is deleted: its volume {_volume_fate(before, base)}"]
    old, new = before.get("spec", {}), after.get("spec", {})
    found = []
    changed = [field for field in CLAIM_FIXED if old.get(field) != new.get(field)]
    if changed:
        found.append(f"{where}: {', '.join(changed)} cannot change on a claim, so Pulumi replaces it with a new, empty "
                     f"volume; the old one {_volume_fate(before, base)}")
    sizes = [spec.get("resources", {}).get("requests", {}).get("storage") for spec in (old, new)]
    if all(sizes) and parse_quantity(sizes[1]) < parse_quantity(sizes[0]):
        found.append(f"{where}: storage {sizes[0]} -> {sizes[1]}: the API server refuses to shrink a claim, so "
                     f"`pulumi up` fails: keep {sizes[0]} or more")
    return found


def risks(base_files: Mapping[str, str], head_files: Mapping[str, str]) -> list[str]:
    """One line per destructive or refused change from the base render to the head render, in a stable order
    (prefixed with the cluster's name in a stack of several clusters)."""
    base, head = objects(base_files), objects(head_files)
    return [f"{cluster}: {risk}" if cluster else risk for cluster in sorted(base)
            for risk in _cluster_risks(base[cluster], head.get(cluster, {}))]


def _cluster_risks(base: Mapping[Key, dict[str, Any]], head: Mapping[Key, dict[str, Any]]) -> list[str]:
    deleted_namespaces = {name for kind, _, name in base if kind == "Namespace" and (kind, "", name) not in head}
    found: list[str] = []
    for key in sorted(base):
        kind, namespace, name = key
        before, after = base[key], head.get(key)
        if kind == "Namespace" and name in deleted_namespaces:
            claims = sorted(k for k in base if k[0] == "PersistentVolumeClaim" and k[1] == name)
            volumes = "; ".join(f"{name}/{claim[2]}: its volume {_volume_fate(base[claim], base)}" for claim in claims)
            found.append(f"Namespace {name} is deleted, and every object in it with it"
                         + (f" (claims: {volumes})" if volumes else ""))
        elif kind == "PersistentVolumeClaim":
            found += _claim_risks(key, before, after, base, deleted_namespaces)
        elif kind == "CustomResourceDefinition" and after is None:
            found.append(f"CustomResourceDefinition {name} is deleted: every object of that kind in the cluster goes "
                         "with it")
        elif kind == "StorageClass" and after is not None:
            changed = [field for field in CLASS_FIXED if before.get(field) != after.get(field)]
            if changed:
                found.append(f"StorageClass {name}: {', '.join(changed)} cannot change on a class, so Pulumi "
                             "replaces it; volumes made before keep the old settings")
    for key in sorted(head):
        kind, namespace, name = key
        wanted = head[key].get("spec", {}).get("storageClassName") if kind == "PersistentVolumeClaim" else None
        if wanted and ("StorageClass", "", wanted) in base and ("StorageClass", "", wanted) not in head:
            found.append(f"PersistentVolumeClaim {namespace}/{name} names StorageClass {wanted}, which this change "
                         "deletes: the claim would stay Pending")
    return found
