"""CEL text for the admission policies (infra/platform/admission.py): literals, walks over every pod spec of a
workload and every container of a pod spec, a request's resource, securityContext fields and GPU requests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from infra.vocabulary import CONTAINER_FIELDS, WORKLOADS, gpu_request_cel


def lit(value: Any) -> str:
    """A CEL literal (JSON strings, lists and maps are CEL)."""
    return json.dumps(value, sort_keys=True)


def _guard(var: str, fields: Sequence[str]) -> str:
    return " && ".join(f"has({var}.{'.'.join(fields[:i])})" for i in range(1, len(fields) + 1)) or "true"


def every_pod_spec(path: Sequence[str], predicate: str, var: str = "object", depth: int = 0) -> str:
    """CEL: `predicate` (over `s`) holds for every pod spec found along `path`; missing parts hold."""
    if "*" in path:
        star = list(path).index("*")
        head, rest = path[:star], path[star + 1:]
        item = f"x{depth}"
        inner = every_pod_spec(rest, predicate, item, depth + 1)
        return f"({_guard(var, head)} ? {var}.{'.'.join(head)}.all({item}, {inner}) : true)"
    return f"({_guard(var, path)} ? [{var}.{'.'.join(path)}].all(s, {predicate}) : true)"


def every_container(predicate: str) -> str:
    """CEL over pod spec `s`: `predicate` (over `c`) holds for every container of every kind."""
    return " && ".join(f"(!has(s.{field}) || s.{field}.all(c, {predicate}))" for field in CONTAINER_FIELDS)


def asks_gpu(var: str, field: str) -> str:
    """CEL: `var.field` (a container's resources) requests or limits a GPU."""
    amounts = [f"(has({var}.{field}.{part}) && {gpu_request_cel(f'{var}.{field}.{part}')})"
               for part in ("requests", "limits")]
    return f"(has({var}.{field}) && ({' || '.join(amounts)}))"


def resource_rules(resources: Sequence[str],
                   operations: Sequence[str] = ("CREATE", "UPDATE")) -> list[dict[str, Any]]:
    """A policy's matchConstraints.resourceRules for these resources (workload kinds by their API group)."""
    return [{"apiGroups": [WORKLOADS[r].group if r in WORKLOADS else ""], "apiVersions": ["*"], "resources": [r],
             "operations": list(operations)} for r in resources]


def when(resource: str, expression: str) -> str:
    """CEL: `expression` holds, or the request is for another resource."""
    return f"request.resource.resource != '{resource}' || {expression}"


def is_set(var: str, field: str) -> str:
    """CEL: the boolean `var.field` is present and true."""
    return f"(has({var}.{field}) && {var}.{field})"


def security_field(field: str, test: str, default: str) -> str:
    """CEL over container `c` in pod spec `s`: `test` (over `v`) of the container's securityContext field,
    else of the pod's, else `default`."""
    def at(var: str) -> str:
        return f"has({var}.securityContext) && has({var}.securityContext.{field})"
    return (f"(({at('c')}) ? [c.securityContext.{field}].all(v, {test}) : (({at('s')}) ? "
            f"[s.securityContext.{field}].all(v, {test}) : {default}))")
