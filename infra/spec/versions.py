"""The one versions table: every upstream chart and image Trainyard installs, pinned, plus the
compatibility matrix between Kueue, Kubeflow Trainer and JobSet.

Facts (see docs/versions.md for the sources):
- Kueue 0.17-0.19 are compiled against Trainer 2.2.x; Kueue 0.19.2's go.mod and e2e suite use
  Trainer 2.2.1 with JobSet 0.12.0. Kueue 0.20 moves to Trainer 2.3.0.
- Trainer 2.2.1 bundles JobSet 0.11.0 (and works with 0.12.0, which Kueue tests); 2.3.0 needs JobSet 0.12.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from infra.kit.paths import MANIFEST_CACHE
from infra.spec.base import Strict

# Every chart archive Trainyard may install -> the sha256 of its content (infra/offline/chartcache.py:
# each file's path and sha256, in path order). A chart without an entry cannot be installed; to add or bump
# one, run `scripts/fetch-charts --bump NAME VERSION` on a connected machine and review the line it prints.
CHART_DIGESTS = {
    "aws-efa-k8s-device-plugin-v0.5.20.tgz": "sha256:dc9e7590671aa8ee9b863bbc1d52d428788fbe38386223a5ea80a6684f89fe76",
    "aws-efa-k8s-device-plugin-v0.5.30.tgz": "sha256:0fe53b54fb1afbe2766d350b92d4464a1b755ccf16a575d5b7d949d3c63ea657",
    "aws-node-termination-handler-0.27.6.tgz":
        "sha256:4382e58f88d79122b895054a70e1cca76644a5c7e5d3d1b7999675d98546b076",
    "cluster-autoscaler-9.59.0.tgz": "sha256:469d97c6d7b029395f80bbadb64a79d27a5b03a24afe1a63b63b2781f4e342d0",
    "gpu-operator-v26.7.0.tgz": "sha256:7b499226ad71e5043ec14210ee2aa76ac5df6660cb0df3b9ee05c93a0ddd01aa",
    "jobset-0.12.0.tgz": "sha256:95c0cd5bd7fff5778bd6d3d31c8c9aebc01ec6bdfe119e1b42dddfec7de110b2",
    "karpenter-1.14.1.tgz": "sha256:8b88b67b02b61ab188230e179a0d1e9b6dc92b67ae786374ff85422739cc4dca",
    "karpenter-crd-1.14.1.tgz": "sha256:28ccc0caf671234d2df2296c3523ea391de3cef3b50df6f18ca0e75722c855bb",
    "kube-prometheus-stack-88.5.3.tgz": "sha256:51dd8514015ec64b9f8b1371f6f89a46483bcacca7398458f674ddc7183aa218",
    "kubeflow-trainer-2.2.1.tgz": "sha256:7e4ab548d263d8f682e77075c57bd6f781ae7e7cbb5ce23a68332da98bd15dee",
    "kueue-0.19.2.tgz": "sha256:d49a604d933bf1f039e5e6412c2fe2fdb554604e7bf19deb41591b18a82933ce",
    "rook-ceph-cluster-v1.20.6.tgz": "sha256:e5f94c3fc7d11751c21c4f8121524afdbaef7cc31296801d638115e2d3e3eef7",
    "rook-ceph-v1.20.6.tgz": "sha256:1f6752a07d6ee26715eb38141ab57161891169994cb28ee86919518a5c03d738",
    "seaweedfs-4.44.0.tgz": "sha256:ca77f52cd3ce228edb87a49d2803645905f5637a9a8a17b90d26dedfa5ef6367",
    "velero-12.1.0.tgz": "sha256:6c48cdc01894027e2c2453f3ee3638511460c2acf67ae9d9eb7d0a2724a3c387",
}
CHART_CACHE = ".charts"  # relative to the project root, where `pulumi up` runs the program


@dataclass(frozen=True)
class Chart:
    """An upstream Helm chart at an exact version, installed from the verified archive in the local cache."""

    name: str
    repository: str  # an OCI reference (chart included) or a classic Helm repository URL
    version: str

    @property
    def oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def archive(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    @property
    def digest(self) -> str:
        """'sha256:<hex>', or '' when the table has none (the chart is then refused)."""
        return CHART_DIGESTS.get(self.archive, "")

    @property
    def path(self) -> str:
        """Where the program installs it from: the digest is in the path, so a changed pin changes the
        chart's inputs and nothing unverified is ever picked up."""
        return f"{CHART_CACHE}/{self.digest.removeprefix('sha256:')}/{self.archive}"


# Vendored releases of upstream kustomizations (scripts/fetch-manifests places each, extracted and verified, under
# .manifests/<sha256>/; docs/manifests.md). The sha256 is of the archive's bytes, as its SHA256SUMS lists it.


@dataclass(frozen=True)
class Manifests:
    """A release of upstream Kubernetes manifests (kustomizations), rendered from its verified, extracted archive."""

    name: str
    release: str
    archive: str  # the file name in ../shared/kustomize
    sha256: str  # hex, of the archive's bytes
    top: str  # the one folder the archive holds; stripped on extraction, so paths read as in the release
    source: str  # the upstream repository and tag the archive was made from
    commit: str

    @property
    def path(self) -> str:
        """Where the extracted tree lives: the digest is in the path, as for charts."""
        return f"{MANIFEST_CACHE}/{self.sha256}"


# kubeflow/manifests 26.03, localized (its four remote argo-workflows bases copied in; SOURCE.txt beside it).
KUBEFLOW_MANIFESTS = Manifests(
    name="kubeflow-manifests", release="26.03", archive="kubeflow-manifests-26.03-localized.tar.gz",
    sha256="6ba41f312637d798b0fd670ca9ea691ab884fa02d659d8b7503c50631bd2b5d4", top="kubeflow-manifests-26.03",
    source="https://github.com/kubeflow/manifests/tree/26.03", commit="d68ebc7fab366ab40ddd1541d2ec22febb31bc83")
VENDORED_MANIFESTS = (KUBEFLOW_MANIFESTS,)


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

DEFAULT_KUEUE: KueueVersion = "0.19.2"  # the newest Kueue whose chart archive is pinned
DEFAULT_TRAINER: TrainerVersion = "2.2.1"
DEFAULT_JOBSET: JobSetVersion = "0.12.0"

# Velero: chart 12.1.0 (appVersion 1.18.1) with the 1.18.2 server image (same CRDs); object-store
# plugins v1.14.x pair with Velero 1.18 (plugin minor = Velero minor - 4).
VELERO = "1.18.2"
VELERO_CHART = Chart("velero", "https://vmware-tanzu.github.io/helm-charts", "12.1.0")
VELERO_IMAGE = f"docker.io/velero/velero:v{VELERO}"
VELERO_PLUGIN = "v1.14.2"  # the tag of every object-store plugin image (each cloud's in infra/spec/clouds/)
# Tools for the platform's own jobs (restore drills, cleanup, bucket versioning).
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"
AWS_CLI_IMAGE = "docker.io/amazon/aws-cli:2.35.10"
# The front door's web binder (infra/platform/web/binder.py) runs a standard-library Python program: the image the
# vendored Kubeflow Pipelines 2.16 profile controller runs its Python hook on (pipelines-profile-controller).
WEB_BINDER_IMAGE = "docker.io/alpine/k8s:1.32.3"
# Each team registry's production versions as Prometheus series (infra/platform/models/observability.py): the
# Prometheus community's JSON exporter (prometheus-community/json_exporter v0.7.0, its release image).
REGISTRY_EXPORTER_IMAGE = "quay.io/prometheuscommunity/json-exporter:v0.7.0"
# NVIDIA GPU Operator v26.7.0 (2026-08-20): driver, toolkit, device plugin v0.20.0, MIG manager, DCGM exporter.
GPU_OPERATOR_CHART = Chart("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.7.0")
# Its values' driver.version: the driver the operator installs (a precompiled driver: its branch, "595").
GPU_DRIVER_VERSION = "595.91.07"
# AWS EFA device plugin (aws/eks-charts stable/aws-efa-k8s-device-plugin): chart v0.5.20 deploys its default
# image 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.13.
EFA_DEVICE_PLUGIN_CHART = Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "v0.5.20")
# kube-prometheus-stack 88.5.3 (2026-08-21): prometheus-operator v0.93.1, Prometheus v3.14.0, Alertmanager v0.34.0,
# kube-state-metrics 2.20.0, node-exporter 1.12.1, Grafana 13.2.0.
KUBE_PROMETHEUS_STACK_CHART = Chart("kube-prometheus-stack", "oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack",
                                    "88.5.3")
# GKE with observability.managedPrometheus: Google's drop-in Prometheus (self-deployed collection for Managed Service
# for Prometheus), the image of GoogleCloudPlatform/prometheus-engine v0.17.2 examples/prometheus.yaml; forked from
# Prometheus v2.53.5, the version the operator renders its flags and configuration for.
GMP_PROMETHEUS_IMAGE = "gke.gcr.io/prometheus-engine/prometheus:v2.53.5-gmp.1-gke.2"
GMP_PROMETHEUS_VERSION = "v2.53.5"
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

    def charts(self) -> dict[str, Chart]:
        """Field -> the chart its pin installs."""
        return {"kueue": self.kueue_chart(), "trainer": self.trainer_chart(), "jobset": self.jobset_chart()}

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
            # prometheus-operator's CRDs ship only inside the chart (its crds subchart): read from the archive.
            "monitoring": f"../charts/{KUBE_PROMETHEUS_STACK_CHART.name}-{KUBE_PROMETHEUS_STACK_CHART.version}.tgz",
        }


# Charts whose version no stack chooses (the pinned ones come from Versions.charts()); a new chart's constant
# goes here and its digest into CHART_DIGESTS.
PLATFORM_CHARTS = (VELERO_CHART, GPU_OPERATOR_CHART, EFA_DEVICE_PLUGIN_CHART, KUBE_PROMETHEUS_STACK_CHART,
                   CLUSTER_AUTOSCALER_CHART, NODE_TERMINATION_HANDLER_CHART)


def installable_charts() -> tuple[Chart, ...]:
    """Every chart some stack may install and the table can verify: what scripts/fetch-charts caches."""
    pinnable = [Versions(kueue=k).kueue_chart() for k in get_args(KueueVersion)]
    pinnable += [Versions(trainer=t).trainer_chart() for t in get_args(TrainerVersion)]
    pinnable += [Versions(jobset=j).jobset_chart() for j in get_args(JobSetVersion)]
    return tuple(chart for chart in (*PLATFORM_CHARTS, *pinnable) if chart.digest)


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
