"""AWS (EKS): the cluster.eks section (network, login), regions and zones, instance types, the aws storage profile,
login, identity and what the EKS cluster layer (infra/cluster/eks/) provides.

Regions: "Regions and Availability Zones" (docs.aws.amazon.com/global-infrastructure/latest/regions/
aws-regions.html) and `aws ec2 describe-availability-zones`, as of 2025; add a row when AWS opens a region. Zone
names are mapped per account, and some regions skip a letter (ca-central-1 a, b, d; ap-northeast-1 a, c, d), so a
zone is accepted when its letter is within the letters the region uses.

Instance types: the published sizes (vCPUs, memory in GiB), cross-checked with the EC2 instance tables as
mirrored in torchx named_resources_aws and SageMaker HyperPod constants. EFA is marked where AWS exposes EFA
interfaces on the size.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from infra.spec.base import DnsLabel, Strict, ipv4_cidr
from infra.spec.clouds.common import Endpoint, SystemPool, exactly_one, private
from infra.spec.clouds.facts import (
    CPU_TIERS,
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
    tiered,
)
from infra.spec.storage.classes import BLOCK, CHECKPOINTS, DATASETS, SCRATCH, Klass, SnapshotClass
from infra.spec.teams import GroupName
from infra.spec.versions import VELERO_PLUGIN

WHERE = "infra/spec/clouds/aws.py"

# region -> the zone letters its zone names end with
AWS_ZONES: Mapping[str, str] = {
    "us-east-1": "abcdef", "us-east-2": "abc", "us-west-1": "abc", "us-west-2": "abcd",
    "ca-central-1": "abd", "ca-west-1": "abc", "mx-central-1": "abc", "sa-east-1": "abc",
    "eu-central-1": "abc", "eu-central-2": "abc", "eu-west-1": "abc", "eu-west-2": "abc", "eu-west-3": "abc",
    "eu-south-1": "abc", "eu-south-2": "abc", "eu-north-1": "abc",
    "il-central-1": "abc", "me-south-1": "abc", "me-central-1": "abc", "af-south-1": "abc",
    "ap-east-1": "abc", "ap-south-1": "abc", "ap-south-2": "abc", "ap-northeast-1": "abcd",
    "ap-northeast-2": "abcd", "ap-northeast-3": "abc", "ap-southeast-1": "abc", "ap-southeast-2": "abc",
    "ap-southeast-3": "abc", "ap-southeast-4": "abc", "ap-southeast-5": "abc", "ap-southeast-7": "abc",
}

aws_region = catalog_check("an AWS region", AWS_ZONES, f"{WHERE} (AWS Regions and Availability Zones)")


def aws_zone_problem(region: str, zone: str) -> str | None:
    """Why `zone` is not a zone of the AWS region, or None."""
    letters = AWS_ZONES.get(region, "")
    if zone.removesuffix(zone[-1:]) != region:
        return f"'{zone}' is not in region {region}: use {region} followed by a zone letter ({', '.join(letters)})"
    if zone[-1:] not in letters:
        return f"'{zone}' is not a zone of {region}: its zones end in {', '.join(letters)}"
    return None


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

_SIZES = [
    *sizes("aws", "H100-SXM-80GB", (("p5.48xlarge", 192, 2048, 8, "efa"),)),
    *sizes("aws", "H200-SXM-141GB", (("p5e.48xlarge", 192, 2048, 8, "efa"), ("p5en.48xlarge", 192, 2048, 8, "efa"))),
    *sizes("aws", "A100-SXM-40GB", (("p4d.24xlarge", 96, 1152, 8, "efa"),)),
    *sizes("aws", "A100-SXM-80GB", (("p4de.24xlarge", 96, 1152, 8, "efa"),)),
    *sizes("aws", "L40S", (
        ("g6e.xlarge", 4, 32, 1, "none"), ("g6e.2xlarge", 8, 64, 1, "none"), ("g6e.4xlarge", 16, 128, 1, "none"),
        ("g6e.8xlarge", 32, 256, 1, "none"), ("g6e.16xlarge", 64, 512, 1, "none"),
        ("g6e.12xlarge", 48, 384, 4, "none"), ("g6e.24xlarge", 96, 768, 4, "efa"),
        ("g6e.48xlarge", 192, 1536, 8, "efa"),
    )),
    *sizes("aws", "A10G", (
        ("g5.xlarge", 4, 16, 1, "none"), ("g5.2xlarge", 8, 32, 1, "none"), ("g5.4xlarge", 16, 64, 1, "none"),
        ("g5.8xlarge", 32, 128, 1, "efa"), ("g5.16xlarge", 64, 256, 1, "efa"), ("g5.12xlarge", 48, 192, 4, "efa"),
        ("g5.24xlarge", 96, 384, 4, "efa"), ("g5.48xlarge", 192, 768, 8, "efa"),
    )),
    *sizes("aws", "L4", (
        ("g6.xlarge", 4, 16, 1, "none"), ("g6.2xlarge", 8, 32, 1, "none"), ("g6.4xlarge", 16, 64, 1, "none"),
        ("g6.8xlarge", 32, 128, 1, "none"), ("g6.16xlarge", 64, 256, 1, "none"), ("g6.12xlarge", 48, 192, 4, "none"),
        ("g6.24xlarge", 96, 384, 4, "none"), ("g6.48xlarge", 192, 768, 8, "none"),
    )),
    *sizes("aws", None, (
        ("m7i.xlarge", 4, 16, 0, "none"), ("m7i.2xlarge", 8, 32, 0, "none"), ("m7i.4xlarge", 16, 64, 0, "none"),
        ("m7i.8xlarge", 32, 128, 0, "none"), ("m5.2xlarge", 8, 32, 0, "none"),
    )),
]
MACHINES: tuple[Machine, ...] = tuple(replace(m, efa_interfaces=EFA_INTERFACES[m.name]) if m.fabric == "efa" else m
                                      for m in _SIZES)


# storage.aws; the class name is the section docs/stack-reference.md shows.
class Aws(Strict):
    """EFS backs checkpoints (and datasets unless FSx is given); FSx for Lustre backs datasets when set."""

    efs_file_system_id: str | None = Field(default=None, alias="efsFileSystemId", pattern=r"^fs-[0-9a-f]+$")
    fsx_subnet_id: str | None = Field(default=None, alias="fsxSubnetId", pattern=r"^subnet-[0-9a-f]+$")
    fsx_security_group_ids: list[str] = Field(default_factory=list, alias="fsxSecurityGroupIds")


def aws_classes(storage: Aws) -> tuple[list[Klass], list[SnapshotClass]]:
    ebs, efs = "ebs.csi.aws.com", "efs.csi.aws.com"
    # Without a fileSystemId the storage component creates the file system and fills it in.
    access_point = {"provisioningMode": "efs-ap", "directoryPerms": "700",
                    **({"fileSystemId": storage.efs_file_system_id} if storage.efs_file_system_id else {})}
    datasets = Klass(DATASETS, efs, access_point, "Retain", snapshots=False)
    if storage.fsx_subnet_id:
        datasets = Klass(DATASETS, "fsx.csi.aws.com", {
            "subnetId": storage.fsx_subnet_id, "securityGroupIds": ",".join(storage.fsx_security_group_ids),
            "deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": "250",
        }, "Retain", mount_options=("flock",), expandable=False, snapshots=False)
    return (
        [Klass(BLOCK, ebs, {"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "xfs"}, "Delete",
               "WaitForFirstConsumer"),
         datasets,
         Klass(CHECKPOINTS, efs, access_point, "Retain", snapshots=False),
         Klass(SCRATCH, efs, access_point, "Delete", snapshots=False)],
        [SnapshotClass("ebs", ebs)],
    )


class EksOidc(Strict):
    """The identity provider whose ID tokens log people in (one per EKS cluster); groups come from
    `groupsClaim` and get identity.groupPrefix, as the RoleBindings expect."""

    issuer_url: str = Field(alias="issuerUrl", pattern=r"^https://\S+$")
    client_id: str = Field(alias="clientId", min_length=1)
    groups_claim: str = Field(default="groups", alias="groupsClaim", min_length=1)
    username_claim: str = Field(default="email", alias="usernameClaim", min_length=1)


class EksLogin(Strict):
    """How people log in: an OIDC identity provider, and/or access entries mapping IAM roles (e.g. IAM Identity
    Center permission-set roles) to groups."""

    oidc: EksOidc | None = None
    access_entries: dict[str, list[GroupName]] = Field(default_factory=dict, alias="accessEntries")

    @field_validator("access_entries")
    @classmethod
    def _roles(cls, entries: dict[str, list[str]]) -> dict[str, list[str]]:
        for arn, groups in entries.items():
            if not re.fullmatch(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/\S+$", arn):
                raise ValueError(f"'{arn}' is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
            if not groups:
                raise ValueError(f"{arn}: list the groups the role logs in as")
        return entries


class AwsNewNetwork(Strict):
    """A VPC with one private (nodes, behind a NAT gateway) and one public subnet per zone."""

    cidr: str = Field(default="10.0.0.0/16")
    zones: list[str] = Field(min_length=2)

    valid_cidr = field_validator("cidr")(ipv4_cidr)

    @model_validator(mode="after")
    def _room(self) -> AwsNewNetwork:
        if ipaddress.IPv4Network(self.cidr).prefixlen > 20:
            raise ValueError("cidr: use a /20 or larger VPC: it is split into two subnets per zone")
        if len(set(self.zones)) != len(self.zones):
            raise ValueError("zones: a zone is listed twice")
        return self


class AwsExistingNetwork(Strict):
    """A VPC and subnets that already exist, by id; private subnets per zone hold the nodes."""

    vpc_id: str = Field(alias="vpcId", pattern=r"^vpc-[0-9a-f]+$")
    private_subnets: dict[str, str] = Field(alias="privateSubnets", min_length=2)
    public_subnets: dict[str, str] = Field(default_factory=dict, alias="publicSubnets")

    @field_validator("private_subnets", "public_subnets")
    @classmethod
    def _subnet_ids(cls, subnets: dict[str, str]) -> dict[str, str]:
        for zone, subnet in subnets.items():
            if not subnet.startswith("subnet-"):
                raise ValueError(f"{zone}: '{subnet}' is not a subnet id (subnet-...)")
        return subnets


class AwsNetwork(Strict):
    create: AwsNewNetwork | None = None
    existing: AwsExistingNetwork | None = None

    @model_validator(mode="after")
    def _one(self) -> AwsNetwork:
        exactly_one(self, "network")
        return self

    @property
    def zones(self) -> list[str]:
        if self.create is not None:
            return list(self.create.zones)
        return list(self.existing.private_subnets) if self.existing is not None else []


# On-demand Linux prices per instance-hour in us-east-1 (USD), GPU sizes only: the default price of a pool's
# GPU-hour in `trainyard report usage`. Other regions and Spot differ: a pool declares `pricePerGpuHour` then.
# None of these could be checked: a search of stored copies of AWS's pages (2026-12-01) found none of the three
# figures on an AWS page; third-party pages quote p5.48xlarge at 98.32 (before a 2025 AWS GPU price cut) and at
# lower figures. Confirm each on the page, then set `verified` and the date the page states.
LIST_PRICES = priced(
    "AWS EC2 On-Demand pricing (aws.amazon.com/ec2/pricing/on-demand), us-east-1, Linux: UNVERIFIED, entered "
    "2026-12-01 without reaching that page; confirm it there before billing from it",
    {"p5.48xlarge": "55.04", "g6e.12xlarge": "10.49264", "g5.12xlarge": "5.672"})


class AwsSystemPool(SystemPool):
    """The small CPU node pool for the platform's own controllers on EKS: an EC2 CPU instance type."""

    catalogue: ClassVar[Mapping[str, Machine]] = {m.name: m for m in MACHINES}

class EksCluster(Strict):
    name: DnsLabel | None = None
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
    network: AwsNetwork
    system_pool: AwsSystemPool = Field(default_factory=lambda: AwsSystemPool(instance_type="m7i.xlarge"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=private)
    login: EksLogin = Field(default_factory=EksLogin)

    def login_mechanism(self) -> str | None:
        ways = ([f"OIDC identity provider {self.login.oidc.issuer_url}"] if self.login.oidc else []) + \
               ([f"{len(self.login.access_entries)} access entries"] if self.login.access_entries else [])
        return f"EKS {' and '.join(ways)}" if ways else None

    known_region = field_validator("region")(aws_region)

    @model_validator(mode="after")
    def _zones_in_region(self) -> EksCluster:
        where = "network.create.zones" if self.network.create is not None else "network.existing.privateSubnets"
        for zone in self.network.zones:
            problem = aws_zone_problem(self.region, zone)
            if problem:
                raise ValueError(f"{where}: {problem}")
        return self


def max_pods(machine: Machine) -> int:
    """The pods a node is taken to run at most: EKS's recommended cap (110 below 30 vCPUs, 250 from 30), an upper
    bound of the VPC CNI's per-instance limit, so the reserve below is never understated."""
    return 110 if machine.vcpu < 30 else 250


def kubelet_reserve(machine: Machine) -> NodeReserve:
    """The EKS AMI's kube-reserved (awslabs/amazon-eks-ami: memory 11 MiB per pod + 255 MiB, CPU by CPU_TIERS) and
    the 100 MiB eviction threshold."""
    memory = (11 * max_pods(machine) + 255) * MIB + EVICTION_MEMORY
    return NodeReserve(tiered(Decimal(machine.vcpu), CPU_TIERS), memory)


FACTS = CloudFacts(
    kind="eks",
    title="EKS",
    storage_profile="aws",
    cloud="aws",
    machines=MACHINES,
    fabrics=("efa",),
    # An EC2 capacity reservation id (launch template capacityReservationTarget).
    reservation=(re.compile(r"^cr-[0-9a-f]{8,17}$"), "an EC2 capacity reservation id such as cr-0123456789abcdef0"),
    login_fix="set cluster.eks.login.oidc {issuerUrl, clientId} or cluster.eks.login.accessEntries",
    service_account_issuer="the EKS cluster's OIDC issuer (the cluster resource's output)",
    provides={
        "network-policy": "VPC CNI network policy (vpc-cni add-on, enableNetworkPolicy)",
        "audit-log": "EKS control-plane logs audit and authenticator, to CloudWatch Logs (audit.retentionDays)",
        "csi:ebs.csi.aws.com": "aws-ebs-csi-driver add-on",
        "csi:efs.csi.aws.com": "aws-efs-csi-driver add-on",
        "csi:fsx.csi.aws.com": "aws-fsx-csi-driver add-on",
        "volume-snapshots": "snapshot-controller add-on",
        "autoscaler": "cluster-autoscaler chart (managed node groups, scale from zero)",
        "spot-interruption": "managed node group capacity rebalancing + aws-node-termination-handler",
        "load-balancer": "the AWS cloud controller's Network/Classic Load Balancer for Services of type LoadBalancer",
        "workload-identity": "EKS Pod Identity (eks-pod-identity-agent add-on, pod identity associations)",
    },
    storage=CloudStorage("aws", lambda spec, cluster, name: aws_classes(spec.aws), "s3", "aws",
                         f"docker.io/velero/velero-plugin-for-aws:{VELERO_PLUGIN}", aws_region),
    # EKS Pod Identity: the association names the account; nothing on the account or the pods.
    workload_identity=IdentityMechanism("aws:eks/podIdentityAssociation:PodIdentityAssociation",
                                        lambda inputs: f"{inputs.get('namespace')}/{inputs.get('serviceAccount')}"),
    # the Pod Identity agent's link-local address
    pod_credentials=(("169.254.170.23/32", 80),),
    managed_prometheus="amazon-managed-prometheus",
    snapshot_controller_in_cluster=True,
    autoscaler_in_cluster=True,
    kubelet_reserve=kubelet_reserve,
    list_prices=LIST_PRICES,
    # The values CloudWatch Logs' PutRetentionPolicy accepts, in days.
    audit_day_values=(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653),
    audit_store="CloudWatch Logs",
)
