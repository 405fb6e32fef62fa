"""GPU usage and its price: when an admitted GPU counts as busy, how long admitted GPUs may idle before the
platform says so, and what a GPU-hour of each pool costs (`observability.usage`, pools' `pricePerGpuHour`).

A GPU is busy while DCGM reports its utilisation (DCGM_FI_DEV_GPU_UTIL, percent of the sample period a kernel ran)
at or above `busyThreshold`; GPU-hours admitted are Kueue's (what a team's ClusterQueue holds of a pool), busy
ones DCGM's, idle = admitted - busy. The price of a cloud pool's GPU-hour defaults to its machine's on-demand list
price over its GPUs (the cloud module records the page and its date, or that nobody checked the figure); reserved
and Spot pools take it as a ceiling where the cloud's pages say how such capacity is billed against it. A pool
shared by time-slicing, MPS or MIG is priced per share (the GPU's price over its shares), the unit Kueue admits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from pydantic import Field

from infra.spec.base import Strict
from infra.spec.clouds import CLOUDS

DURATION = r"^[1-9][0-9]*[mh]$"


class UsageSpec(Strict):
    """`busyThreshold`: the GPU utilisation (percent, 1-100) at or above which an admitted GPU counts as busy
    (default 10); `idleAlertAfter`: how long a team's admitted GPUs may stay idle before TeamGPUsIdle fires
    (minutes or hours, e.g. 90m, 4h; default 2h)."""

    busy_threshold: int = Field(default=10, ge=1, le=100, alias="busyThreshold")
    idle_alert_after: str = Field(default="2h", alias="idleAlertAfter", pattern=DURATION)


@dataclass(frozen=True)
class Price:
    per_unit_hour: Decimal | None  # one GPU (or one share of a shared GPU) for an hour; None: nobody said
    origin: str  # where the figure comes from, for the report's footnote
    # Why the figure is not one to bill from: "unverified" (a list price nobody checked against its page),
    # "ceiling" (the list price bounds what reserved or Spot capacity costs); empty when it is.
    caveats: tuple[str, ...] = ()


def _default(facts: Any, name: str, pool: Any) -> Price:
    """The price a cloud pool takes from its machine's list price, or why it has none."""
    listed = facts.list_prices.get(pool.instance_type)
    billing = {"on-demand": "", "reserved": facts.reserved_billing, "spot": facts.spot_billing}[pool.capacity_type]
    if listed is None or (pool.capacity_type != "on-demand" and not billing):
        why = ("its nodes name no machine with a list price" if pool.instance_type is None
               else f"{pool.instance_type} has no list price" if listed is None
               else f"{facts.title} {pool.capacity_type} capacity has no default")
        return Price(None, f"no price: declare pools.{name}.pricePerGpuHour ({why})")
    origin = f"{pool.instance_type} list price {listed.per_hour}/h, {listed.source}"
    caveats = () if listed.verified else ("unverified",)
    if billing:
        origin, caveats = f"{origin}; {pool.capacity_type}: {billing}", ("ceiling", *caveats)
    return Price(listed.per_hour / pool.per_node, origin, caveats)


def pool_prices(spec: Any, units_per_gpu: Mapping[str, int]) -> dict[str, Price]:
    """Pool name -> the price of one admitted unit (GPU or share) for an hour, for every GPU pool of `spec` (a
    PlatformSpec); `units_per_gpu`: pool -> the units Kueue admits per physical GPU (Flavor.gpu)."""
    facts = CLOUDS[spec.cluster.kind]
    prices = {}
    for name, pool in spec.pools.items():
        if pool.gpu is None or not pool.per_node:
            continue
        if pool.price_per_gpu_hour is not None:
            price = Price(pool.price_per_gpu_hour, f"declared (pools.{name}.pricePerGpuHour)")
        else:
            price = _default(facts, name, pool)
        if price.per_unit_hour is not None:
            shares = units_per_gpu.get(name, 1)
            price = replace(price, per_unit_hour=(price.per_unit_hour / shares).quantize(Decimal("0.0001")))
        prices[name] = price
    return prices
