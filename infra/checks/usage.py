"""Usage and cost: every GPU pool has a price per GPU-hour, so `trainyard report usage` can cost what it admits; a
pool priced only at a ceiling (reserved or Spot capacity at its machine's list price) is named too."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.usage import pool_prices


def check_pools_priced(ctx: Context) -> list[Finding]:
    platform = ctx.platform
    units = {flavor.pool: flavor.gpu.units_per_gpu for flavor in platform.flavors if flavor.gpu}
    findings = []
    for pool, price in pool_prices(platform.spec, units).items():
        if price.per_unit_hour is None:
            findings.append(Finding("usage", f"pool {pool}", f"{price.origin}: `trainyard report usage` shows no "
                                                             "cost for its GPU-hours", "warning"))
        elif "ceiling" in price.caveats:
            findings.append(Finding("usage", f"pool {pool}", f"priced at a ceiling, its machine's list price: "
                                                             f"{price.origin}", "warning"))
    return findings
