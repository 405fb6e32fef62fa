"""Strategic merge patch of a batch/v1 JobTemplateSpec, as k8s.io/apimachinery `strategicpatch.StrategicMergePatch`
applies it with the JobTemplateSpec's struct tags. Trainer 2.2.1 merges a TrainJob's runtime patches into the
runtime's replicated jobs this way (`pkg/runtime/core/trainingruntime.go` mergeRuntimePatches), and Kueue 0.19.2
derives the TrainJob's pod sets from the result.

Maps merge key by key and a null value deletes the key; lists whose field carries `patchStrategy:"merge"` in
k8s.io/api (core/v1 PodSpec, Container, ObjectMeta) merge item by item on their merge key, an item the original
lacks being appended; every other list is replaced. Within a JobTemplateSpec each of these field names occurs in one
type only, so the field name alone selects the strategy. Patch directives (`$patch`, `$retainKeys`,
`$setElementOrder`, `$deleteFromPrimitiveList`) are not interpreted."""

from __future__ import annotations

import copy
from typing import Any

# k8s.io/api core/v1 types.go: fields with patchStrategy "merge" (or "merge,retainKeys") and their patchMergeKey
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "imagePullSecrets": "name", "resourceClaims": "name", "schedulingGates": "name", "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey", "env": "name", "ports": "containerPort",
    "volumeMounts": "mountPath", "volumeDevices": "devicePath", "ownerReferences": "uid",
}
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})  # ObjectMeta.Finalizers: patchStrategy "merge", a set union


def merge(original: Any, patch: Any, field: str = "") -> Any:
    """The original with the patch merged in; neither argument is changed."""
    if isinstance(original, dict) and isinstance(patch, dict):
        merged = dict(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = merge(original[key], value, key) if key in original else copy.deepcopy(value)
        return merged
    if isinstance(original, list) and isinstance(patch, list):
        if field in MERGE_KEYS:
            return _merge_by_key(original, patch, MERGE_KEYS[field])
        if field in MERGED_PRIMITIVE_LISTS:
            return [*original, *(item for item in patch if item not in original)]
    return copy.deepcopy(patch)


def _merge_by_key(original: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = list(original)
    for item in patch:
        at = next((i for i, old in enumerate(merged) if isinstance(old, dict) and isinstance(item, dict)
                   and key in item and old.get(key) == item[key]), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = merge(merged[at], item)
    return merged
