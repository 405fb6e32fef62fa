"""Cloud machines: instance type (AWS), machine type (GCP) or VM size (Azure) -> vCPUs, memory, GPU model and
GPUs per node, and the fabric the machine supports. A cloud pool names one of these; its capacity comes from
here and is never typed in the stack.

Figures are the providers' published machine sizes (vCPUs; memory in GiB — GCP's and Azure's "GB" are GiB),
cross-checked with AWS/GCP/Azure instance tables as mirrored in torchx named_resources_aws, SageMaker HyperPod
constants, the GKE accelerator tables (machine -> `nvidia-*` accelerator type) and Azure's AKS VM size list.
EFA is marked where AWS exposes EFA interfaces on the size; InfiniBand on Azure's ND (RDMA) sizes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

Cloud = Literal["aws", "gcp", "azure"]
Fabric = Literal["none", "efa", "infiniband", "roce"]

# The extended resource the AWS EFA device plugin advertises, one unit per EFA interface of a node.
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# EFA interfaces per size (its network cards that carry EFA): what a node of a node group created with every
# interface (pulumi_eks enable_efa_support) advertises, and what one training pod per node requests. From the
# EC2 instance-type tables; `trainyard verify` compares them with what the nodes report.
EFA_INTERFACES = {
    "p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p4d.24xlarge": 4, "p4de.24xlarge": 4,
    "g6e.24xlarge": 2, "g6e.48xlarge": 4,
    "g5.8xlarge": 1, "g5.12xlarge": 1, "g5.16xlarge": 1, "g5.24xlarge": 1, "g5.48xlarge": 1,
}


@dataclass(frozen=True)
class Machine:
    name: str
    cloud: Cloud
    vcpu: int
    memory_gib: int
    gpu: str | None = None  # a GPU model name from catalog.GPU_MODELS
    gpus: int = 0
    fabric: Fabric = "none"  # the high-speed fabric the machine supports
    accelerator: str | None = None  # GKE guest accelerator type (nvidia-h100-80gb, ...)

    def describe(self) -> str:
        gpus = f"{self.gpus} x {self.gpu}, " if self.gpu else ""
        return f"{gpus}{self.vcpu} vCPU, {self.memory_gib}Gi"

    @property
    def efa_interfaces(self) -> int:
        return EFA_INTERFACES[self.name] if self.fabric == "efa" else 0


def _sizes(cloud: Cloud, gpu: str | None, rows: tuple[tuple[str, int, int, int, Fabric], ...],
           accelerator: str | None = None) -> list[Machine]:
    """Rows of (name, vCPUs, GiB, GPUs, fabric) for one machine family."""
    return [Machine(name, cloud, vcpu, mem, gpu if gpus else None, gpus, fabric, accelerator if gpus else None)
            for name, vcpu, mem, gpus, fabric in rows]


_AWS = [
    *_sizes("aws", "H100-SXM-80GB", (("p5.48xlarge", 192, 2048, 8, "efa"),)),
    *_sizes("aws", "H200-SXM-141GB", (("p5e.48xlarge", 192, 2048, 8, "efa"), ("p5en.48xlarge", 192, 2048, 8, "efa"))),
    *_sizes("aws", "A100-SXM-40GB", (("p4d.24xlarge", 96, 1152, 8, "efa"),)),
    *_sizes("aws", "A100-SXM-80GB", (("p4de.24xlarge", 96, 1152, 8, "efa"),)),
    *_sizes("aws", "L40S", (
        ("g6e.xlarge", 4, 32, 1, "none"), ("g6e.2xlarge", 8, 64, 1, "none"), ("g6e.4xlarge", 16, 128, 1, "none"),
        ("g6e.8xlarge", 32, 256, 1, "none"), ("g6e.16xlarge", 64, 512, 1, "none"),
        ("g6e.12xlarge", 48, 384, 4, "none"), ("g6e.24xlarge", 96, 768, 4, "efa"),
        ("g6e.48xlarge", 192, 1536, 8, "efa"),
    )),
    *_sizes("aws", "A10G", (
        ("g5.xlarge", 4, 16, 1, "none"), ("g5.2xlarge", 8, 32, 1, "none"), ("g5.4xlarge", 16, 64, 1, "none"),
        ("g5.8xlarge", 32, 128, 1, "efa"), ("g5.16xlarge", 64, 256, 1, "efa"), ("g5.12xlarge", 48, 192, 4, "efa"),
        ("g5.24xlarge", 96, 384, 4, "efa"), ("g5.48xlarge", 192, 768, 8, "efa"),
    )),
    *_sizes("aws", "L4", (
        ("g6.xlarge", 4, 16, 1, "none"), ("g6.2xlarge", 8, 32, 1, "none"), ("g6.4xlarge", 16, 64, 1, "none"),
        ("g6.8xlarge", 32, 128, 1, "none"), ("g6.16xlarge", 64, 256, 1, "none"), ("g6.12xlarge", 48, 192, 4, "none"),
        ("g6.24xlarge", 96, 384, 4, "none"), ("g6.48xlarge", 192, 768, 8, "none"),
    )),
    *_sizes("aws", None, (
        ("m7i.xlarge", 4, 16, 0, "none"), ("m7i.2xlarge", 8, 32, 0, "none"), ("m7i.4xlarge", 16, 64, 0, "none"),
        ("m7i.8xlarge", 32, 128, 0, "none"), ("m5.2xlarge", 8, 32, 0, "none"),
    )),
]

_GCP = [
    *_sizes("gcp", "H100-SXM-80GB", (("a3-highgpu-8g", 208, 1872, 8, "none"),), "nvidia-h100-80gb"),
    *_sizes("gcp", "H100-SXM-80GB", (("a3-megagpu-8g", 208, 1872, 8, "none"),), "nvidia-h100-mega-80gb"),
    *_sizes("gcp", "H200-SXM-141GB", (("a3-ultragpu-8g", 224, 2952, 8, "none"),), "nvidia-h200-141gb"),
    *_sizes("gcp", "A100-SXM-40GB", (
        ("a2-highgpu-1g", 12, 85, 1, "none"), ("a2-highgpu-2g", 24, 170, 2, "none"),
        ("a2-highgpu-4g", 48, 340, 4, "none"), ("a2-highgpu-8g", 96, 680, 8, "none"),
    ), "nvidia-tesla-a100"),
    *_sizes("gcp", "A100-SXM-80GB", (
        ("a2-ultragpu-1g", 12, 170, 1, "none"), ("a2-ultragpu-2g", 24, 340, 2, "none"),
        ("a2-ultragpu-4g", 48, 680, 4, "none"), ("a2-ultragpu-8g", 96, 1360, 8, "none"),
    ), "nvidia-a100-80gb"),
    *_sizes("gcp", "L4", (
        ("g2-standard-4", 4, 16, 1, "none"), ("g2-standard-8", 8, 32, 1, "none"),
        ("g2-standard-12", 12, 48, 1, "none"), ("g2-standard-16", 16, 64, 1, "none"),
        ("g2-standard-24", 24, 96, 2, "none"), ("g2-standard-32", 32, 128, 1, "none"),
        ("g2-standard-48", 48, 192, 4, "none"), ("g2-standard-96", 96, 384, 8, "none"),
    ), "nvidia-l4"),
    *_sizes("gcp", None, (
        ("e2-standard-4", 4, 16, 0, "none"), ("n2-standard-4", 4, 16, 0, "none"),
        ("n2-standard-8", 8, 32, 0, "none"), ("n2-standard-16", 16, 64, 0, "none"),
    )),
]

_AZURE = [
    *_sizes("azure", "H100-SXM-80GB", (("Standard_ND96isr_H100_v5", 96, 1900, 8, "infiniband"),)),
    *_sizes("azure", "H200-SXM-141GB", (("Standard_ND96isr_H200_v5", 96, 1850, 8, "infiniband"),)),
    *_sizes("azure", "A100-SXM-40GB", (("Standard_ND96asr_v4", 96, 900, 8, "infiniband"),)),
    *_sizes("azure", "A100-SXM-80GB", (("Standard_ND96amsr_A100_v4", 96, 1900, 8, "infiniband"),)),
    *_sizes("azure", "A100-PCIE-80GB", (
        ("Standard_NC24ads_A100_v4", 24, 220, 1, "none"), ("Standard_NC48ads_A100_v4", 48, 440, 2, "none"),
        ("Standard_NC96ads_A100_v4", 96, 880, 4, "none"),
    )),
    *_sizes("azure", "H100-NVL-94GB", (
        ("Standard_NC40ads_H100_v5", 40, 320, 1, "none"), ("Standard_NC80adis_H100_v5", 80, 640, 2, "none"),
    )),
    *_sizes("azure", "T4", (
        ("Standard_NC4as_T4_v3", 4, 28, 1, "none"), ("Standard_NC8as_T4_v3", 8, 56, 1, "none"),
        ("Standard_NC16as_T4_v3", 16, 110, 1, "none"), ("Standard_NC64as_T4_v3", 64, 440, 4, "none"),
    )),
    *_sizes("azure", None, (
        ("Standard_D4s_v5", 4, 16, 0, "none"), ("Standard_D8s_v5", 8, 32, 0, "none"),
        ("Standard_D16s_v5", 16, 64, 0, "none"), ("Standard_D32s_v5", 32, 128, 0, "none"),
    )),
]

MACHINES: dict[str, Machine] = {m.name: m for m in (*_AWS, *_GCP, *_AZURE)}


def machine(name: str) -> Machine:
    """The catalog entry for an instance type; a ValueError suggests the nearest known names."""
    if name in MACHINES:
        return MACHINES[name]
    near = difflib.get_close_matches(name, MACHINES, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ValueError(f"instance type '{name}' is not in the catalog: {hint}known types are listed in "
                     "infra/spec/cloud_catalog.py (add a new size there with its published figures)")

