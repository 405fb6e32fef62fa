"""Declared fabrics reach the pods: an InfiniBand or RoCE pool's training pods request its RDMA devices
(`fabricDevice`, which the prerequisites model then needs a device plugin for), and a GKE A3 pool's GPUDirect NICs
are provisioned. Without either NCCL still runs, over TCP, slowly, and nothing else reports it."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.clouds.gcp import GPUDIRECT

RDMA_FABRICS = ("infiniband", "roce")


def check_fabric_reaches_pods(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for name, pool in ctx.platform.spec.pools.items():
        field = f"pools.{name}"
        if pool.fabric in RDMA_FABRICS and pool.fabric_device is None:
            findings.append(Finding("fabric", f"{field}.fabricDevice", f"pool {name} declares fabric {pool.fabric} "
                                    "but its pods request no RDMA device, so NCCL falls back to TCP: set "
                                    "fabricDevice to the resource an RDMA device plugin advertises (the NVIDIA "
                                    "Network Operator's, e.g. rdma/rdma_shared_device_a) and provide that plugin "
                                    "(docs/prerequisites.md)", "warning"))
        if ctx.platform.spec.cluster.kind == "gke" and pool.instance_type in GPUDIRECT:
            findings.append(Finding("fabric", f"{field}.instanceType", f"pool {name}: {pool.instance_type}'s "
                                    f"{GPUDIRECT[pool.instance_type]} NICs are not provisioned (additional networks, "
                                    "NCCL plugin, NRI device injector), so NCCL runs over TCP on the primary NIC: "
                                    "expect a fraction of the inter-node bandwidth (docs/prerequisites.md)",
                                    "warning"))
    return findings
