"""Every check `trainyard plan` and `trainyard validate` run over a captured stack, in one list.

A check takes the run's context and returns findings; concerns add theirs to CHECKS.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.spec import Finding, Platform
from infra.spec.capacity import capacity_findings

from .engine import Capture
from .plan import objects
from .schema import CrdIndex, schema_findings

EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True)
class Context:
    platform: Platform
    capture: Capture
    crds: CrdIndex | None

    def objects(self) -> list[dict[str, Any]]:
        return [obj for _, obj in objects(self.capture)]


def check_capacity(ctx: Context) -> list[Finding]:
    return capacity_findings(ctx.platform)


def _images(value: Any) -> list[str]:
    """Every container image reference in an object or chart values ({repository, tag} pairs included)."""
    found: list[str] = []
    if isinstance(value, dict):
        if isinstance(value.get("image"), str):
            found.append(value["image"])
        if "repository" in value and "tag" in value and isinstance(value["repository"], str):
            found.append(f"{value['repository']}:{value['tag']}")
        for item in value.values():
            found += _images(item)
    elif isinstance(value, list):
        for item in value:
            found += _images(item)
    return found


def unpinned_image(image: str) -> bool:
    name, _, digest = image.partition("@")
    if digest:
        return not digest.startswith("sha256:")
    tag = name.rsplit("/", 1)[-1].partition(":")[2]
    return not tag or tag == "latest"


def check_pins(ctx: Context) -> list[Finding]:
    """Charts at exact versions; every image in chart values and declared objects tagged, never latest."""
    findings = []
    for record in ctx.capture.resources:
        if record.type.startswith("kubernetes:helm.sh/"):
            version = str(record.inputs.get("version", ""))
            if not EXACT_VERSION.match(version):
                findings.append(Finding("pins", f"chart {record.name}", f"version '{version}' is not exact: "
                                        "pin a released chart version"))
        for image in _images(record.inputs):
            if unpinned_image(image):
                findings.append(Finding("pins", f"{record.type.split(':')[-1]} {record.name}",
                                        f"image '{image}' is not pinned: use an exact tag or a digest"))
    return findings


def check_schemas(ctx: Context) -> list[Finding]:
    return schema_findings(ctx.objects(), ctx.crds, ctx.platform.spec.versions.kubernetes)


Check = Callable[[Context], list[Finding]]
CHECKS: list[Check] = [check_capacity, check_pins, check_schemas]


def check_policies(ctx: Context) -> list[Finding]:
    """The CrossGuard pack (policies/) over the registrations; imported here because the pack imports
    this module's pin helpers."""
    from .policy_runner import policy_findings

    return policy_findings(ctx.platform, ctx.capture)


CHECKS.append(check_policies)


def check_backup(ctx: Context) -> list[Finding]:
    """Nothing lost: schedules cover every team namespace, data volumes are retained, buckets versioned."""
    from .backup_checks import backup_findings

    return backup_findings(ctx)


CHECKS.append(check_backup)


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
