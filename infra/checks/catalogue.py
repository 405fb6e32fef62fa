"""Every check `trainyard plan` and `trainyard validate` run over a captured stack, in one list.

A check takes the run's context and returns findings; concerns add theirs to CHECKS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.apiserver.schema import CrdIndex, schema_findings
from infra.checks.admission import admission_findings
from infra.checks.backup import backup_findings
from infra.checks.charts import CHART_CHECKS
from infra.checks.firewall import check_webhook_firewall
from infra.checks.hybrid import hybrid_findings
from infra.checks.identity import check_team_data_identity
from infra.checks.managed_prometheus import managed_prometheus_findings
from infra.checks.observability import dashboard_findings, routing_findings, rule_findings
from infra.checks.policies import policy_findings
from infra.checks.prerequisites import check_needs_cover_objects, check_prerequisites
from infra.offline.clusters import split
from infra.offline.engine import Capture, Registration
from infra.offline.plan import objects
from infra.spec import Finding, Platform
from infra.spec.capacity import capacity_findings


@dataclass(frozen=True)
class Context:
    platform: Platform
    capture: Capture
    crds: CrdIndex | None

    def objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the stack creates: ours and what its charts install."""
        return [obj for _, obj in objects(self.capture)]

    def records(self) -> list[tuple[Registration, dict[str, Any]]]:
        return objects(self.capture)


def check_capacity(ctx: Context) -> list[Finding]:
    return capacity_findings(ctx.platform)


def check_schemas(ctx: Context) -> list[Finding]:
    return schema_findings(ctx.objects(), ctx.crds, ctx.platform.spec.versions.kubernetes)


def check_admission(ctx: Context) -> list[Finding]:
    """The platform passes its own admission: the stack's ValidatingAdmissionPolicies and Pod Security."""
    return admission_findings(ctx.objects())


def check_policies(ctx: Context) -> list[Finding]:
    """The CrossGuard pack (policies/) over the registrations: pins, tenant bindings, namespace baseline,
    GPU tolerations, retained volumes, protected state, secrets, version compatibility, and the CRDs' CEL rules
    and the operators' webhooks (on the CRDs of this run: the pack's rules are these checks, not a copy)."""
    return policy_findings(ctx.platform, ctx.capture, ctx.crds)


def check_backup(ctx: Context) -> list[Finding]:
    """Nothing lost: schedules cover every team namespace, data volumes are retained, buckets versioned."""
    return backup_findings(ctx)


def check_observability(ctx: Context) -> list[Finding]:
    """Alert rules and dashboards parse as PromQL and read only catalog metrics this stack exports; alerts reach
    someone; Google's managed Prometheus is reached as the Prometheus account only."""
    ours = [obj for record, obj in ctx.records() if not record.chart]
    charts = [obj for record, obj in ctx.records() if record.chart]
    facts = ctx.platform.observability
    return [*rule_findings(ours, facts), *dashboard_findings(ours, facts), *rule_findings(charts, None),
            *dashboard_findings(charts, None), *routing_findings(ctx.platform, ctx.objects()),
            *managed_prometheus_findings(ctx.platform, ctx.capture, ctx.objects())]


Check = Callable[[Context], list[Finding]]
CHECKS: list[Check] = [check_capacity, check_schemas, check_admission, check_policies,
                       check_backup, check_observability, *CHART_CHECKS, check_prerequisites, check_needs_cover_objects,
                       check_team_data_identity, check_webhook_firewall]


def run_checks(platform: Platform, capture: Capture, crds_dir: Path | None) -> list[Finding]:
    """Every check on every cluster of the stack; in a stack of several, each finding names its cluster."""
    findings: list[Finding] = []
    for cluster, (member, part) in split(platform, capture).items():
        found = _cluster_checks(member, part, crds_dir)
        findings += [replace(f, subject=f"{cluster}: {f.subject}") for f in found] if cluster else found
    return sorted(set(findings + hybrid_findings(platform, capture)))


def _cluster_checks(platform: Platform, capture: Capture, crds_dir: Path | None) -> list[Finding]:
    installed = [obj for record, obj in objects(capture) if record.chart]
    crds = CrdIndex(crds_dir, platform.spec.versions.crd_dirs(), installed)
    ctx = Context(platform, capture, crds)
    findings: list[Finding] = []
    for check in CHECKS:
        findings += check(ctx)
    return sorted(set(findings))
