"""Label selectors as the API server matches them (matchLabels and matchExpressions, all must hold); an
absent selector matches everything."""

from __future__ import annotations

from typing import Any


def _expression(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression.get("key", ""), expression.get("operator"), expression.get("values", [])
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def matches_selector(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    return (all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
            and all(_expression(e, labels) for e in selector.get("matchExpressions", [])))
