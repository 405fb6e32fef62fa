"""Every object against its schema: core kinds for the pinned Kubernetes minor, custom resources against the CRDs
of the pinned component versions (infra/apiserver/schema.py)."""

from __future__ import annotations

from infra.apiserver.schema import schema_findings
from infra.checks.context import Context
from infra.spec import Finding


def check_schemas(ctx: Context) -> list[Finding]:
    return schema_findings(ctx.objects(), ctx.crds, ctx.platform.spec.versions.kubernetes)
