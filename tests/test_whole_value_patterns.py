"""A value matches its pattern to its very end, as Go's regexp and the API server match it. Python's `$` also
matches before a final newline, which a YAML block scalar (`|`) leaves in a value: `64Gi\\n` would plan cleanly and
the cluster refuse the quota. Each checker is tried with the bare value (accepted) and with a newline after it
(refused)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infra.spec import SpecError, validate
from infra.spec.base import parse_quantity
from infra.spec.frontdoor.model import host_problem
from infra.spec.names import dns1035_label, dns1123_label, dns1123_subdomain, label_value, qualified_name
from tests.conftest import raw_platform
from tests.edits import set_at


@pytest.mark.parametrize("check, value", [
    (dns1123_label, "vision"), (dns1123_subdomain, "vision.example.com"), (dns1035_label, "trainer"),
    (qualified_name, "example.com/name"), (label_value, "gpu-a100"),
])
def test_a_name_with_a_trailing_newline_has_a_problem(check: Callable[[str], list[str]], value: str) -> None:
    assert check(value) == []
    assert check(value + "\n") != []


def test_a_quantity_with_a_trailing_newline_is_no_quantity() -> None:
    assert parse_quantity("64Gi") == 64 * 2**30
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity("64Gi\n")


def test_a_host_with_a_trailing_newline_is_no_dns_name() -> None:
    assert host_problem("ml.example.com") is None
    assert host_problem("ml.example.com\n") is not None


def _with(stack: str, path: tuple[str, ...], value: Any) -> dict[str, Any]:
    raw = raw_platform(stack)
    set_at(".".join(path), value)(raw)
    return raw


@pytest.mark.parametrize("stack, path, value", [
    # a Google group as GKE's login gives it (CloudFacts.group_form)
    ("gcp-prod", ("teams", "vision", "groups", "engineers"), "vision-eng@example.com"),
    ("gcp-prod", ("frontDoor", "tls", "acme", "email"), "platform-team@example.com"),
])
def test_a_stack_value_with_a_trailing_newline_is_refused(stack: str, path: tuple[str, ...], value: str) -> None:
    validate(_with(stack, path, value), stack)
    with pytest.raises(SpecError, match=path[-1]):
        validate(_with(stack, path, value + "\n"), stack)
