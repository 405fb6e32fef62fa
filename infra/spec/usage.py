"""GPU usage and its price: when an admitted GPU counts as busy, how long admitted GPUs may idle before the
platform says so, and what a GPU-hour of each pool costs (`observability.usage`, pools' `pricePerGpuHour`).

A GPU is busy while DCGM reports its utilisation (DCGM_FI_DEV_GPU_UTIL, percent of the sample period a kernel ran)
at or above `busyThreshold`; GPU-hours admitted are Kueue's (what a team's ClusterQueue holds of a pool), busy
ones DCGM's, idle = admitted - busy. The price of a cloud pool's GPU-hour defaults to its machine's published
on-demand price over its GPUs (the cloud module records where and when the figure was read); a pool shared by
time-slicing, MPS or MIG is priced per share (the GPU's price over its shares), the unit Kueue admits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


def pool_prices(spec: Any, units_per_gpu: Mapping[str, int]) -> dict[str, Price]:
    """Pool name -> the price of one admitted unit (GPU or share) for an hour, for every GPU pool of `spec` (a
    PlatformSpec); `units_per_gpu`: pool -> the units Kueue admits per physical GPU (Flavor.gpu)."""
    facts = CLOUDS[spec.cluster.kind]
    prices = {}
    for name, pool in spec.pools.items():
        if pool.gpu is None or not pool.per_node:
            continue
        shares = units_per_gpu.get(name, 1)
        if pool.price_per_gpu_hour is not None:
            per_gpu, origin = pool.price_per_gpu_hour, f"declared (pools.{name}.pricePerGpuHour)"
        elif pool.instance_type in facts.list_prices and pool.capacity_type == "on-demand":
            per_gpu = facts.list_prices[pool.instance_type] / pool.per_node
            origin = f"{pool.instance_type} list price {facts.list_prices[pool.instance_type]}/h, {facts.price_source}"
        else:
            prices[name] = Price(None, f"no price: declare pools.{name}.pricePerGpuHour")
            continue
        prices[name] = Price((per_gpu / shares).quantize(Decimal("0.0001")), origin)
    return prices
