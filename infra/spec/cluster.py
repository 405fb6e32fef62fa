"""Where the nodes come from. One key per kind; exactly one is set: an existing cluster (on-prem, kind), or a
managed cluster that Trainyard creates on AWS (eks), Google Cloud (gke) or Azure (aks) with its network.

The cluster's Kubernetes minor is `versions.kubernetes` (one pin for the control plane and the schema checks).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from infra.spec.base import DnsLabel, PositiveInt, Strict, ipv4_cidr
from infra.spec.catalog import gpu_model
from infra.spec.clouds import CLOUDS, machine
from infra.spec.clouds.aws import aws_region, aws_zone_problem
from infra.spec.clouds.azure import azure_location, azure_zones
from infra.spec.clouds.gcp import gcp_region, gcp_zone_problem
from infra.spec.pools import PoolSpec
from infra.spec.prerequisites import capability_problem
from infra.spec.teams import GroupName

AKS_SERVICE_CIDR = "172.16.0.0/16"  # kept clear of the VNet: AKS' own default (10.0.0.0/16) is a common VNet range


def _exactly_one(model: BaseModel, what: str) -> None:
    chosen = [name for name, value in model if value is not None]
    if len(chosen) != 1:
        raise ValueError(f"set exactly one {what}: {', '.join(type(model).model_fields)}")


@dataclass(frozen=True)
class GpuStack:
    """Who runs each part of the NVIDIA software on GPU nodes of this cluster."""

    operator: bool  # Trainyard installs the NVIDIA GPU Operator
    driver: bool  # the operator installs the driver (else the node image or the cloud has it)
    toolkit: bool  # the operator installs the container toolkit (else the node image has it)
    cloud_sharing: bool  # the cloud's device plugin shares and partitions GPUs (GKE): MIG slices are nvidia.com/gpu
    reboot_for_mig: bool  # cloud VMs need a reboot to switch MIG mode (MIG manager WITH_REBOOT)


class Endpoint(Strict):
    """Who reaches the API server. `cidrs`: the networks allowed on the public endpoint; `private: true`: no
    public endpoint at all (Pulumi and kubectl then run from inside the cluster's network). The default is
    private; the whole internet (a /0) is refused."""

    cidrs: list[str] = Field(default_factory=list)
    private: bool = False

    @field_validator("cidrs")
    @classmethod
    def _networks(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            ipv4_cidr(cidr)
            if ipaddress.IPv4Network(cidr).prefixlen == 0:
                raise ValueError(f"'{cidr}' opens the API server to the whole internet: name your networks")
        if len(set(cidrs)) != len(cidrs):
            raise ValueError("a network is listed twice")
        return cidrs

    @model_validator(mode="after")
    def _one_way(self) -> Endpoint:
        if self.private and self.cidrs:
            raise ValueError("private: true has no public endpoint: drop `cidrs` or set private: false")
        if not self.private and not self.cidrs:
            raise ValueError("name the networks that reach the API server (cidrs: [...]) or set private: true")
        return self


def _private() -> Endpoint:
    return Endpoint(private=True)


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
            if not re.match(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/\S+$", arn):
                raise ValueError(f"'{arn}' is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
            if not groups:
                raise ValueError(f"{arn}: list the groups the role logs in as")
        return entries


class GkeLogin(Strict):
    """Google Groups for RBAC: the team groups are members of this group (gke-security-groups@<domain>)."""

    security_group: str = Field(alias="securityGroup", pattern=r"^gke-security-groups@[a-z0-9.-]+\.[a-z]+$")


class ExistingCluster(Strict):
    """A cluster that already exists (on-prem, or a laptop kind cluster), reached by kubeconfig context.
    `provides` lists what the site installed that the platform needs (infra/spec/prerequisites.py)."""

    context: str = Field(min_length=1)
    name: DnsLabel | None = None
    simulated_gpus: bool = Field(default=False, alias="simulatedGpus")
    # `preinstalled`: the hosts' image brings the driver (DGX OS, ...); the operator adds the rest.
    gpu_driver: Literal["operator", "preinstalled"] = Field(default="operator", alias="gpuDriver")
    provides: list[str] = Field(default_factory=list)

    @field_validator("provides")
    @classmethod
    def _vocabulary(cls, capabilities: list[str]) -> list[str]:
        for capability in capabilities:
            problem = capability_problem(capability)
            if problem:
                raise ValueError(problem)
        if len(set(capabilities)) != len(capabilities):
            raise ValueError("a capability is listed twice")
        return capabilities

    def login_mechanism(self) -> str | None:
        return None


class SystemPool(Strict):
    """The small CPU node pool for the platform's own controllers; not a Kueue flavor."""

    instance_type: str = Field(alias="instanceType")
    count: PositiveInt = 2

    @field_validator("instance_type")
    @classmethod
    def _cpu_machine(cls, name: str) -> str:
        if machine(name).gpu is not None:
            raise ValueError(f"{name} has GPUs: the system pool runs controllers on a CPU instance type")
        return name


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
        _exactly_one(self, "network")
        return self

    @property
    def zones(self) -> list[str]:
        if self.create is not None:
            return list(self.create.zones)
        return list(self.existing.private_subnets) if self.existing is not None else []


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
        _exactly_one(self, "network")
        return self


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
        _exactly_one(self, "network")
        return self


class EksCluster(Strict):
    name: DnsLabel | None = None
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
    network: AwsNetwork
    system_pool: SystemPool = Field(default_factory=lambda: SystemPool(instance_type="m7i.xlarge"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=_private)
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
    system_pool: SystemPool = Field(default_factory=lambda: SystemPool(instance_type="n2-standard-4"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=_private)
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


class AksCluster(Strict):
    name: DnsLabel | None = None
    location: str = Field(pattern=r"^[a-z0-9]+$")
    resource_group: str = Field(alias="resourceGroup", pattern=r"^[-\w.()]{1,90}$")
    create_resource_group: bool = Field(default=True, alias="createResourceGroup")
    network: AzureNetwork = Field(default_factory=lambda: AzureNetwork(create=AzureNewNetwork()))
    # `cloud`: AKS installs the driver and container runtime; `operator`: AKS skips it, the operator installs it.
    gpu_driver: Literal["cloud", "operator"] = Field(default="cloud", alias="gpuDriver")
    system_pool: SystemPool = Field(default_factory=lambda: SystemPool(instance_type="Standard_D4s_v5"),
                                    alias="systemPool")
    endpoint: Endpoint = Field(default_factory=_private)

    def login_mechanism(self) -> str | None:
        return None  # always Entra ID (its `provides`, infra/spec/clouds/azure.py)

    known_location = field_validator("location")(azure_location)


class ClusterSpec(Strict):
    existing: ExistingCluster | None = None
    eks: EksCluster | None = None
    gke: GkeCluster | None = None
    aks: AksCluster | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ClusterSpec:
        _exactly_one(self, "cluster kind")
        for kind, facts in CLOUDS.items():
            spec, cloud = getattr(self, kind), facts.cloud
            if spec is not None and cloud is not None and machine(spec.system_pool.instance_type).cloud != cloud:
                raise ValueError(f"{kind}.systemPool.instanceType: {spec.system_pool.instance_type} is not a "
                                 f"{cloud} instance type")
        return self

    @property
    def kind(self) -> str:
        return next(name for name, value in self if value is not None)

    @property
    def chosen(self) -> ExistingCluster | EksCluster | GkeCluster | AksCluster:
        return next(value for _, value in self if value is not None)

    def own_networks(self) -> dict[str, ipaddress.IPv4Network]:
        """The address ranges this stack gives the cluster, by their key under the cluster kind (none for a
        network that already exists or a cluster it does not create)."""
        ranges: dict[str, str] = {}
        if self.eks is not None and self.eks.network.create is not None:
            ranges["network.create.cidr"] = self.eks.network.create.cidr
        if self.gke is not None and self.gke.network.create is not None:
            ranges |= {f"network.create.{key}": getattr(self.gke.network.create, key)
                       for key in ("nodes", "pods", "services")}
        if self.aks is not None and self.aks.network.create is not None:
            ranges |= {"network.create.cidr": self.aks.network.create.cidr, "services": AKS_SERVICE_CIDR}
        return {key: ipaddress.IPv4Network(cidr) for key, cidr in ranges.items()}

    def identifier(self, stack: str) -> str:
        """The name used for cluster_identifier, the cloud cluster and labels; the stack name unless set."""
        return self.chosen.name or stack

    def gpu_stack(self) -> GpuStack:
        if self.existing is not None:
            operator = not self.existing.simulated_gpus
            return GpuStack(operator=operator, driver=operator and self.existing.gpu_driver == "operator",
                            toolkit=operator, cloud_sharing=False, reboot_for_mig=False)
        if self.gke is not None and self.gke.gpu_driver == "cloud":
            return GpuStack(operator=False, driver=False, toolkit=False, cloud_sharing=True, reboot_for_mig=False)
        # EKS' AL2023 NVIDIA AMI and AKS' GPU image bring the driver and the container toolkit.
        managed = self.gke or self.aks
        by_operator = managed is not None and managed.gpu_driver == "operator"
        return GpuStack(operator=True, driver=by_operator, toolkit=by_operator, cloud_sharing=False,
                        reboot_for_mig=True)

    def pool_problems(self, pools: Mapping[str, PoolSpec]) -> Iterator[tuple[str, str]]:
        """(path, message) for every pool that does not fit this cluster kind."""
        if self.existing is not None:
            for name, pool in pools.items():
                if pool.instance_type is not None:
                    yield (f"pools.{name}.instanceType", "an existing cluster's pools list their `nodes` and "
                           "declare `gpu`, `perNode`, `cpu` and `memory`; instance types are for eks, gke and aks")
                elif pool.nodes is None:
                    yield (f"pools.{name}.count", "an existing cluster's nodes are already there: list them by name "
                           "in `nodes` (Trainyard labels and taints them) instead of giving a `count`")
                if pool.fabric == "efa":
                    yield (f"pools.{name}.fabric", "EFA is an AWS fabric that EKS node groups bring: an existing "
                           "cluster's pools use infiniband, roce or none")
            return
        seen_agent_pools: dict[str, str] = {}
        for name, pool in pools.items():
            yield from self._cloud_pool_problems(name, pool)
            if self.aks is not None:
                agent = aks_pool_name(name)
                if not agent[:1].isalpha() or agent in seen_agent_pools or agent == "system":
                    yield (f"pools.{name}", f"AKS names the pool '{agent}' (at most 12 lowercase letters and "
                           "digits, starting with a letter, unique, not 'system'): rename the pool")
                seen_agent_pools[agent] = name

    def _cloud_pool_problems(self, name: str, pool: PoolSpec) -> Iterator[tuple[str, str]]:
        kind, where = self.kind, f"pools.{name}"
        facts = CLOUDS[kind]
        if pool.machine is None:
            yield (where, f"a {kind} pool names its `instanceType` (GPU model, GPUs, cpu and memory come from it)")
            return
        if pool.nodes is not None:
            yield (f"{where}.nodes", f"{kind} creates the nodes: give `count` or `autoscale` instead of node names")
        if pool.machine.cloud != facts.cloud:
            yield (f"{where}.instanceType", f"{pool.machine.name} is an {pool.machine.cloud} instance type; this "
                   f"stack's cluster is {kind} ({facts.cloud})")
        if pool.fabric != "none" and pool.fabric not in facts.fabrics:
            yield (f"{where}.fabric", f"{kind} pools do not set up {pool.fabric}: use fabric: none")
        if pool.zone is not None and not self._zone_ok(pool.zone):
            yield (f"{where}.zone", f"'{pool.zone}' is not a zone of this cluster ({self._zones_hint()})")
        if pool.compact and kind != "gke":
            yield (f"{where}.compact", "compact placement is a GKE node-pool policy (EKS EFA pools get a cluster "
                   "placement group): remove it")
        if self.eks is not None:
            if pool.fabric == "efa" and pool.zone is None:
                yield (f"{where}.zone", f"{pool.machine.name} uses EFA, whose placement group lives in one zone: "
                       "set `zone`, or fabric: none")
            if pool.capacity_type == "reserved" and (pool.zone is None or pool.fabric == "efa"):
                yield (f"{where}.zone", "an EKS capacity block runs in the zone of its reservation and brings its "
                       "own launch template: set `zone` and fabric: none")
        if pool.compact and pool.zone is None:
            yield (f"{where}.zone", "a compact placement policy needs the pool in one zone: set `zone`")
        if pool.reservation is not None and facts.reservation is not None:
            form, words = facts.reservation
            if not form.match(pool.reservation):
                yield (f"{where}.reservation", f"'{pool.reservation}' is not {words}")
        if self.gke is not None:
            zones = 1 if pool.zone else len(self.gke.zones)
            if pool.autoscale is None and pool.node_count % zones:
                yield (f"{where}.count", f"GKE spreads a fixed pool evenly over the cluster's {zones} zones: give "
                       f"a multiple of {zones}, or a `zone`")
            if len(name) > 40 or name == "system":
                yield (where, "GKE node pool names have at most 40 characters and 'system' is the system pool's: "
                       "rename the pool")
        if self.aks is not None and pool.mig is not None and aks_gpu_instance_profile(pool) is None:
            yield (f"{where}.mig.profile", f"AKS' gpuInstanceProfile (MIG1g ... MIG7g) gives each slice count "
                   f"its smallest-memory profile, so {pool.mig.profile} is not available: use one of "
                   f"{', '.join(aks_mig_profiles(pool.gpu or ''))}")

    def _zone_ok(self, zone: str) -> bool:
        if self.eks is not None:
            return zone in self.eks.network.zones
        if self.gke is not None:
            return gcp_zone_problem(self.gke.region, zone) is None
        return self.aks is not None and zone in azure_zones(self.aks.location)

    def _zones_hint(self) -> str:
        if self.eks is not None:
            return ", ".join(self.eks.network.zones)
        if self.gke is not None:
            return f"zones of {self.gke.region}"
        zones = azure_zones(self.aks.location) if self.aks is not None else ()
        return ", ".join(zones) if zones else "this location has no availability zones: drop `zone`"


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
