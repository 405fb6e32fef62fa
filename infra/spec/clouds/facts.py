"""The shape of one cloud's facts (CloudFacts) and the small pieces the cloud modules build them from: machine
sizes, region catalogues, storage profiles and the workload identity mechanism. No cloud's values live here."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from infra.spec.storage.classes import Klass, SnapshotClass

Fabric = Literal["none", "efa", "infiniband", "roce"]
Form = tuple[re.Pattern[str], str]  # a pattern and the words a refusal names it by


@dataclass(frozen=True)
class Machine:
    """An instance type (AWS), machine type (GCP) or VM size (Azure): vCPUs, memory, GPUs and fabric."""

    name: str
    cloud: str
    vcpu: int
    memory_gib: int
    gpu: str | None = None  # a GPU model name from catalog.GPU_MODELS
    gpus: int = 0
    fabric: Fabric = "none"  # the high-speed fabric the machine supports
    accelerator: str | None = None  # GKE guest accelerator type (nvidia-h100-80gb, ...)
    efa_interfaces: int = 0  # EFA interfaces a node of this size advertises (AWS EFA sizes only)

    def describe(self) -> str:
        gpus = f"{self.gpus} x {self.gpu}, " if self.gpu else ""
        return f"{gpus}{self.vcpu} vCPU, {self.memory_gib}Gi"


MIB, GIB = Decimal(2**20), Decimal(2**30)
# (up to this amount, the share of it reserved); the last tier (None) covers the rest.
Tiers = tuple[tuple[Decimal | None, Decimal], ...]
# The CPU the kubelet keeps on GKE (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, "Memory
# and CPU reservations") and on EKS (awslabs/amazon-eks-ami, its kube-reserved CPU): 6% of the first core, 1% of
# the next, 0.5% of the next 2, 0.25% of any core above 4.
CPU_TIERS: Tiers = ((Decimal(1), Decimal("0.06")), (Decimal(2), Decimal("0.01")), (Decimal(4), Decimal("0.005")),
                    (None, Decimal("0.0025")))
# The kubelet's hard eviction threshold memory.available<100Mi, which EKS, GKE and AKS (1.29+) all keep free.
EVICTION_MEMORY = 100 * MIB


def tiered(amount: Decimal, tiers: Tiers) -> Decimal:
    """The reserved part of `amount` under progressive tiers."""
    reserved, floor = Decimal(0), Decimal(0)
    for ceiling, share in tiers:
        top = amount if ceiling is None else min(amount, ceiling)
        if top > floor:
            reserved += (top - floor) * share
        floor = amount if ceiling is None else ceiling
    return reserved


@dataclass(frozen=True)
class NodeReserve:
    """What the kubelet keeps of one node for itself and the OS (kube-reserved, system-reserved and the eviction
    threshold): allocatable = capacity - this."""

    cpu: Decimal  # cores
    memory: Decimal  # bytes


def sizes(cloud: str, gpu: str | None, rows: tuple[tuple[str, int, int, int, Fabric], ...],
          accelerator: str | None = None) -> list[Machine]:
    """Rows of (name, vCPUs, GiB, GPUs, fabric) for one machine family."""
    return [Machine(name, cloud, vcpu, mem, gpu if gpus else None, gpus, fabric, accelerator if gpus else None)
            for name, vcpu, mem, gpus, fabric in rows]


def _unknown(what: str, value: str, known: Iterable[str], where: str) -> str:
    near = difflib.get_close_matches(value, list(known), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    return f"'{value}' is not {what}: {hint}known ones are listed in {where}"


def catalog_check(what: str, known: Collection[str], where: str) -> Callable[[str], str]:
    """A validator that passes a name of the catalog `known` and refuses any other with the closest ones."""
    def check(value: str) -> str:
        if value not in known:
            raise ValueError(_unknown(what, value, known, where))
        return value
    return check


@dataclass(frozen=True)
class IdentityMechanism:
    """How a cloud lets a Kubernetes service account act as a cloud identity (the upstream rules, stated here
    apart from the cluster layer that applies them)."""

    binding: str  # the resource type that grants a Kubernetes service account the bucket
    account: Callable[[Mapping[str, Any]], str]  # its inputs -> "namespace/name" of the account
    account_annotations: tuple[str, ...] = ()  # what the ServiceAccount must carry
    pod_labels: Mapping[str, str] = field(default_factory=dict)  # what its pods must carry


@dataclass(frozen=True)
class CloudStorage:
    """A cloud's storage profile: its CSI classes, its object storage and how Velero reaches it."""

    profile: str  # the storage.profile name
    # (StorageSpec, the cluster section, the cluster's name) -> classes, snapshot classes
    classes: Callable[[Any, Any, str], tuple[list[Klass], list[SnapshotClass]]]
    bucket_scheme: str  # team bucket URIs: <scheme>://<bucket>
    velero_provider: str
    velero_plugin: str  # the object-store plugin image
    region_check: Callable[[str], str] | None  # storage.region's validator; None: buckets take other locations too
    # What the site keeps so that the store's host names resolve into private addresses (egress.objectStore lists
    # those); None where its public names resolve into the address ranges the cloud publishes (S3).
    private_endpoint: str | None = None


@dataclass(frozen=True)
class ListPrice:
    """A machine's on-demand price per hour (USD, the whole machine, Linux) in one region. `source`: the provider's
    page and the date the page states when `verified`; otherwise it says plainly that nobody has checked the figure
    against that page, and the usage report marks every cost taken from it as unverified."""

    per_hour: Decimal
    source: str
    verified: bool = False


def priced(source: str, prices: Mapping[str, str], verified: bool = False) -> dict[str, ListPrice]:
    """Machine name -> ListPrice for figures read from one page (written as strings, so they stay exact)."""
    return {name: ListPrice(Decimal(price), source, verified) for name, price in prices.items()}


@dataclass(frozen=True)
class CloudFacts:
    """Everything Trainyard knows about one cluster kind, apart from the code that creates its cluster."""

    kind: str  # the key under `cluster:` (eks, gke, aks, existing)
    title: str  # how messages name the cluster kind's platform
    storage_profile: str  # the storage profile a stack gets when it names none
    cloud: str | None = None  # the machine catalogue's cloud (aws, gcp, azure); None: nodes already exist
    machines: tuple[Machine, ...] = ()
    fabrics: tuple[str, ...] = ()  # the fabrics its node pools set up
    reservation: Form | None = None  # what a reserved pool's `reservation` is
    group_form: Form | None = None  # the form of a group its login hands the API server; None: the provider's
    login_fix: str | None = None  # how a stack turns on group claims, when it must
    provides: Mapping[str, str] = field(default_factory=dict)  # capability -> the mechanism the cluster layer sets
    # Where the cluster the stack creates reports its ServiceAccount token issuer (an output of the cluster resource,
    # random per cluster: the cluster layer hands it over in ClusterContract.service_account_issuer); None: derived in
    # the spec (GKE) or declared (an existing cluster).
    service_account_issuer: str | None = None
    storage: CloudStorage | None = None
    workload_identity: IdentityMechanism | None = None
    # Where a pod fetches its workload identity's credentials, (range, TCP port): its team namespace's egress to the
    # object store opens them too (infra/spec/teams.py store_destinations).
    pod_credentials: tuple[tuple[str, int], ...] = ()
    managed_prometheus: str | None = None  # the managed Prometheus observability.managedPrometheus reaches
    managed_prometheus_need: str | None = None  # what it needs, when more than the remote write's identity
    control_plane_ports: frozenset[int] | None = None  # the only ports the control plane reaches private nodes on
    snapshot_controller_in_cluster: bool = False  # runs it as pods `trainyard verify` can see
    autoscaler_in_cluster: bool = False
    # A machine -> what its kubelet reserves, by the cloud's published formula; None: the nodes' declared cpu and
    # memory are taken as allocatable (an existing cluster's site knows its kubelet configuration).
    kubelet_reserve: Callable[[Machine], NodeReserve] | None = None
    # Machine name -> its on-demand list price with its source: the default price of a pool's GPU-hour
    # (infra/spec/usage.py) when the stack declares none.
    list_prices: Mapping[str, ListPrice] = field(default_factory=dict)
    # How reserved and Spot capacity is billed against that list price, with the page that says so: the list price
    # is then the most such a pool costs, a ceiling. Empty: no default, the pool declares its price.
    reserved_billing: str = ""
    spot_billing: str = ""
    # The audit trail's retention (audit.retentionDays): the days its store accepts, as a range or (when the store
    # takes only some values) the values; and where the entries land, for people (infra/spec/audit.py).
    audit_days: tuple[int, int] = (1, 3653)
    audit_day_values: tuple[int, ...] = ()
    audit_store: str = ""


def lookup(name: str, machines: Mapping[str, Machine]) -> Machine:
    """The catalog entry for an instance type; a ValueError suggests the nearest known names."""
    if name in machines:
        return machines[name]
    near = difflib.get_close_matches(name, machines, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ValueError(f"instance type '{name}' is not in the catalog: {hint}known types are listed in "
                     "infra/spec/clouds/<cloud>.py (add a new size there with its published figures)")
