"""Where the nodes come from. One key per kind; exactly one is set: an existing cluster (on-prem, kind), or a
managed cluster that Trainyard creates on AWS (eks), Google Cloud (gke) or Azure (aks) with its network.

The cluster's Kubernetes minor is `versions.kubernetes` (one pin for the control plane and the schema checks).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from infra.spec.base import DnsLabel, Strict
from infra.spec.clouds import CLOUDS, machine
from infra.spec.clouds.aws import EksCluster
from infra.spec.clouds.azure import (
    AKS_SERVICE_CIDR,
    AksCluster,
    aks_gpu_instance_profile,
    aks_mig_profiles,
    aks_pool_name,
    azure_zones,
)
from infra.spec.clouds.common import exactly_one
from infra.spec.clouds.gcp import GkeCluster, gcp_zone_problem
from infra.spec.pools import PoolSpec
from infra.spec.prerequisites import capability_problem


@dataclass(frozen=True)
class GpuStack:
    """Who runs each part of the NVIDIA software on GPU nodes of this cluster."""

    operator: bool  # Trainyard installs the NVIDIA GPU Operator
    driver: bool  # the operator installs the driver (else the node image or the cloud has it)
    toolkit: bool  # the operator installs the container toolkit (else the node image has it)
    cloud_sharing: bool  # the cloud's device plugin shares and partitions GPUs (GKE): MIG slices are nvidia.com/gpu
    reboot_for_mig: bool  # cloud VMs need a reboot to switch MIG mode (MIG manager WITH_REBOOT)
    # The GPU nodes' OS as the operator names it (`ubuntu24.04`): it appends `-<os>` to the driver image's tag.
    driver_os: str | None = None
    # A precompiled driver: the GPU nodes' kernel; the operator pulls `<branch>-<kernel>-<os>`.
    driver_kernel: str | None = None

    def driver_tag(self, version: str) -> str | None:
        """The tag the GPU Operator pulls for the chart's driver.version (NVIDIA's driver container naming:
        `595.91.07-ubuntu24.04`, precompiled `595-6.8.0-60-generic-ubuntu24.04`); None while the OS is unknown."""
        if not self.driver or self.driver_os is None:
            return None
        if self.driver_kernel is not None:
            return f"{version.split('.')[0]}-{self.driver_kernel}-{self.driver_os}"
        return f"{version}-{self.driver_os}"


class PrecompiledDriver(Strict):
    """A driver image built for the GPU nodes' kernel (`uname -r`): nothing is compiled or downloaded at run time,
    an air-gapped site's choice. NVIDIA builds them for the newest long-term branch and listed kernels only."""

    kernel: str = Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[-.A-Za-z0-9_]*$")


class ExistingCluster(Strict):
    """A cluster that already exists (on-prem, or a laptop kind cluster), reached by kubeconfig context.
    `provides` lists what the site installed that the platform needs (infra/spec/prerequisites.py)."""

    context: str = Field(min_length=1)
    name: DnsLabel | None = None
    simulated_gpus: bool = Field(default=False, alias="simulatedGpus")
    # `preinstalled`: the hosts' image brings the driver (DGX OS, ...); the operator adds the rest.
    gpu_driver: Literal["operator", "preinstalled"] = Field(default="operator", alias="gpuDriver")
    # With gpuDriver `operator`: the GPU nodes' OS as the operator tags driver images (ID and VERSION_ID of
    # /etc/os-release: `ubuntu24.04`, `rhel9.4`), and optionally a precompiled driver for their kernel.
    gpu_node_os: str | None = Field(default=None, alias="gpuNodeOs",
                                    pattern=r"^(ubuntu|rhel|rhcos|sles)[0-9]+(\.[0-9]+)?$")
    precompiled_driver: PrecompiledDriver | None = Field(default=None, alias="precompiledDriver")
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


class ClusterSpec(Strict):
    existing: ExistingCluster | None = None
    eks: EksCluster | None = None
    gke: GkeCluster | None = None
    aks: AksCluster | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ClusterSpec:
        exactly_one(self, "cluster kind")
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
            site = self.existing
            kernel = site.precompiled_driver.kernel if site.precompiled_driver else None
            return GpuStack(operator=operator, driver=operator and site.gpu_driver == "operator",
                            toolkit=operator, cloud_sharing=False, reboot_for_mig=False,
                            driver_os=site.gpu_node_os, driver_kernel=kernel)
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
            if not form.fullmatch(pool.reservation):
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


SELF_HOSTED = "self-hosted"


class CiSpec(Strict):
    """Where the workflows that deploy, preview and check drift for this stack run (.github/workflows). A cloud
    cluster's API endpoint admits only the stack's own networks (`endpoint.cidrs`) or its VPC (`private`), and
    GitHub's hosted runners come from neither. `runner`: the runs-on labels of a self-hosted runner inside those
    networks, e.g. [self-hosted, trainyard-aws]; each workflow's matrix runs the stack there."""

    runner: list[str] = Field(min_length=1)

    @field_validator("runner")
    @classmethod
    def _labels(cls, runner: list[str]) -> list[str]:
        # GitHub compares runner labels without regard to case: Self-Hosted and self-hosted are one label.
        if any(not label or label != label.strip() for label in runner) or \
                len({label.casefold() for label in runner}) != len(runner):
            raise ValueError("give each runner label once, non-empty, e.g. [self-hosted, trainyard-aws]")
        return runner

    @property
    def self_hosted(self) -> bool:
        return any(label.casefold() == SELF_HOSTED for label in self.runner)
