"""Every check `trainyard plan` and `trainyard validate` run over a captured stack, in one list.

A check takes the run's context and returns findings; concerns add theirs to CHECKS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.spec import Finding, Platform
from infra.spec.capacity import capacity_findings

from .backup_checks import backup_findings
from .engine import Capture
from .plan import objects
from .policy_runner import policy_findings
from .prerequisite_checks import check_needs_cover_objects, check_prerequisites
from .schema import CrdIndex, schema_findings


@dataclass(frozen=True)
class Context:
    platform: Platform
    capture: Capture
    crds: CrdIndex | None

    def objects(self) -> list[dict[str, Any]]:
        return [obj for _, obj in objects(self.capture)]


def check_capacity(ctx: Context) -> list[Finding]:
    return capacity_findings(ctx.platform)


def check_schemas(ctx: Context) -> list[Finding]:
    return schema_findings(ctx.objects(), ctx.crds, ctx.platform.spec.versions.kubernetes)


def check_policies(ctx: Context) -> list[Finding]:
    """The CrossGuard pack (policies/) over the registrations: pins, tenant bindings, namespace baseline,
    GPU tolerations, retained volumes, protected state, secrets, version compatibility."""
    return policy_findings(ctx.platform, ctx.capture)


def check_backup(ctx: Context) -> list[Finding]:
    """Nothing lost: schedules cover every team namespace, data volumes are retained, buckets versioned."""
    return backup_findings(ctx)


Check = Callable[[Context], list[Finding]]
CHECKS: list[Check] = [check_capacity, check_schemas, check_policies, check_backup, check_prerequisites,
                       check_needs_cover_objects]


def default_crds_dir(root: Path) -> Path | None:
    candidate = root.parent / "shared" / "crds"
    return candidate if candidate.is_dir() else None


def run_checks(platform: Platform, capture: Capture, crds_dir: Path | None) -> list[Finding]:
    crds = CrdIndex(crds_dir, platform.spec.versions.crd_dirs()) if crds_dir else None
    ctx = Context(platform, capture, crds)
    findings: list[Finding] = []
    for check in CHECKS:
        findings += check(ctx)
    return sorted(set(findings))
