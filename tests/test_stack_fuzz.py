"""Hostile stack values (benchmarks/stack_fuzz.py): a deterministic sample of the sweep, and one test per class of
bug it found. Bad input is one SpecError line naming the field path, never a traceback, never accepted to render an
object the cluster or its consumer would refuse."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.stack_fuzz import classify, edits, ugliness
from infra.checks.ci import check_ci_runner
from infra.spec import SpecError, validate
from infra.spec.prerequisites import capability_problem
from tests.conftest import raw_platform

SAMPLED = ("onprem-lab", "hybrid-burst")


def _refusal(stack: str, raw: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        validate(raw, stack)
    assert ugliness(caught.value) is None, str(caught.value)
    return caught.value


def _at(raw: dict[str, Any], *path: str | int) -> Any:
    node: Any = raw
    for step in path:
        node = node[step]
    return node


@pytest.mark.parametrize("stack", SAMPLED)
def test_every_field_of_a_stack_takes_a_hostile_value_without_a_traceback(stack: str) -> None:
    """Round robin: the n-th field of the stack (its value, or its key) gets the n-th of its hostile values."""
    verdicts = []
    groups = itertools.groupby(edits(raw_platform(stack)), key=lambda edit: (edit.path, edit.kind == "key"))
    for index, (_, group) in enumerate(groups):
        options = list(group)
        edit = options[index % len(options)]
        verdicts.append((edit.where(), edit.name, *classify(edit, stack)))
    assert len(verdicts) > 250
    assert [v for v in verdicts if v[2] not in ("accepted", "refused")] == []
    # The sample reaches refusals and acceptances alike (a sweep of one verdict would prove nothing).
    assert {v[2] for v in verdicts} == {"accepted", "refused"}


def test_an_error_is_one_line_whatever_the_value_or_key_holds() -> None:
    """A YAML block scalar's final newline in a value, or in a key, is shown escaped on the one error line."""
    raw = raw_platform("onprem-lab")
    raw["pools"]["h100"]["nodes"][0] = "gpu-a01\n"
    error = _refusal("onprem-lab", raw)
    assert error.path == "trainyard:platform.pools.h100.nodes[0]" and "'gpu-a01\\n'" in str(error)
    raw = raw_platform("onprem-lab")
    raw["teams"]["vision\n"] = raw["teams"].pop("vision")
    assert "\\n" in str(_refusal("onprem-lab", raw))


@pytest.mark.parametrize("path", [("teams", "vision", "weight"), ("cluster", "existing", "context"),
                                  ("pools", "h100", "topology", "rack"), ("teams", "vision", "groups")])
def test_a_null_is_named_null_as_yaml_writes_it(path: tuple[str, ...]) -> None:
    raw = raw_platform("onprem-lab")
    _at(raw, *path[:-1])[path[-1]] = None
    error = _refusal("onprem-lab", raw)
    assert "null" in error.message and "None" not in str(error)


@pytest.mark.parametrize("stack, path, value", [
    ("local", ("cluster", "existing", "provides", 0), "network-policy"),
    ("onprem-lab", ("policy", "allowedRegistries", 0), "nvcr.io/nvidia"),
    ("gcp-prod", ("pools", "h100", "reservation"), "a3-h100-reservation"),
])
def test_a_value_with_a_trailing_newline_is_refused_at_its_field(stack: str, path: tuple[Any, ...],
                                                                 value: str) -> None:
    """These planned cleanly with the newline (Python's `$` matches before it), and rendered nothing that worked:
    the capability matched no need, the registry no image."""
    raw = raw_platform(stack)
    assert _at(raw, *path) == value
    validate(raw, stack)
    _at(raw, *path[:-1])[path[-1]] = value + "\n"
    error = _refusal(stack, raw)
    assert error.path.startswith("trainyard:platform." + ".".join(str(p) for p in path[:2]))


def test_checks_match_the_whole_value() -> None:
    assert capability_problem("network-policy") is None
    assert capability_problem("network-policy\n") is not None
    raw = raw_platform("aws-prod")
    arn = "arn:aws:iam::123456789012:role/ml-admins"
    raw["cluster"]["eks"]["login"]["accessEntries"] = {arn: ["platform-admins"]}
    validate(raw, "aws-prod")
    raw["cluster"]["eks"]["login"]["accessEntries"] = {arn + "\n": ["platform-admins"]}
    assert "is not an IAM role ARN" in str(_refusal("aws-prod", raw))


@pytest.mark.parametrize("stack, path", [
    ("local", ("cluster", "existing", "context")),
    ("local", ("storage", "nfs", "share")),
    ("aws-prod", ("cluster", "eks", "login", "oidc", "clientId")),
    ("onprem-lab", ("ci", "runner", 1)),
])
@pytest.mark.parametrize("edit", ["blank", "newline", "leading", "tab"])
def test_no_text_value_has_space_at_an_end_or_a_control_character(stack: str, path: tuple[Any, ...],
                                                                  edit: str) -> None:
    """A kubeconfig context, an NFS export, a client id: compared byte for byte by what reads them, so ' ' or
    'lab-admin\\n' names nothing; all of these planned cleanly."""
    raw = raw_platform(stack)
    value = _at(raw, *path)
    _at(raw, *path[:-1])[path[-1]] = {"blank": " ", "newline": value + "\n", "leading": " " + value,
                                      "tab": value[:1] + "\t" + value[1:]}[edit]
    error = _refusal(stack, raw)
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    assert error.path == "trainyard:platform" + where


def test_a_priority_description_may_span_lines_but_not_end_in_a_newline() -> None:
    raw = raw_platform("local")
    raw.setdefault("queueing", {})["priorities"] = {"urgent": {"value": 2000, "description": "Deadlines.\nAsk first."}}
    validate(raw, "local")
    raw["queueing"]["priorities"]["urgent"]["description"] = "Deadlines.\n"
    assert _refusal("local", raw).path == "trainyard:platform.queueing.priorities.urgent.description"


@pytest.mark.parametrize("value, accepted", [("a" * 253, True), ("a" * 254, False), ("local-ca", True),
                                             ("local-", False), ("local..ca", False)])
def test_a_secret_name_is_a_dns_subdomain(value: str, accepted: bool) -> None:
    """At most 253 characters, each dot-separated part starting and ending alphanumeric: 300 characters or a
    trailing '-' planned cleanly, and the cluster refuses such a Secret name."""
    raw = raw_platform("local")
    raw["frontDoor"]["tls"]["ca"]["secretName"] = value
    if accepted:
        validate(raw, "local")
    else:
        assert _refusal("local", raw).path == "trainyard:platform.frontDoor.tls.ca.secretName"


def test_runner_labels_are_compared_without_case_as_github_does() -> None:
    raw = raw_platform("aws-prod")
    raw["ci"]["runner"] = ["SELF-HOSTED", "trainyard-aws"]
    assert check_ci_runner(SimpleNamespace(platform=validate(raw, "aws-prod"))) == []  # type: ignore[arg-type]
    raw["ci"]["runner"] = ["ubuntu-24.04"]
    assert len(check_ci_runner(SimpleNamespace(platform=validate(raw, "aws-prod")))) == 1  # type: ignore[arg-type]
    raw["ci"]["runner"] = ["self-hosted", "Self-Hosted"]
    assert _refusal("aws-prod", raw).path == "trainyard:platform.ci.runner"
