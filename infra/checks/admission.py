"""The platform passes its own admission: the stack's ValidatingAdmissionPolicies and Pod Security on every object it
renders (the API-server model in infra/apiserver/plan.py; the CRDs' CEL rules and the operators' webhooks run as
rules of the policy pack)."""

from __future__ import annotations

from infra.apiserver.plan import admission_findings
from infra.checks.context import Context
from infra.spec import Finding


def check_admission(ctx: Context) -> list[Finding]:
    return admission_findings(ctx.objects())
