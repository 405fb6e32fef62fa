"""Kueue's ClusterQueue namespaceSelector is an apimachinery label selector (ValidateLabelSelector): every operator
tried with and without values, each valid form admitted and each invalid one refused, so an inverted or dropped
rule shows (Kueue 0.19.2 webhook; the CRD's schema leaves `operator` a free string)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_apiserver_webhooks import _cq, _group, _quota, refusals

OPERATORS_WITH_VALUES = ("In", "NotIn")
OPERATORS_WITHOUT_VALUES = ("Exists", "DoesNotExist")


def _queue(selector: dict[str, Any]) -> dict[str, Any]:
    return _cq([_group(["cpu"], {"h100": [_quota("cpu")]})], namespaceSelector=selector)


def _expression(operator: str, values: list[str] | None, key: str = "trainyard.io/team") -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        requirement["values"] = values
    return {"matchExpressions": [requirement]}


PATH = "webhook:kueue: spec.namespaceSelector.matchExpressions[0]"


@pytest.mark.parametrize("operator", OPERATORS_WITH_VALUES)
def test_in_and_notin_are_admitted_with_values_and_refused_without(operator: str) -> None:
    assert refusals(_queue(_expression(operator, ["vision"]))) == []
    assert refusals(_queue(_expression(operator, ["vision", "nlp"]))) == []
    required = [f"{PATH}.values: must be specified when `operator` is 'In' or 'NotIn'"]
    assert refusals(_queue(_expression(operator, None))) == required
    assert refusals(_queue(_expression(operator, []))) == required


@pytest.mark.parametrize("operator", OPERATORS_WITHOUT_VALUES)
def test_exists_and_doesnotexist_are_admitted_without_values_and_refused_with(operator: str) -> None:
    assert refusals(_queue(_expression(operator, None))) == []
    assert refusals(_queue(_expression(operator, []))) == []  # an empty list is no values
    forbidden = [f"{PATH}.values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"]
    assert refusals(_queue(_expression(operator, ["vision"]))) == forbidden


@pytest.mark.parametrize("operator", ["Equals", "in", "", "Gt"])
def test_an_operator_outside_the_four_is_refused(operator: str) -> None:
    assert refusals(_queue(_expression(operator, ["vision"]))) == [
        f"{PATH}.operator: Invalid value: {operator!r}: not a valid selector operator"]


@pytest.mark.parametrize("operator", [*OPERATORS_WITH_VALUES, *OPERATORS_WITHOUT_VALUES])
def test_an_expression_key_must_be_a_label_key(operator: str) -> None:
    values = ["vision"] if operator in OPERATORS_WITH_VALUES else None
    assert refusals(_queue(_expression(operator, values, key="trainyard.io/team"))) == []
    found = refusals(_queue(_expression(operator, values, key="bad key!")))
    assert found and all(line.startswith(f"{PATH}.key: Invalid value: 'bad key!'") for line in found)


@pytest.mark.parametrize("operator", OPERATORS_WITH_VALUES)
def test_expression_values_must_be_label_values(operator: str) -> None:
    found = refusals(_queue(_expression(operator, ["vision", "not a value"])))
    assert found and all(line.startswith(f"{PATH}.values[1]: Invalid value: 'not a value'") for line in found)
    assert refusals(_queue(_expression(operator, ["v" * 63]))) == []  # at the label-value limit
    assert refusals(_queue(_expression(operator, ["v" * 64])))  # one past it


def test_match_labels_keys_and_values_are_checked() -> None:
    assert refusals(_queue({"matchLabels": {"trainyard.io/team": "vision"}})) == []
    assert refusals(_queue({"matchLabels": {"trainyard.io/team": ""}})) == []  # an empty value is a label value
    assert refusals(_queue({"matchLabels": {"bad key!": "vision"}}))
    assert refusals(_queue({"matchLabels": {"trainyard.io/team": "not a value"}}))


def test_an_empty_or_absent_selector_is_admitted() -> None:
    assert refusals(_queue({})) == []
    assert refusals(_cq([_group(["cpu"], {"h100": [_quota("cpu")]})])) == []
