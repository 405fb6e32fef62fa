"""Google Cloud (GKE): the cluster.gke section (network, login), regions and zones, machine types, the gcp storage
profile, login, identity, the control plane's firewall and what the GKE cluster layer (infra/cluster/gke/) provides.

Regions: "Regions and zones" (cloud.google.com/compute/docs/regions-zones), zone suffixes per region, as of 2025.
Machine types: the published sizes (memory in GiB: Google's "GB" are GiB) and the GKE accelerator tables
(machine -> `nvidia-*` accelerator type).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from infra.spec.base import DnsLabel, Strict, ipv4_cidr
from infra.spec.clouds.common import Endpoint, SystemPool, exactly_one, private
from infra.spec.clouds.facts import (
    CPU_TIERS,
    EVICTION_MEMORY,
    GIB,
    CloudFacts,
    CloudStorage,
    IdentityMechanism,
    Machine,
    NodeReserve,
    Tiers,
    catalog_check,
    priced,
    sizes,
    tiered,
)
from infra.spec.storage.classes import BLOCK, CHECKPOINTS, DATASETS, SCRATCH, Klass, SnapshotClass
from infra.spec.versions import VELERO_PLUGIN

GOOGLE_MANAGED_PROMETHEUS = "google-managed-prometheus"

_ABC = "abc"
GCP_ZONES: Mapping[str, str] = {
    "us-central1": "abcf", "us-east1": "bcd", "us-east4": _ABC, "us-east5": _ABC, "us-south1": _ABC,
    "us-west1": _ABC, "us-west2": _ABC, "us-west3": _ABC, "us-west4": _ABC,
    "northamerica-northeast1": _ABC, "northamerica-northeast2": _ABC, "southamerica-east1": _ABC,
    "southamerica-west1": _ABC,
    "europe-west1": "bcd", "europe-west2": _ABC, "europe-west3": _ABC, "europe-west4": _ABC,
    "europe-west6": _ABC, "europe-west8": _ABC, "europe-west9": _ABC, "europe-west10": _ABC,
    "europe-west12": _ABC, "europe-north1": _ABC, "europe-central2": _ABC,
    "europe-southwest1": _ABC,
    "me-west1": _ABC, "me-central1": _ABC, "me-central2": _ABC, "africa-south1": _ABC,
    "asia-east1": _ABC, "asia-east2": _ABC, "asia-northeast1": _ABC, "asia-northeast2": _ABC,
    "asia-northeast3": _ABC, "asia-south1": _ABC, "asia-south2": _ABC,
    "asia-southeast1": _ABC, "asia-southeast2": _ABC,
    "australia-southeast1": _ABC, "australia-southeast2": _ABC,
}

gcp_region = catalog_check("a Google Cloud region", GCP_ZONES,
                           "infra/spec/clouds/gcp.py (Google Cloud regions and zones)")


# A3 machines carry extra NICs that reach the other nodes' GPUs only through GPUDirect (TCPX on a3-highgpu-8g, TCPXO
# on a3-megagpu-8g): the additional VPC networks, GKE multi-networking, the NCCL plugin and the NRI device injector.
# Without them NCCL runs over TCP on the primary NIC (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-
# gpudirect-tcpx).
GPUDIRECT = {"a3-highgpu-8g": "GPUDirect-TCPX", "a3-megagpu-8g": "GPUDirect-TCPXO"}

def gcp_zone_problem(region: str, zone: str) -> str | None:
    letters = GCP_ZONES.get(region, "")
    if not zone.startswith(f"{region}-") or len(zone) != len(region) + 2:
        return f"'{zone}' is not in region {region}: use {region}-<letter> ({', '.join(letters)})"
    if zone[-1] not in letters:
        return f"'{zone}' is not a zone of {region}: its zones end in {', '.join(letters)}"
    return None


MACHINES = (
    *sizes("gcp", "H100-SXM-80GB", (("a3-highgpu-8g", 208, 1872, 8, "none"),), "nvidia-h100-80gb"),
    *sizes("gcp", "H100-SXM-80GB", (("a3-megagpu-8g", 208, 1872, 8, "none"),), "nvidia-h100-mega-80gb"),
    *sizes("gcp", "H200-SXM-141GB", (("a3-ultragpu-8g", 224, 2952, 8, "none"),), "nvidia-h200-141gb"),
    *sizes("gcp", "A100-SXM-40GB", (
        ("a2-highgpu-1g", 12, 85, 1, "none"), ("a2-highgpu-2g", 24, 170, 2, "none"),
        ("a2-highgpu-4g", 48, 340, 4, "none"), ("a2-highgpu-8g", 96, 680, 8, "none"),
    ), "nvidia-tesla-a100"),
    *sizes("gcp", "A100-SXM-80GB", (
        ("a2-ultragpu-1g", 12, 170, 1, "none"), ("a2-ultragpu-2g", 24, 340, 2, "none"),
        ("a2-ultragpu-4g", 48, 680, 4, "none"), ("a2-ultragpu-8g", 96, 1360, 8, "none"),
    ), "nvidia-a100-80gb"),
    *sizes("gcp", "L4", (
        ("g2-standard-4", 4, 16, 1, "none"), ("g2-standard-8", 8, 32, 1, "none"),
        ("g2-standard-12", 12, 48, 1, "none"), ("g2-standard-16", 16, 64, 1, "none"),
        ("g2-standard-24", 24, 96, 2, "none"), ("g2-standard-32", 32, 128, 1, "none"),
        ("g2-standard-48", 48, 192, 4, "none"), ("g2-standard-96", 96, 384, 8, "none"),
    ), "nvidia-l4"),
    *sizes("gcp", None, (
        ("e2-standard-4", 4, 16, 0, "none"), ("n2-standard-4", 4, 16, 0, "none"),
        ("n2-standard-8", 8, 32, 0, "none"), ("n2-standard-16", 16, 64, 0, "none"),
    )),
)


# storage.gcp; the class name is the section docs/stack-reference.md shows.
class Gcp(Strict):
    # The VPC network Filestore instances join: the cluster's own unless set (GKE nodes reach only their VPC).
    network: str | None = None
    filestore_tier: Literal["standard", "premium", "enterprise", "zonal"] = Field(default="zonal",
                                                                                   alias="filestoreTier")


def gcp_classes(storage: Gcp, cluster_vpc: str) -> tuple[list[Klass], list[SnapshotClass]]:
    pd, filestore = "pd.csi.storage.gke.io", "filestore.csi.storage.gke.io"
    shared = {"tier": storage.filestore_tier, "network": storage.network or cluster_vpc}
    return (
        [Klass(BLOCK, pd, {"type": "pd-balanced"}, "Delete", "WaitForFirstConsumer"),
         # GCS FUSE mounts existing buckets only: dataset volumes are static PVs onto each team's bucket.
         # GKE's webhook injects the FUSE sidecar only into pods annotated for it.
         Klass(DATASETS, "gcsfuse.csi.storage.gke.io", {}, "Retain", mount_options=("implicit-dirs",),
               expandable=False, snapshots=False, static=True, pod_annotations={"gke-gcsfuse/volumes": "true"}),
         Klass(CHECKPOINTS, filestore, shared, "Retain"),
         Klass(SCRATCH, filestore, shared, "Delete")],
        [SnapshotClass("pd", pd), SnapshotClass("filestore", filestore, {"type": "backup"})],
    )


def _account(inputs: Mapping[str, Any]) -> str:
    # principal://iam.googleapis.com/projects/N/locations/global/workloadIdentityPools/P.svc.id.goog/subject/ns/NS/sa/SA
    _, _, subject = str(inputs.get("member", "")).partition("/subject/ns/")
    return "/".join(subject.split("/sa/", 1))


class GkeLogin(Strict):
    """Google Groups for RBAC: the team groups are members of this group (gke-security-groups@<domain>)."""

    security_group: str = Field(alias="securityGroup", pattern=r"^gke-security-groups@[a-z0-9.-]+\.[a-z]+$")


class GcpNewNetwork(Strict):
    """A VPC with one subnetwork (nodes) and its secondary ranges for pods and services, plus Cloud NAT."""

    nodes: str = "10.0.0.0/20"
    pods: str = "10.4.0.0/14"
    services: str = "10.8.0.0/20"

    valid_cidrs = field_validator("nodes", "pods", "services")(ipv4_cidr)

    @model_validator(mode="after")
    def _disjoint(self) -> GcpNewNetwork:
        ranges = {name: ipaddress.IPv4Network(getattr(self, name)) for name in ("nodes", "pods", "services")}
        for a, b in (("nodes", "pods"), ("nodes", "services"), ("pods", "services")):
            if ranges[a].overlaps(ranges[b]):
                raise ValueError(f"{a} and {b} ranges overlap: give disjoint CIDRs")
        return self


class GcpExistingNetwork(Strict):
    network: str = Field(min_length=1)
    subnetwork: str = Field(min_length=1)
    pods_range: str = Field(alias="podsRange", min_length=1)  # secondary range names on the subnetwork
    services_range: str = Field(alias="servicesRange", min_length=1)


class GcpNetwork(Strict):
    create: GcpNewNetwork | None = None
    existing: GcpExistingNetwork | None = None

    @model_validator(mode="after")
    def _one(self) -> GcpNetwork:
        exactly_one(self, "network")
        return self



class GcpSystemPool(SystemPool):
    """The small CPU node pool for the platform's own controllers on GKE: a CPU machine type."""

    catalogue: ClassVar[Mapping[str, Machine]] = {m.name: m for m in MACHINES}

def vpc_name(gke: GkeCluster | None, cluster_name: str) -> str:
    """The name of the cluster's VPC network: the one it joins, or the one Trainyard creates for it."""
    if gke is None or gke.network.existing is None:
        return f"{cluster_name}-vpc"
    return gke.network.existing.network.rsplit("/", 1)[-1]


class GkeCluster(Strict):
    name: DnsLabel | None = None
    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$")
    zones: list[str] = Field(min_length=1)  # where the cluster's pools run unless a pool names its zone
    network: GcpNetwork = Field(default_factory=lambda: GcpNetwork(create=GcpNewNetwork()))
    # `cloud`: GKE installs the driver and runs its device plugin (time-sharing, MPS, MIG partitions, DCGM
    # metrics); `operator`: Ubuntu nodes, GKE's driver and device plugin off, the NVIDIA GPU Operator does it all.
    gpu_driver: Literal["cloud", "operator"] = Field(default="cloud", alias="gpuDriver")
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(default="REGULAR", alias="releaseChannel")
    system_pool: GcpSystemPool = Field(default_factory=lambda: GcpSystemPool(instance_type="n2-standard-4"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=private)
    login: GkeLogin | None = None

    def login_mechanism(self) -> str | None:
        return f"Google Groups for RBAC ({self.login.security_group})" if self.login else None

    known_region = field_validator("region")(gcp_region)

    @model_validator(mode="after")
    def _zones_in_region(self) -> GkeCluster:
        for zone in self.zones:
            problem = gcp_zone_problem(self.region, zone)
            if problem:
                raise ValueError(f"zones: {problem}")
        if len(set(self.zones)) != len(self.zones):
            raise ValueError("zones: a zone is listed twice")
        return self


# GKE's memory reservation (plan-node-sizes, "Memory and CPU reservations"): 25% of the first 4 GiB, 20% of the
# next 4, 10% of the next 8, 6% of the next 112 and 2% above 128 GiB, plus the 100 MiB eviction threshold.
MEMORY_TIERS: Tiers = tuple((None if upto is None else Decimal(upto) * GIB, Decimal(share)) for upto, share in (
    (4, "0.25"), (8, "0.20"), (16, "0.10"), (128, "0.06"), (None, "0.02")))


def kubelet_reserve(machine: Machine) -> NodeReserve:
    memory = Decimal(machine.memory_gib) * GIB
    return NodeReserve(tiered(Decimal(machine.vcpu), CPU_TIERS), tiered(memory, MEMORY_TIERS) + EVICTION_MEMORY)

# On-demand prices per machine-hour in us-central1 (USD, GPUs included), GPU machines only: the default price of a
# pool's GPU-hour in `trainyard report usage`. Neither could be checked: the searchable copies of the pricing page
# (2026-12-01) stop before its accelerator-optimized tables. Confirm each there, then set `verified` and the date
# the page states.
LIST_PRICES = priced(
    "Google Compute Engine VM instance pricing (cloud.google.com/compute/vm-instance-pricing, accelerator-optimized "
    "machine types), us-central1: UNVERIFIED, entered 2026-12-01 without reaching the figure on that page; confirm "
    "it there before billing from it",
    {"a3-highgpu-8g": "88.253", "g2-standard-48": "3.999"})
# What reserved and Spot capacity costs against the list price, as Google's pages say (read 2026-12-01; the stored
# copies show no date): the list price is the most such a pool costs.
RESERVED_BILLING = (
    "a reservation is billed at the on-demand rate of what it holds, less applicable discounts, for as long as it "
    "exists, used or not (docs.cloud.google.com/compute/docs/instances/reservations-overview); a committed use "
    "discount applies only where a commitment covers the reservation "
    "(docs.cloud.google.com/compute/docs/instances/reservations-with-commitments): with one, declare "
    "pricePerGpuHour at the committed rate")
SPOT_BILLING = (
    "Spot VMs cost up to 91% less than on demand, at a price that can change once a day "
    "(cloud.google.com/spot-vms/pricing): declare pricePerGpuHour at the Spot price in effect")

FACTS = CloudFacts(
    kind="gke",
    title="GKE",
    storage_profile="gcp",
    cloud="gcp",
    machines=MACHINES,
    # A Compute Engine reservation name or the path of one shared from another project (reservationAffinity).
    reservation=(re.compile(r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"),
                 "a reservation name (lowercase letters, digits and '-', starting with a letter, at most 63) or "
                 "projects/PROJECT/reservations/NAME for one shared from another project"),
    group_form=(re.compile(r"^[^@\s]+@[A-Za-z0-9.-]+\.[A-Za-z]+$"),
                "a Google group's email address (Google Groups for RBAC), e.g. ml-eng@example.com"),
    login_fix="set cluster.gke.login.securityGroup (gke-security-groups@<your domain>)",
    provides={
        "network-policy": "GKE Dataplane V2 (ADVANCED_DATAPATH)",
        "audit-log": "Admin Activity and Data Access audit logs, routed to a log bucket (audit.retentionDays)",
        "csi:pd.csi.storage.gke.io": "GCE persistent disk CSI driver (addons_config)",
        "csi:filestore.csi.storage.gke.io": "Filestore CSI driver (addons_config)",
        "csi:gcsfuse.csi.storage.gke.io": "Cloud Storage FUSE CSI driver (addons_config)",
        "volume-snapshots": "GKE's managed snapshot CRDs and controller",
        "autoscaler": "GKE cluster autoscaler (node pool autoscaling)",
        "spot-interruption": "kubelet graceful node shutdown on Spot nodes",
        "load-balancer": "GKE's external passthrough Network Load Balancer for Services of type LoadBalancer",
        "workload-identity": "GKE Workload Identity (workload pool, GKE_METADATA nodes)",
    },
    # GCS buckets also live in multi- and dual-regions (EU, US, ...): storage.region is not checked as a region.
    storage=CloudStorage("gcp", lambda spec, cluster, name: gcp_classes(spec.gcp, vpc_name(cluster.gke, name)),
                         "gs", "gcp",
                         f"docker.io/velero/velero-plugin-for-gcp:{VELERO_PLUGIN}", None,
                         "a Cloud DNS private zone googleapis.com on the cluster's VPC, *.googleapis.com CNAME "
                         "private.googleapis.com (199.36.153.8/30)"),
    # GKE Workload Identity Federation: the bucket grant names the account's principal; nothing else.
    workload_identity=IdentityMechanism("gcp:storage/bucketIAMMember:BucketIAMMember", _account),
    # the GKE metadata server, which serves Workload Identity tokens, and where GKE's network policy guidance has it
    # answer after the node's DNAT
    pod_credentials=(("169.254.169.254/32", 80), ("169.254.169.252/32", 988)),
    managed_prometheus=GOOGLE_MANAGED_PROMETHEUS,
    managed_prometheus_need="observability (Prometheus exports to Managed Service for Prometheus through the Cloud "
                            "Monitoring API monitoring.googleapis.com as a service account holding "
                            "roles/monitoring.metricWriter)",
    # GKE's own firewall rule from the control plane to private nodes.
    control_plane_ports=frozenset({443, 10250}),
    kubelet_reserve=kubelet_reserve,
    list_prices=LIST_PRICES,
    reserved_billing=RESERVED_BILLING,
    spot_billing=SPOT_BILLING,
    audit_days=(1, 3650),  # a Cloud Logging bucket's retention
    audit_store="a Cloud Logging bucket",
)
