"""The one versions table: every upstream chart and image Trainyard installs, pinned, plus the
compatibility matrix between Kueue, Kubeflow Trainer and JobSet.

Facts (see docs/versions.md for the sources):
- Kueue 0.17-0.19 are compiled against Trainer 2.2.x; Kueue 0.19.2's go.mod and e2e suite use
  Trainer 2.2.1 with JobSet 0.12.0. Kueue 0.20 moves to Trainer 2.3.0.
- Trainer 2.2.1 bundles JobSet 0.11.0 (and works with 0.12.0, which Kueue tests); 2.3.0 needs JobSet 0.12.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import Strict


@dataclass(frozen=True)
class Chart:
    """An upstream Helm chart at an exact version."""

    name: str
    repository: str  # an OCI reference (chart included) or a classic Helm repository URL
    version: str

    @property
    def oci(self) -> bool:
        return self.repository.startswith("oci://")


def minor(version: str) -> str:
    """'0.19.4' -> '0.19'."""
    major, minor_part, *_ = version.lstrip("v").split(".")
    return f"{major}.{minor_part}"


# Known releases. A stack may pin any of these; anything else is a config error.
KueueVersion = Literal["0.19.2", "0.19.3", "0.19.4", "0.20.0"]
TrainerVersion = Literal["2.2.1", "2.3.0"]
JobSetVersion = Literal["0.11.0", "0.11.1", "0.12.0"]

# Trainer minor -> Kueue minors built against it; Trainer minor -> JobSet minors it runs with.
TRAINER_FOR_KUEUE = {"0.17": "2.2", "0.18": "2.2", "0.19": "2.2", "0.20": "2.3"}
JOBSET_FOR_TRAINER = {"2.2": ("0.11", "0.12"), "2.3": ("0.12",)}

DEFAULT_KUEUE: KueueVersion = "0.19.4"
DEFAULT_TRAINER: TrainerVersion = "2.2.1"
DEFAULT_JOBSET: JobSetVersion = "0.12.0"

# Velero: chart 12.1.0 (appVersion 1.18.1) with the 1.18.2 server image (same CRDs); object-store
# plugins v1.14.x pair with Velero 1.18 (plugin minor = Velero minor - 4).
VELERO = "1.18.2"
VELERO_CHART = Chart("velero", "https://vmware-tanzu.github.io/helm-charts", "12.1.0")
VELERO_IMAGE = f"velero/velero:v{VELERO}"
VELERO_PLUGINS = {
    "aws": "velero/velero-plugin-for-aws:v1.14.2",
    "gcp": "velero/velero-plugin-for-gcp:v1.14.2",
    "azure": "velero/velero-plugin-for-microsoft-azure:v1.14.2",
}
# Tools for the platform's own jobs (restore drills, cleanup, bucket versioning).
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"
AWS_CLI_IMAGE = "amazon/aws-cli:2.35.10"
# NVIDIA GPU Operator v26.7.0 (2026-08-20): driver, toolkit, device plugin v0.20.0, MIG manager, DCGM exporter.
GPU_OPERATOR_CHART = Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.7.0")
# AWS EFA device plugin (aws/eks-charts stable/aws-efa-k8s-device-plugin): chart v0.5.20 deploys its default
# image 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.13.
EFA_DEVICE_PLUGIN_CHART = Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "v0.5.20")
# EKS cluster layer: the cluster autoscaler (chart 9.59.0, appVersion 1.35.0) runs the image of the cluster's
# minor (tags of 2026-07-22), and AWS Node Termination Handler 1.25.6 (chart 0.27.6) drains Spot nodes.
CLUSTER_AUTOSCALER_CHART = Chart("cluster-autoscaler", "https://kubernetes.github.io/autoscaler", "9.59.0")
CLUSTER_AUTOSCALER_IMAGES = {"1.34": "v1.34.5", "1.35": "v1.35.2"}
NODE_TERMINATION_HANDLER_CHART = Chart("aws-node-termination-handler",
                                       "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler", "0.27.6")


class Versions(Strict):
    """Pinned versions of the in-cluster components; a stack overrides them only deliberately."""

    kueue: KueueVersion = DEFAULT_KUEUE
    trainer: TrainerVersion = DEFAULT_TRAINER
    jobset: JobSetVersion = DEFAULT_JOBSET
    # The cluster's Kubernetes minor: core objects are validated against its OpenAPI schema.
    kubernetes: Literal["1.31", "1.32", "1.33", "1.34", "1.35"] = "1.34"

    def kueue_chart(self) -> Chart:
        return Chart("kueue", "oci://registry.k8s.io/kueue/charts/kueue", self.kueue)

    def trainer_chart(self) -> Chart:
        return Chart("kubeflow-trainer", "oci://ghcr.io/kubeflow/charts/kubeflow-trainer", self.trainer)

    def jobset_chart(self) -> Chart:
        return Chart("jobset", "oci://registry.k8s.io/jobset/charts/jobset", self.jobset)

    def kueue_image(self) -> str:
        return f"registry.k8s.io/kueue/kueue:v{self.kueue}"

    def trainer_image(self) -> str:
        return f"ghcr.io/kubeflow/trainer/trainer-controller-manager:v{self.trainer}"

    def jobset_image(self) -> str:
        return f"registry.k8s.io/jobset/jobset:v{self.jobset}"

    def crd_dirs(self) -> dict[str, str]:
        """Component -> the `<component>/v<minor>` directory of upstream CRDs that matches the pins."""
        return {
            "kueue": f"kueue/v{minor(self.kueue)}",
            "trainer": f"trainer/v{minor(self.trainer)}",
            "jobset": f"jobset/v{minor(self.jobset)}",
            "velero": f"velero/v{minor(VELERO)}",
        }


@dataclass(frozen=True)
class Verdict:
    pair: str
    ok: bool
    reason: str


def verdicts(versions: Versions) -> tuple[Verdict, ...]:
    """Every compatibility rule evaluated for these pins."""
    kueue_minor, trainer_minor, jobset_minor = minor(versions.kueue), minor(versions.trainer), minor(versions.jobset)
    wanted_trainer = TRAINER_FOR_KUEUE[kueue_minor]
    jobsets = JOBSET_FOR_TRAINER[trainer_minor]
    return (
        Verdict(
            f"kueue {versions.kueue} / trainer {versions.trainer}",
            trainer_minor == wanted_trainer,
            f"Kueue {kueue_minor} is built against Trainer {wanted_trainer}",
        ),
        Verdict(
            f"trainer {versions.trainer} / jobset {versions.jobset}",
            jobset_minor in jobsets,
            f"Trainer {trainer_minor} runs with JobSet {' or '.join(jobsets)}",
        ),
    )
