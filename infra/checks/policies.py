"""Run the CrossGuard pack (policies/) over the offline engine's registrations.

pulumi-policy has no test harness, so this adapter does what the engine and the SDK's analyzer server do:
each Registration becomes the ResourceValidationArgs / PolicyResource the engine would send (props behind
the SDK's unknown-checking proxy, the provider as a PolicyProviderResource, `default` when none is set),
and each policy runs at its resolved level: the config for the policy's name wins, then the policy's
own level, then the pack's.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from infra.apiserver.schema import CrdIndex
from infra.checks.context import Context
from infra.kit import paths
from infra.offline.engine import Capture, Registration
from infra.spec import Finding, Platform, stack_path
from infra.spec.findings import Severity
from infra.spec.input.load import read_stack_config
from policies import apiserver_rules, stackconfig
from policies.config import pack_config
from policies.rules import PACK_LEVEL, POLICIES

ROOT = paths.ROOT


@dataclass(frozen=True, order=True)
class Violation:
    policy: str
    level: str  # mandatory | advisory
    resource: str  # "<Type> <resource name>", or "stack <name>" for a stack-wide violation
    message: str

    def finding(self) -> Finding:
        severity: Severity = "error" if self.level == EnforcementLevel.MANDATORY.value else "warning"
        return Finding("policy", self.resource, f"{self.policy}: {self.message}", severity)


class RecordedOptions(PolicyResourceOptions):
    """The options the engine sends, plus retainOnDelete, which the engine leaves out and the
    stateful-protected rule accepts in place of protect."""

    def __init__(self, record: Registration, parent_urn: str | None) -> None:
        super().__init__(record.protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent_urn)
        self.retain_on_delete = record.retain_on_delete


def resolve_levels(policies: Sequence[Policy], pack_level: EnforcementLevel,
                   config: Mapping[str, Any]) -> dict[str, EnforcementLevel]:
    """Each policy's level as the SDK's analyzer resolves it; REMEDIATE is reported as MANDATORY."""
    levels: dict[str, EnforcementLevel] = {}
    for policy in policies:
        entry = config.get(policy.name)
        configured = entry if isinstance(entry, str) else (entry or {}).get("enforcementLevel")
        level = (EnforcementLevel(configured) if configured else None) or policy.enforcement_level or pack_level
        levels[policy.name] = EnforcementLevel.MANDATORY if level == EnforcementLevel.REMEDIATE else level
    return levels


def settings(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    entry = config.get(name)
    return {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, Mapping) else {}


def _label(record: Registration) -> str:
    return f"{record.type.rsplit(':', 1)[-1]} {record.name}"


class _Adapter:
    """Registrations in the shapes the pack receives from the engine."""

    def __init__(self, records: Sequence[Registration]) -> None:
        self.records = records
        by_ref = {r.ref(): r for r in records}
        self.urns = {ref: r.urn for ref, r in by_ref.items()}
        self.by_urn = {r.urn: r for r in records}
        self.providers = {r.urn: self._provider(r, by_ref) for r in records}

    @staticmethod
    def _provider(record: Registration, by_ref: Mapping[str, Registration]) -> PolicyProviderResource | None:
        if record.provider in by_ref:
            provider = by_ref[record.provider]
            return PolicyProviderResource(provider.type, _props(provider), provider.urn, provider.name)
        if record.custom and not record.type.startswith("pulumi:providers:"):
            package = record.type.split(":", 1)[0]
            return PolicyProviderResource(f"pulumi:providers:{package}", {}, "", "default")
        return None

    def options(self, record: Registration) -> RecordedOptions:
        return RecordedOptions(record, self.urns.get(record.parent))

    def resource_args(self, record: Registration, config: Mapping[str, Any]) -> ResourceValidationArgs:
        return ResourceValidationArgs(record.type, _props(record), record.urn, record.name, self.options(record),
                                      self.providers[record.urn], dict(config))

    @functools.cached_property
    def resources(self) -> tuple[PolicyResource, ...]:
        """The stack's resources, built once: the SDK's analyzer hands every stack policy the same objects."""
        resources = {r.urn: PolicyResource(r.type, _props(r), r.urn, r.name, self.options(r),
                                           self.providers[r.urn], None, [], {}) for r in self.records}
        for record in self.records:
            resource = resources[record.urn]
            resource.parent = resources.get(self.urns.get(record.parent, ""))
            resource.dependencies = [resources[self.urns[d]] for d in record.depends_on
                                     if self.urns.get(d) in resources]
        return tuple(resources.values())

    def label(self, urn: str | None, stack: str) -> str:
        record = self.by_urn.get(urn or "")
        return _label(record) if record else f"stack {stack}"


class _Props(Mapping[str, Any]):
    """A registration's inputs behind the SDK's unknown-checking proxy, built when a policy first reads them: most
    policies select resources by type and never read the others' props. The proxy copies every dict and list, so
    each policy gets its own props, as from the analyzer, and none can change what another one sees."""

    def __init__(self, inputs: dict[str, Any]) -> None:
        self._inputs = inputs
        self._proxy: Any = None

    def _target(self) -> Any:
        if self._proxy is None:
            self._proxy = unknown_checking_proxy(self._inputs)
        return self._proxy

    def __getitem__(self, key: str) -> Any:
        return self._target()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._target()[key] = value

    def __iter__(self) -> Iterator[str]:
        return iter(self._target())

    def __len__(self) -> int:
        return len(self._target())


def _props(record: Registration) -> Any:
    return _Props(record.inputs)


def _call(policy: Policy, args: Any, report: Any, where: str) -> Violation | None:
    """Run one validation. A value unknown during preview stops the policy, which the SDK's analyzer reports as
    an advisory diagnostic (returned here as a Violation); a policy that declares itself not applicable is quiet."""
    try:
        result = policy.validate(args, report)  # type: ignore[attr-defined]
        if inspect.isawaitable(result):
            asyncio.run(_wait(result))
    except UnknownValueError as error:
        return Violation(policy.name, EnforcementLevel.ADVISORY.value, where,
                         f"can't run during preview: {error.message}")
    except _NotApplicableError:
        pass
    return None


async def _wait(result: Any) -> None:
    await result


def _run_policy(policy: Policy, level: EnforcementLevel, adapter: _Adapter, props: Mapping[str, Any],
                stack: str) -> list[Violation]:
    found: list[Violation] = []
    stopped: list[Violation | None] = []
    if isinstance(policy, ResourceValidationPolicy):
        for record in adapter.records:
            where = _label(record)
            stopped.append(_call(policy, adapter.resource_args(record, props),
                                 lambda message, urn=None, where=where: found.append(
                                     Violation(policy.name, level.value, where, message)), where))
    elif isinstance(policy, StackValidationPolicy):
        stopped.append(_call(policy, StackValidationArgs(list(adapter.resources), dict(props)),
                             lambda message, urn=None: found.append(
                                 Violation(policy.name, level.value, adapter.label(urn, stack), message)),
                             f"stack {stack}"))
    return found + [violation for violation in stopped if violation is not None]


def run_pack(capture: Capture, config: Mapping[str, Any], stack_config: Mapping[str, Any],
             policies: Sequence[Policy] = POLICIES, pack_level: EnforcementLevel = PACK_LEVEL,
             crds: CrdIndex | None = None) -> list[Violation]:
    """Every violation of the pack over one capture, with the config the stack's JSON would give the CLI; `crds`:
    the run's CRD index (else the pack builds one as under the CLI)."""
    adapter = _Adapter(capture.resources)
    levels = resolve_levels(policies, pack_level, config)
    found: list[Violation] = []
    with stackconfig.using(stack_config), apiserver_rules.using(crds):
        for policy in policies:
            if levels[policy.name] != EnforcementLevel.DISABLED:
                found += _run_policy(policy, levels[policy.name], adapter, settings(config, policy.name),
                                     capture.stack)
    return sorted(set(found))


def policy_findings(platform: Platform, capture: Capture, crds: CrdIndex | None = None) -> list[Finding]:
    """The pack over a captured stack, with the stack's own levels and settings; the stack file it was loaded
    from (else the one its name gives) is what the no-plaintext-secrets rule judges."""
    path = platform.source or stack_path(platform.stack, ROOT)
    stack_config = read_stack_config(path) if path.is_file() else {}
    return [v.finding() for v in run_pack(capture, pack_config(platform), stack_config, crds=crds)]


def check_policy_pack(ctx: Context) -> list[Finding]:
    """The pack's rules are these checks, run on the CRDs of this run, not a copy of them."""
    return policy_findings(ctx.platform, ctx.capture, ctx.crds)
