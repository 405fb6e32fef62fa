"""Azure (AKS): the cluster.aks section (network, agent pool names, MIG profiles), locations and zones, VM sizes, the
azure storage profile, login, identity and what the AKS cluster layer (infra/cluster/aks/) provides.

Locations: `az account list-locations` and "Azure regions with availability zones"
(learn.microsoft.com/azure/reliability/availability-zones-region-support), as of 2025; AKS zones are 1, 2 and 3
in a location with availability zones, none elsewhere.
VM sizes: the published sizes (memory in GiB: Azure's "GB" are GiB) and Azure's AKS VM size list; InfiniBand on
the ND (RDMA) sizes.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from infra.spec.base import DnsLabel, Strict, ipv4_cidr
from infra.spec.catalog import gpu_model
from infra.spec.clouds.common import Endpoint, SystemPool, exactly_one, private
from infra.spec.clouds.facts import (
    EVICTION_MEMORY,
    MIB,
    CloudFacts,
    CloudStorage,
    IdentityMechanism,
    Machine,
    NodeReserve,
    catalog_check,
    priced,
    sizes,
)
from infra.spec.storage.classes import BLOCK, CHECKPOINTS, DATASETS, SCRATCH, Klass, SnapshotClass
from infra.spec.versions import VELERO_PLUGIN

# Azure locations; True where the location has availability zones (AKS zones 1, 2, 3).
if TYPE_CHECKING:
    from infra.spec.pools import PoolSpec

AZURE_LOCATIONS: Mapping[str, bool] = {
    "eastus": True, "eastus2": True, "centralus": True, "southcentralus": True, "westus2": True, "westus3": True,
    "westus": False, "northcentralus": False, "westcentralus": False,
    "canadacentral": True, "canadaeast": False, "brazilsouth": True, "mexicocentral": True,
    "northeurope": True, "westeurope": True, "uksouth": True, "ukwest": False, "francecentral": True,
    "germanywestcentral": True, "norwayeast": True, "swedencentral": True, "switzerlandnorth": True,
    "polandcentral": True, "italynorth": True, "spaincentral": True,
    "uaenorth": True, "qatarcentral": True, "israelcentral": True, "southafricanorth": True,
    "eastasia": True, "southeastasia": True, "japaneast": True, "japanwest": False, "koreacentral": True,
    "australiaeast": True, "australiasoutheast": False, "centralindia": True, "southindia": False,
}
AKS_ZONES = ("1", "2", "3")

azure_location = catalog_check("an Azure location", AZURE_LOCATIONS,
                               "infra/spec/clouds/azure.py (az account list-locations)")


def azure_zones(location: str) -> tuple[str, ...]:
    """The AKS zones of a location: 1, 2, 3 where it has availability zones, none elsewhere."""
    return AKS_ZONES if AZURE_LOCATIONS.get(location) else ()


MACHINES = (
    *sizes("azure", "H100-SXM-80GB", (("Standard_ND96isr_H100_v5", 96, 1900, 8, "infiniband"),)),
    *sizes("azure", "H200-SXM-141GB", (("Standard_ND96isr_H200_v5", 96, 1850, 8, "infiniband"),)),
    *sizes("azure", "A100-SXM-40GB", (("Standard_ND96asr_v4", 96, 900, 8, "infiniband"),)),
    *sizes("azure", "A100-SXM-80GB", (("Standard_ND96amsr_A100_v4", 96, 1900, 8, "infiniband"),)),
    *sizes("azure", "A100-PCIE-80GB", (
        ("Standard_NC24ads_A100_v4", 24, 220, 1, "none"), ("Standard_NC48ads_A100_v4", 48, 440, 2, "none"),
        ("Standard_NC96ads_A100_v4", 96, 880, 4, "none"),
    )),
    *sizes("azure", "H100-NVL-94GB", (
        ("Standard_NC40ads_H100_v5", 40, 320, 1, "none"), ("Standard_NC80adis_H100_v5", 80, 640, 2, "none"),
    )),
    *sizes("azure", "T4", (
        ("Standard_NC4as_T4_v3", 4, 28, 1, "none"), ("Standard_NC8as_T4_v3", 8, 56, 1, "none"),
        ("Standard_NC16as_T4_v3", 16, 110, 1, "none"), ("Standard_NC64as_T4_v3", 64, 440, 4, "none"),
    )),
    *sizes("azure", None, (
        ("Standard_D4s_v5", 4, 16, 0, "none"), ("Standard_D8s_v5", 8, 32, 0, "none"),
        ("Standard_D16s_v5", 16, 64, 0, "none"), ("Standard_D32s_v5", 32, 128, 0, "none"),
    )),
)


# storage.azure; the class name is the section docs/stack-reference.md shows.
class Azure(Strict):
    resource_group: str | None = Field(default=None, alias="resourceGroup")


def azure_classes() -> tuple[list[Klass], list[SnapshotClass]]:
    disk, files = "disk.csi.azure.com", "file.csi.azure.com"
    nfs_share = {"protocol": "nfs", "skuName": "Premium_LRS"}
    return (
        [Klass(BLOCK, disk, {"skuName": "Premium_LRS"}, "Delete", "WaitForFirstConsumer"),
         Klass(DATASETS, "blob.csi.azure.com", {"protocol": "fuse2", "skuName": "Premium_LRS"}, "Retain",
               snapshots=False),
         Klass(CHECKPOINTS, files, nfs_share, "Retain"),
         Klass(SCRATCH, files, nfs_share, "Delete")],
        [SnapshotClass("azuredisk", disk, {"incremental": "true"}), SnapshotClass("azurefile", files)],
    )


def _account(inputs: Mapping[str, Any]) -> str:
    # system:serviceaccount:NS:SA
    return "/".join(str(inputs.get("subject", "")).split(":")[2:4])


AKS_SERVICE_CIDR = "172.16.0.0/16"  # kept clear of the VNet: AKS' own default (10.0.0.0/16) is a common VNet range


class AzureNewNetwork(Strict):
    """A VNet with one node subnet; pods use Azure CNI overlay addresses outside the VNet."""

    cidr: str = "10.20.0.0/16"

    valid_cidr = field_validator("cidr")(ipv4_cidr)

    @model_validator(mode="after")
    def _clear_of_services(self) -> AzureNewNetwork:
        if ipaddress.IPv4Network(self.cidr).overlaps(ipaddress.IPv4Network(AKS_SERVICE_CIDR)):
            raise ValueError(f"cidr overlaps the cluster's service range {AKS_SERVICE_CIDR}: choose another range")
        return self


class AzureExistingNetwork(Strict):
    subnet_id: str = Field(alias="subnetId", pattern=r"^/subscriptions/.+/subnets/[^/]+$")


class AzureNetwork(Strict):
    create: AzureNewNetwork | None = None
    existing: AzureExistingNetwork | None = None

    @model_validator(mode="after")
    def _one(self) -> AzureNetwork:
        exactly_one(self, "network")
        return self



class AzureSystemPool(SystemPool):
    """The small CPU node pool for the platform's own controllers on AKS: a CPU VM size."""

    catalogue: ClassVar[Mapping[str, Machine]] = {m.name: m for m in MACHINES}

class AksCluster(Strict):
    name: DnsLabel | None = None
    location: str = Field(pattern=r"^[a-z0-9]+$")
    resource_group: str = Field(alias="resourceGroup", pattern=r"^[-\w.()]{1,90}$")
    create_resource_group: bool = Field(default=True, alias="createResourceGroup")
    network: AzureNetwork = Field(default_factory=lambda: AzureNetwork(create=AzureNewNetwork()))
    # `cloud`: AKS installs the driver and container runtime; `operator`: AKS skips it, the operator installs it.
    gpu_driver: Literal["cloud", "operator"] = Field(default="cloud", alias="gpuDriver")
    system_pool: AzureSystemPool = Field(default_factory=lambda: AzureSystemPool(instance_type="Standard_D4s_v5"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=private)

    def login_mechanism(self) -> str | None:
        return None  # always Entra ID (its `provides`, infra/spec/clouds/azure.py)

    known_location = field_validator("location")(azure_location)


def aks_pool_name(pool: str) -> str:
    """AKS agent pool names: Linux pools take at most 12 lowercase letters and digits."""
    return "".join(ch for ch in pool if ch.isalnum())[:12]


def aks_mig_profiles(gpu: str) -> list[str]:
    """The MIG profiles AKS can set on a GPU model: per slice count, the one with the least memory (listed
    first), so 1g.20gb on an 80GB A100 has no AKS equivalent."""
    firsts: dict[str, str] = {}
    for profile in gpu_model(gpu).mig_profiles:
        firsts.setdefault(profile.split("g.")[0], profile)
    return list(firsts.values())


def aks_gpu_instance_profile(pool: PoolSpec) -> str | None:
    """AKS' gpuInstanceProfile (MIG1g ... MIG7g) for a MIG pool, or None when AKS cannot set its profile."""
    if pool.mig is None or pool.gpu is None or pool.mig.profile not in aks_mig_profiles(pool.gpu):
        return None
    return f"MIG{pool.mig.profile.split('g.')[0]}g"


# AKS's kube-reserved CPU by host cores (learn.microsoft.com/azure/aks/node-resource-reservations), in millicores;
# the table stops at 64 cores: above, its last step (10m a core) is continued.
CPU_RESERVED = ((1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740))
MAX_PODS = 250  # Azure CNI overlay's default pods per node


def kubelet_reserve(machine: Machine) -> NodeReserve:
    """AKS 1.29+: memory min(20 MiB per pod + 50 MiB, 25% of the node) plus the 100 MiB eviction threshold; CPU
    from CPU_RESERVED (the smallest row with at least the node's cores)."""
    millicores = next((m for cores, m in CPU_RESERVED if machine.vcpu <= cores),
                      CPU_RESERVED[-1][1] + 10 * (machine.vcpu - CPU_RESERVED[-1][0]))
    memory = min((20 * MAX_PODS + 50) * MIB, Decimal(machine.memory_gib) * 1024 * MIB / 4) + EVICTION_MEMORY
    return NodeReserve(Decimal(millicores) / 1000, memory)

# Pay-as-you-go Linux prices per VM-hour in East US (USD), GPU sizes only: the default price of a pool's GPU-hour
# in `trainyard report usage`. Other regions, Spot and reservations differ: declare `pricePerGpuHour`. Neither
# could be checked: a search of stored copies of Azure's pricing pages (2026-12-01) found neither figure. Confirm
# each on the page, then set `verified` and the date the page states.
LIST_PRICES = priced(
    "Azure Linux Virtual Machines pricing (azure.microsoft.com/pricing/details/virtual-machines/linux), East US, "
    "pay as you go: UNVERIFIED, entered 2026-12-01 without reaching that page; confirm it there before billing from it",
    {"Standard_ND96isr_H100_v5": "98.32", "Standard_NC24ads_A100_v4": "3.673"})

FACTS = CloudFacts(
    kind="aks",
    title="AKS",
    storage_profile="azure",
    cloud="azure",
    machines=MACHINES,
    fabrics=("infiniband",),
    # A capacity reservation group's resource id (agent pool capacityReservationGroupID).
    reservation=(re.compile(r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
                            r"capacityReservationGroups/[^/]+$", re.IGNORECASE),
                 "a capacity reservation group id (/subscriptions/.../capacityReservationGroups/NAME)"),
    group_form=(re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"),
                "an Entra ID group's object id in lowercase, e.g. 6f1e2d3c-4b5a-4987-8a6b-5c4d3e2f1a0b"),
    service_account_issuer="the AKS cluster's OIDC issuer (the cluster resource's oidcIssuerProfile.issuerURL)",
    provides={
        "network-policy": "Azure CNI powered by Cilium (network_policy cilium)",
        "audit-log": "diagnostic setting: kube-audit-admin to Log Analytics (audit.retentionDays)",
        "csi:disk.csi.azure.com": "Azure Disk CSI driver (storage_profile)",
        "csi:file.csi.azure.com": "Azure Files CSI driver (storage_profile)",
        "csi:blob.csi.azure.com": "Azure Blob CSI driver (storage_profile)",
        "volume-snapshots": "AKS snapshot controller (storage_profile)",
        "autoscaler": "AKS cluster autoscaler (agent pool autoscaling)",
        "spot-interruption": "AKS node auto-drain",
        "load-balancer": "the Azure Load Balancer of the cluster's cloud controller",
        "workload-identity": "Entra Workload ID (OIDC issuer, federated credentials)",
        "group-claims": "Entra ID (managed AAD, local accounts disabled): groups by object id",
    },
    storage=CloudStorage("azure", lambda spec, cluster, name: azure_classes(), "az", "azure",
                         f"docker.io/velero/velero-plugin-for-microsoft-azure:{VELERO_PLUGIN}", azure_location,
                         "the storage account's Blob private endpoint in the VNet and the private DNS zone "
                         "privatelink.blob.core.windows.net linked to it"),
    # Entra Workload ID: the webhook reads the client id from the account and mutates labelled pods only.
    workload_identity=IdentityMechanism("azure-native:managedidentity:FederatedIdentityCredential", _account,
                                        ("azure.workload.identity/client-id",),
                                        {"azure.workload.identity/use": "true"}),
    managed_prometheus="azure-monitor",
    snapshot_controller_in_cluster=True,
    kubelet_reserve=kubelet_reserve,
    list_prices=LIST_PRICES,
    audit_days=(30, 730),  # a Log Analytics workspace's interactive retention
    audit_store="a Log Analytics workspace",
)
