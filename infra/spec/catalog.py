"""GPU models Trainyard knows: the name a stack uses, the label GPU Feature Discovery sets, memory, and the
MIG profiles each model can be split into (with how many instances of one profile fit on one GPU).

Cloud instance types map onto these models in infra/spec/clouds; on-prem pools name the model directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Instances per GPU when every slice has the same profile, in NVIDIA's MIG user guide order
# (supported-mig-profiles): 1g, 1g with twice the memory, 2g, 3g, 4g, 7g.
_MIG_COUNTS = (7, 4, 3, 2, 1, 1)


def _mig(*profiles: str) -> dict[str, int]:
    return dict(zip(profiles, _MIG_COUNTS, strict=True))


@dataclass(frozen=True)
class GpuModel:
    name: str
    product: str  # value of the nvidia.com/gpu.product label that GPU Feature Discovery sets
    memory_gb: int
    max_per_node: int  # the most GPUs of this model one node holds (see MAX_PER_NODE_SOURCES)
    mig_profiles: Mapping[str, int] = field(default_factory=dict)  # profile -> instances per GPU

    def mig_per_gpu(self, profile: str) -> int:
        """Instances of `profile` on one GPU; a ValueError names the profiles this model has."""
        if profile not in self.mig_profiles:
            offered = ", ".join(self.mig_profiles) or "none (this GPU has no MIG)"
            raise ValueError(f"{self.name} has no MIG profile '{profile}': use one of {offered}")
        return self.mig_profiles[profile]


# Where max_per_node comes from: SXM GPUs sit on NVIDIA HGX baseboards of 4 or 8 GPUs (HGX A100/H100/H200
# datasheets), so 8; PCIe cards are bounded by the slots of the largest common GPU servers (10 double-width
# cards: L40S, A100 PCIe, H100 NVL; 20 single-width low-profile cards: L4, T4); A10G exists only in AWS g5
# sizes, at most 8 (g5.48xlarge).
SXM_PER_NODE, DOUBLE_WIDTH_PER_NODE, SINGLE_WIDTH_PER_NODE, A10G_PER_NODE = 8, 10, 20, 8
MAX_PER_NODE_SOURCES = "NVIDIA HGX datasheets (SXM), GPU server slot counts (PCIe), AWS g5 sizes (A10G)"

GPU_MODELS: dict[str, GpuModel] = {
    model.name: model
    for model in (
        GpuModel("H200-SXM-141GB", "NVIDIA-H200", 141, SXM_PER_NODE,
                 _mig("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
        GpuModel("H100-SXM-80GB", "NVIDIA-H100-80GB-HBM3", 80, SXM_PER_NODE,
                 _mig("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        GpuModel("H100-NVL-94GB", "NVIDIA-H100-NVL", 94, DOUBLE_WIDTH_PER_NODE,
                 _mig("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")),
        GpuModel("A100-SXM-80GB", "NVIDIA-A100-SXM4-80GB", 80, SXM_PER_NODE,
                 _mig("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        GpuModel("A100-SXM-40GB", "NVIDIA-A100-SXM4-40GB", 40, SXM_PER_NODE,
                 _mig("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
        GpuModel("A100-PCIE-80GB", "NVIDIA-A100-80GB-PCIe", 80, DOUBLE_WIDTH_PER_NODE,
                 _mig("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        GpuModel("L40S", "NVIDIA-L40S", 48, DOUBLE_WIDTH_PER_NODE),
        GpuModel("L4", "NVIDIA-L4", 24, SINGLE_WIDTH_PER_NODE),
        GpuModel("A10G", "NVIDIA-A10G", 24, A10G_PER_NODE),
        GpuModel("T4", "Tesla-T4", 16, SINGLE_WIDTH_PER_NODE),
    )
}


def gpu_model(name: str) -> GpuModel:
    try:
        return GPU_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(GPU_MODELS))
        raise ValueError(f"unknown GPU model '{name}': use one of {known}") from None
