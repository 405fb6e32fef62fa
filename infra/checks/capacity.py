"""The capacity checks, on the validated spec only: each rule of infra/spec/queues/capacity.py as a check of its
own."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.queues import capacity as rules


def check_capacity_fits_pool(ctx: Context) -> list[Finding]:
    return rules.pool_fit_findings(ctx.platform)


def check_quota_resources_offered(ctx: Context) -> list[Finding]:
    return rules.quota_resource_findings(ctx.platform)


def check_lending_limits(ctx: Context) -> list[Finding]:
    return rules.lending_findings(ctx.platform)


def check_borrowing_limits(ctx: Context) -> list[Finding]:
    return rules.borrowing_findings(ctx.platform)


def check_flavor_taints_tolerated(ctx: Context) -> list[Finding]:
    return rules.toleration_findings(ctx.platform)


def check_runtime_resources_covered(ctx: Context) -> list[Finding]:
    return rules.runtime_resource_findings(ctx.platform)


def check_runtime_reachable(ctx: Context) -> list[Finding]:
    return rules.runtime_reach_findings(ctx.platform)
