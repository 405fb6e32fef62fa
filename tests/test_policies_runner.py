"""The offline runner: the pack passes on every stack, levels resolve as the SDK's analyzer resolves them,
a stack's `policy.levels` turns errors into warnings, and registrations reach the rules in the engine's
shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from infra.checks.catalogue import run_checks
from infra.checks.policies import policy_findings, resolve_levels, run_pack
from infra.offline.engine import Capture
from infra.spec import SpecError, validate
from infra.spec.input.load import read_stack_config
from policies.config import pack_config
from policies.rules import POLICIES
from tests.conftest import STACKS, capture_of, platform_of, raw_platform, stack_file
from tests.test_policies import ADMINS, CHART, CONFIG, SECURE_CONFIG, baseline, edit, reg, violations


@pytest.mark.parametrize("stack", STACKS)
def test_pack_passes_on_every_stack(stack: str) -> None:
    """No mandatory violation, hence no error among the findings `trainyard validate` reports (policy_findings)."""
    found = run_pack(capture_of(stack), pack_config(platform_of(stack)), read_stack_config(stack_file(stack)))
    assert [v for v in found if v.level == "mandatory"] == []
    assert [f for f in (v.finding() for v in found) if f.severity == "error"] == []


def test_validate_runs_the_pack() -> None:
    """The pack is one of the checks `trainyard validate` runs: a policy finding once a binding grants
    cluster-admin to a group that is no platform admin."""
    assert any(f.check == "policy" for f in run_checks(platform_of("local"), _with_rogue_admin("local"), None))


def _with_rogue_admin(stack: str) -> Capture:
    """The stack's capture plus a team group bound to cluster-admin."""
    capture = capture_of(stack)
    binding = reg("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "rogue", {
        "kind": "ClusterRoleBinding", "metadata": {"name": "rogue"},
        "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "Group", "name": "someone-else"}]})
    return Capture(capture.stack, capture.project, (*capture.resources, binding), capture.outputs)


def test_findings_name_the_rule_and_the_resource() -> None:
    platform = platform_of("onprem-lab")
    findings = [f for f in policy_findings(platform, _with_rogue_admin("onprem-lab")) if f.check == "policy"]
    assert [(f.subject, f.severity) for f in findings] == [("ClusterRoleBinding rogue", "error")]
    assert findings[0].message.startswith("no-tenant-cluster-admin: ")


def _policy(name: str, level: EnforcementLevel | None) -> ResourceValidationPolicy:
    def never(args: ResourceValidationArgs, report: ReportViolation) -> None:
        return None
    return ResourceValidationPolicy(name, "test policy", never, enforcement_level=level)


def test_levels_resolve_config_then_policy_then_pack() -> None:
    policies = [_policy("configured", EnforcementLevel.MANDATORY), _policy("own", EnforcementLevel.ADVISORY),
                _policy("default", None), _policy("remediating", EnforcementLevel.REMEDIATE)]
    config = {"configured": {"enforcementLevel": "disabled", "x": 1}}
    levels = resolve_levels(policies, EnforcementLevel.MANDATORY, config)
    assert levels == {"configured": EnforcementLevel.DISABLED, "own": EnforcementLevel.ADVISORY,
                      "default": EnforcementLevel.MANDATORY, "remediating": EnforcementLevel.MANDATORY}
    assert resolve_levels(policies[:1], EnforcementLevel.ADVISORY, {"configured": "advisory"}) == {
        "configured": EnforcementLevel.ADVISORY}


def test_advisory_violations_are_warnings_and_disabled_rules_do_not_run() -> None:
    records = edit("kueue", lambda inputs: inputs.update(version="0.19"))
    advisory = violations(records, config={**CONFIG, "pinned-versions": {"enforcementLevel": "advisory"}})
    assert [(v.policy, v.level, v.finding().severity) for v in advisory] == [
        ("pinned-versions", "advisory", "warning")]
    assert violations(records, config={**CONFIG, "pinned-versions": "disabled"}) == []


def test_stack_levels_reach_the_pack_config() -> None:
    raw = raw_platform("onprem-lab")
    raw["policy"] = {"levels": {"gpu-tolerations": "advisory", "stateful-protected": "disabled"}}
    config = pack_config(validate(raw, "onprem-lab"))
    assert config["gpu-tolerations"] == {"enforcementLevel": "advisory"}
    assert config["stateful-protected"] == {"enforcementLevel": "disabled"}
    assert config["no-tenant-cluster-admin"]["adminGroups"] == [ADMINS]
    levels = resolve_levels(POLICIES, EnforcementLevel.ADVISORY, config)
    assert levels["gpu-tolerations"] == EnforcementLevel.ADVISORY
    assert levels["pinned-versions"] == EnforcementLevel.MANDATORY


def test_unknown_rule_name_in_levels_is_bad_input() -> None:
    raw = raw_platform("local")
    raw["policy"] = {"levels": {"gpu-toleration": "advisory"}}
    with pytest.raises(SpecError) as error:
        validate(raw, "local")
    assert "policy.levels" in error.value.path or "policy.levels" in str(error.value)
    assert "gpu-tolerations" in str(error.value)


class _Recorder(StackValidationPolicy):
    def __init__(self) -> None:
        super().__init__("recorder", "records what it sees", enforcement_level=EnforcementLevel.MANDATORY)
        self.seen: list[Any] = []

    def validate(self, args: StackValidationArgs, report: ReportViolation) -> None:  # type: ignore[override]
        self.seen = list(args.resources)


def test_registrations_arrive_in_the_engine_shapes() -> None:
    records = baseline()
    child = reg(CHART, "child", {"chart": "x", "version": "1.0.0"}, custom=False)
    records["child"] = type(child)(**{**child.__dict__, "parent": records["kueue"].ref(),
                                      "depends_on": (records["ns-kueue"].ref(),)})
    recorder = _Recorder()
    capture = Capture("test", "trainyard", tuple(records.values()), {})
    run_pack(capture, {}, SECURE_CONFIG, policies=[recorder])
    by_name = {r.name: r for r in recorder.seen}
    assert by_name["child"].parent is by_name["kueue"]
    assert [d.name for d in by_name["child"].dependencies] == ["ns-kueue"]
    assert isinstance(by_name["ns-vision"].props, Mapping) and not isinstance(by_name["ns-vision"].props, dict)
    assert by_name["ns-vision"].provider.name == "default"  # custom resource on the default provider
    assert by_name["eks"].opts.protect and not by_name["pvc-vision-datasets"].opts.protect
    assert by_name["pvc-vision-datasets"].opts.retain_on_delete


def test_retain_on_delete_unknown_to_the_engine_makes_protection_not_applicable() -> None:
    """Under the real CLI the options carry no retainOnDelete: the rule steps aside for volumes (which may be
    retained) instead of failing them, but still requires protect on clusters."""
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions
    from pulumi_policy.policy import _NotApplicableError

    rule = next(p for p in POLICIES if p.name == "stateful-protected")
    assert isinstance(rule, ResourceValidationPolicy)
    reported: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append(message)

    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    args = ResourceValidationArgs("kubernetes:core/v1:PersistentVolumeClaim", {}, "urn", "pvc", opts, None)
    with pytest.raises(_NotApplicableError):
        rule.validate(args, report)
    protected = PolicyResourceOptions(True, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    rule.validate(ResourceValidationArgs("eks:index:Cluster", {}, "urn", "eks", protected, None), report)
    assert reported == []
    rule.validate(ResourceValidationArgs("eks:index:Cluster", {}, "urn", "eks", opts, None), report)
    assert len(reported) == 1 and "not protected" in reported[0]


def test_stack_config_is_judged_only_when_known(monkeypatch: pytest.MonkeyPatch) -> None:
    from policies import stackconfig

    monkeypatch.delenv("PULUMI_STACK", raising=False)
    assert stackconfig.current() is None
    monkeypatch.setenv("PULUMI_STACK", "onprem-lab")
    assert stackconfig.current() == read_stack_config(stack_file("onprem-lab"))
    with stackconfig.using({"a:b": 1}):
        assert stackconfig.current() == {"a:b": 1}


def test_policy_config_cli_prints_the_stack_config(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from policies.config import main

    assert main(["onprem-lab"]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert printed == pack_config(platform_of("onprem-lab"))
    assert main(["no-such-stack"]) == 2
