"""A container's resource requirements as the API server validates them (k8s.io/kubernetes pkg/apis/core/validation,
validation.go validateResourceRequirements and ValidateResourceQuantityValue; pkg/apis/core/helper
IsOvercommitAllowed, IsExtendedResourceName):

- no quantity may be negative; an extended resource (a name with a domain outside kubernetes.io, such as
  nvidia.com/gpu) is counted in whole units;
- a request for a resource that cannot be overcommitted (extended resources and hugepages-*) needs a limit, equal
  to it; for the others (cpu, memory, ephemeral-storage) a request may not exceed its limit.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from infra.apiserver import quantity
from infra.apiserver.core_rules.fielderrors import invalid, mapping, required

NATIVE_DOMAIN = "kubernetes.io/"
HUGEPAGES = "hugepages-"
REQUESTS_PREFIX = "requests."  # quota names, never a container's resource


def native(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a kubernetes.io one."""
    return "/" not in name or NATIVE_DOMAIN in name


def overcommit_allowed(name: str) -> bool:
    return native(name) and not name.startswith(HUGEPAGES)


def extended(name: str) -> bool:
    """helper.IsExtendedResourceName (its qualified-name check left to the schema's resource-name rules)."""
    return not native(name) and not name.startswith(REQUESTS_PREFIX)


def _amount(name: str, value: Any, path: str, problems: list[str]) -> Decimal | None:
    """The quantity's value, after its own checks (ValidateResourceQuantityValue); None when it is no quantity
    (the schema's finding)."""
    try:
        amount = quantity.parse(value)
    except ValueError:
        return None
    if amount < 0:
        problems.append(invalid(path, str(value), "must be greater than or equal to 0"))
    if extended(name) and (amount * 1000) % 1000 != 0:  # the server compares milli-units
        problems.append(invalid(path, str(value), "must be an integer"))
    return amount


def requirement_problems(resources: Any, path: str) -> list[str]:
    """The refusals of one container's `resources` at `path` (e.g. spec.containers[0].resources)."""
    problems: list[str] = []
    limits, requests = ({str(name): value for name, value in mapping(mapping(resources).get(part)).items()}
                        for part in ("limits", "requests"))
    amounts = {name: _amount(name, value, f"{path}.limits[{name}]", problems) for name, value in limits.items()}
    for name, value in requests.items():
        amount = _amount(name, value, f"{path}.requests[{name}]", problems)
        if name not in limits:
            if not overcommit_allowed(name):
                problems.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
            continue
        limit = amounts[name]
        if amount is None or limit is None:
            continue
        if amount != limit and not overcommit_allowed(name):
            problems.append(invalid(f"{path}.requests", str(value), f"must be equal to {name} limit of "
                                    f"{limits[name]}"))
        elif amount > limit:
            problems.append(invalid(f"{path}.requests", str(value), f"must be less than or equal to {name} limit "
                                    f"of {limits[name]}"))
    return problems
