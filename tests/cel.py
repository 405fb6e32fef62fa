"""ValidatingAdmissionPolicies evaluated as the API server evaluates them, with cel-python: the policy's
variables in order, then every validation against `object` and `request`. Used to test what the policies
admit and deny, not only how they are written."""

from __future__ import annotations

import functools
from typing import Any

import celpy
from celpy import celtypes

from infra.apiserver.cel import LOGIC

_ENV = celpy.Environment()


@functools.cache
def _compile(expression: str) -> Any:
    """A compiled program, reused: compiling (celpy's parser) costs far more than evaluating. `||` and `&&` as
    celpy's, without rendering error operands (infra/apiserver/cel.py)."""
    return _ENV.program(_ENV.compile(expression), functions=LOGIC)


# Who asks when a test does not say: a tenant, as the API server names an OIDC user.
TENANT = {"username": "oidc:alice", "groups": ["oidc:vision-eng", "system:authenticated"]}


def denials(policy: dict[str, Any], obj: dict[str, Any] | None, resource: str, namespace: str,
            operation: str = "CREATE", user: dict[str, Any] | None = None,
            old: dict[str, Any] | None = None) -> list[str]:
    """The messages of the validations that do not hold for `obj` (a CEL evaluation error counts as a
    denial, as it does under failurePolicy Fail, and is reported with its error). `user` is the request's
    userInfo; `old` the object before an UPDATE."""
    request = {"resource": {"resource": resource}, "namespace": namespace, "operation": operation,
               "userInfo": user or TENANT}
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj), "request": celpy.json_to_cel(request),
                                  "oldObject": celpy.json_to_cel(old)}
    # A false matchCondition skips the policy, as the API server does (the web binder's judges one account).
    for condition in policy.get("matchConditions", []):
        if _compile(condition["expression"]).evaluate(activation) != celtypes.BoolType(True):
            return []
    variables = celtypes.MapType({})
    for variable in policy.get("variables", []):
        value = _compile(variable["expression"]).evaluate({**activation, "variables": variables})
        variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = variables
    failed = []
    for validation in policy["validations"]:
        result = _compile(validation["expression"]).evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            failed.append(f"{validation['message']} (evaluation error: {result})")
        elif result is not True and result != celtypes.BoolType(True):
            failed.append(validation["message"])
    return failed
