"""Declared fabrics reach the pods, or the stack says they do not: an InfiniBand or RoCE pool's training pods request
its RDMA devices (`fabricDevice`, which the prerequisites model then needs a device plugin for), and a GKE A3 pool,
whose GPUDirect-TCPX(O) NICs Trainyard does not provision (additional VPC networks, GKE multi-networking, the NCCL
plugin and the NRI device injector), declares `fabric: none`. Otherwise NCCL runs over TCP and nothing else reports
it, so the stack is refused, naming the field. The NVIDIA Network Operator (the RDMA device plugin a cloud cluster
lacks) and the GPUDirect manifests are not vendored: a cloud stack's RDMA pool runs `fabric: none` until they are."""

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
                                    "but its pods request no RDMA device, so NCCL would fall back to TCP: set "
                                    "fabricDevice to the resource an RDMA device plugin advertises (the NVIDIA "
                                    "Network Operator's, e.g. rdma/rdma_shared_device_a) and provide that plugin, or "
                                    "set fabric: none to run over TCP knowingly (docs/prerequisites.md)"))
        if (ctx.platform.spec.cluster.kind == "gke" and pool.instance_type in GPUDIRECT
                and "fabric" not in pool.model_fields_set):
            findings.append(Finding("fabric", f"{field}.fabric", f"pool {name}: {pool.instance_type}'s "
                                    f"{GPUDIRECT[pool.instance_type]} NICs are not provisioned by Trainyard "
                                    "(additional networks, NCCL plugin, NRI device injector), so NCCL would run over "
                                    "TCP on the "
                                    "primary NIC at a fraction of the inter-node bandwidth: declare fabric: none to "
                                    "run so knowingly (docs/prerequisites.md)"))
    return findings
