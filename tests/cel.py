"""ValidatingAdmissionPolicies evaluated as the API server evaluates them, with cel-python: the policy's
variables in order, then every validation against `object` and `request`. Used to test what the policies
admit and deny, not only how they are written."""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes


def _compile(env: celpy.Environment, expression: str) -> Any:
    return env.program(env.compile(expression))


def denials(policy: dict[str, Any], obj: dict[str, Any], resource: str, namespace: str,
            operation: str = "CREATE") -> list[str]:
    """The messages of the validations that do not hold for `obj` (a CEL evaluation error counts as a
    denial, as it does under failurePolicy Fail, and is reported with its error)."""
    env = celpy.Environment()
    request = {"resource": {"resource": resource}, "namespace": namespace, "operation": operation}
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj), "request": celpy.json_to_cel(request)}
    variables = celtypes.MapType({})
    for variable in policy.get("variables", []):
        value = _compile(env, variable["expression"]).evaluate({**activation, "variables": variables})
        variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = variables
    failed = []
    for validation in policy["validations"]:
        result = _compile(env, validation["expression"]).evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            failed.append(f"{validation['message']} (evaluation error: {result})")
        elif result is not True and result != celtypes.BoolType(True):
            failed.append(validation["message"])
    return failed
