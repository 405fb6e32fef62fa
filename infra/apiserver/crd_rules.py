"""The CRDs' own CEL rules (`x-kubernetes-validations`) evaluated on custom resources as the API server does.

Each rule is scoped to the schema node that carries it: `self` is the value at that node, and the walk goes
into properties, array items and map values. The object is defaulted from the schema first (the API server
defaults before it validates). Transition rules (`oldSelf`) are evaluated as an update that changes nothing
(oldSelf = self), which is what a re-apply of an unchanged plan sends. At the root, `metadata` carries only
`name` and `generateName`, as on the server.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.apiserver.cel import EvalError, Unevaluable, compiled, is_true, to_cel
from infra.apiserver.verdict import Refusal, Unchecked

OPTIONAL_OLD_SELF = "optionalOldSelf is not supported"


@dataclass(frozen=True)
class CelRule:
    kind: str
    node: str  # schema path of the node the rule sits on, e.g. spec.resourceGroups[*]
    rule: str
    message: str
    message_expression: str
    field_path: str
    reason: str
    optional_old_self: bool

    @property
    def transition(self) -> bool:
        return "oldSelf" in self.rule


def _rules_at(kind: str, node: str, schema: dict[str, Any]) -> list[CelRule]:
    return [CelRule(kind, node, r["rule"], r.get("message", ""), r.get("messageExpression", ""),
                    r.get("fieldPath", ""), r.get("reason", "FieldValueInvalid"), bool(r.get("optionalOldSelf")))
            for r in schema.get("x-kubernetes-validations", [])]


def _children(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, child in sorted(schema.get("properties", {}).items()):
        yield f".{name}", child
    if isinstance(schema.get("items"), dict):
        yield "[*]", schema["items"]
    if isinstance(schema.get("additionalProperties"), dict):
        yield "[*]", schema["additionalProperties"]


def rules_of(kind: str, schema: dict[str, Any], node: str = "") -> list[CelRule]:
    """Every rule in a CRD version's schema, in schema order."""
    found = _rules_at(kind, node or "(root)", schema)
    for step, child in _children(schema):
        found += rules_of(kind, child, f"{node}{step}".lstrip("."))
    return found


def unevaluable(kind: str, schema: dict[str, Any]) -> list[Unchecked]:
    """The rules of a CRD version's schema that this library cannot evaluate, whatever the object."""
    found = []
    for rule in rules_of(kind, schema):
        if rule.optional_old_self:
            found.append(Unchecked(f"{kind} {rule.node}", rule.rule, OPTIONAL_OLD_SELF))
            continue
        try:
            compiled(rule.rule)
        except Unevaluable as error:
            found.append(Unchecked(f"{kind} {rule.node}", rule.rule, str(error)))
    return found


def defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """`value` with the schema's defaults filled in where a property is missing (structural defaulting)."""
    if isinstance(value, dict):
        out = dict(value)
        properties = schema.get("properties", {})
        for name, child in properties.items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
        for name, item in out.items():
            child = properties.get(name, schema.get("additionalProperties"))
            if isinstance(child, dict):
                out[name] = defaulted(item, child)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(item, schema["items"]) for item in value]
    return value


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k in ("name", "generateName")}
    return {**obj, "metadata": meta}


def _message(rule: CelRule, activation: dict[str, Any]) -> str:
    if rule.message_expression:
        try:
            text = compiled(rule.message_expression).run(activation)
            if isinstance(text, str) and text.strip():
                return str(text)
        except (Unevaluable, EvalError):
            pass  # the server falls back to `message` when messageExpression fails
    return rule.message or f"failed rule: {rule.rule}"


class Outcome:
    """What evaluating one object's CRD rules found: refusals, rules not evaluable, and rules evaluated."""

    def __init__(self) -> None:
        self.refusals: list[Refusal] = []
        self.unchecked: list[Unchecked] = []
        self.evaluated = 0


def _evaluate_node(value: Any, schema: dict[str, Any], path: str, kind: str, outcome: Outcome) -> None:
    for rule in _rules_at(kind, path or "(root)", schema):
        if rule.optional_old_self:
            outcome.unchecked.append(Unchecked(f"{kind} {rule.node}", rule.rule, OPTIONAL_OLD_SELF))
            continue
        cel_self = to_cel(value)
        activation = {"self": cel_self, "oldSelf": cel_self} if rule.transition else {"self": cel_self}
        try:
            result = compiled(rule.rule).run(activation)
        except Unevaluable as error:
            outcome.unchecked.append(Unchecked(f"{kind} {rule.node}", rule.rule, str(error)))
            continue
        except EvalError as error:
            if error.unknown_function:
                outcome.unchecked.append(Unchecked(f"{kind} {rule.node}", rule.rule,
                                                   f"function {error.unknown_function}() is not implemented"))
                continue
            result = error
        outcome.evaluated += 1
        if not is_true(result):
            where = (path + rule.field_path) if rule.field_path else path
            detail = f" (evaluation error: {result})" if isinstance(result, EvalError) else ""
            outcome.refusals.append(Refusal("crd-cel", where.lstrip("."), _message(rule, activation) + detail,
                                            rule.reason))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for name, item in value.items():
            child = properties.get(name, additional if isinstance(additional, dict) else None)
            if child is not None:
                step = f".{name}" if name in properties else f"[{name}]"
                _evaluate_node(item, child, f"{path}{step}", kind, outcome)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            _evaluate_node(item, schema["items"], f"{path}[{position}]", kind, outcome)


def evaluate(obj: dict[str, Any], schema: dict[str, Any]) -> Outcome:
    outcome = Outcome()
    _evaluate_node(_root_view(defaulted(obj, schema)), schema, "", obj.get("kind", ""), outcome)
    return outcome
