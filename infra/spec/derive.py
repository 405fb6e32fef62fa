"""Facts computed once from a validated spec: flavors, capacity and quotas per resource, namespaces.

Components read these; nothing downstream recomputes a number.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from infra.spec import runtimes
from infra.spec.backup import BackupFacts, backup_of
from infra.spec.base import parse_quantity
from infra.spec.cluster import GpuStack
from infra.spec.frontdoor.web_access import FrontDoorFacts, MachineIssuer, derive_front_door, machine_issuer
from infra.spec.input.errors import SpecError, rooted
from infra.spec.input.keys import PLATFORM_KEY
from infra.spec.models.model import ModelsFacts, derive_models
from infra.spec.observability import ObservabilityFacts, derive_observability
from infra.spec.pipelines.model import PipelinesFacts, derive_pipelines
from infra.spec.platform import PlatformSpec
from infra.spec.pools import PoolSpec
from infra.spec.prerequisites import Prerequisites, derive_prerequisites
from infra.spec.queues.borrowing import whole_pool_problem
from infra.spec.queues.flavors import CPU, MEMORY, Flavor, build_flavor
from infra.spec.queues.queueing import QueueingFacts, derive_queueing
from infra.spec.storage.keys import derive_key_copies
from infra.spec.storage.model import TEAM_DATA_ACCOUNT, StorageFacts
from infra.spec.teams import TeamSpec, acceptance_namespace
from infra.spec.versions import Verdict, verdicts

if TYPE_CHECKING:
    from infra.spec.hybrid.model import Hybrid, Member


@dataclass(frozen=True)
class TeamFacts:
    name: str
    namespaces: tuple[str, ...]
    queue: str  # ClusterQueue name
    quota: Mapping[str, Mapping[str, Decimal]]  # flavor -> resource -> nominal quota
    lending: Mapping[str, Mapping[str, Decimal | None]]  # flavor -> resource -> lendingLimit
    weight: Decimal
    totals: Mapping[str, Decimal]  # resource -> sum over flavors (what a namespace may request)
    local_queue: str = ""  # the LocalQueue's name when it is not `queue` (a MultiKueue worker's: the worker)
    burst_queues: tuple[str, ...] = ()  # on a MultiKueue manager: the LocalQueues dispatching to workers

    @property
    def local_queues(self) -> tuple[str, ...]:
        """Every LocalQueue of the team's namespaces: its own, then one per worker it may burst to."""
        return (self.local_queue or self.queue, *self.burst_queues)

    @property
    def job_namespaces(self) -> tuple[str, ...]:
        """Where the team's jobs may run: its namespaces, and the acceptance namespace that `trainyard accept`
        creates and removes (its queue and admission policies treat it as the team's)."""
        return (*self.namespaces, acceptance_namespace(self.name))


@dataclass(frozen=True)
class Platform:
    stack: str
    spec: PlatformSpec
    cluster_name: str
    flavors: tuple[Flavor, ...]
    teams: tuple[TeamFacts, ...]
    covered_resources: tuple[str, ...]
    quota_sums: Mapping[str, Mapping[str, Decimal]]  # flavor -> resource -> sum of team nominal quotas
    shared_pool: Mapping[str, Mapping[str, Decimal]]  # flavor -> resource -> capacity no team is guaranteed
    version_verdicts: tuple[Verdict, ...]
    runtimes: tuple[Mapping[str, Any], ...]  # rendered ClusterTrainingRuntimes
    gpu_stack: GpuStack  # who installs the GPU driver, device plugin and sharing on this cluster
    storage: StorageFacts  # classes, volumes and buckets of this environment
    backup: BackupFacts  # Velero location, schedules, drill namespaces
    observability: ObservabilityFacts  # monitoring stack settings and the exporters this stack runs
    prerequisites: Prerequisites  # what the platform needs from the cluster, and who provides it
    front_door: FrontDoorFacts | None = None  # the web entry, its sign-in and who reaches what (web_access.py)
    pipelines: PipelinesFacts | None = None  # Kubeflow Pipelines' volumes and team artifact stores (pipelines.py)
    models: ModelsFacts | None = None  # each team's registry and serving budget (models/model.py)
    # flavor -> resource -> the teams' serving budgets there (teams.<t>.serving): kept out of Kueue's capacity
    serving_sums: Mapping[str, Mapping[str, Decimal]] = field(default_factory=lambda: MappingProxyType({}))
    source: Path | None = None  # the stack file it was loaded from (None: Pulumi config)
    member: Member | None = None  # which cluster of a multi-cluster stack this is (None: a single cluster)
    hybrid: Hybrid | None = None  # on the manager of a multi-cluster stack: every cluster and link

    @functools.cached_property
    def queueing(self) -> QueueingFacts:
        """Priorities, flavor order, Topologies and each team's ClusterQueue entries (infra/spec/queues/queueing.py)."""
        return derive_queueing(self.spec.queueing, self.spec.pools, self.spec.teams, self.flavors, self.teams,
                               self.covered_resources, self.shared_pool)

    def flavor(self, name: str) -> Flavor:
        return next(flavor for flavor in self.flavors if flavor.name == name)

    def pool(self, name: str) -> PoolSpec:
        return self.spec.pools[name]


def _share(quantity: Decimal, part: Decimal, whole: Decimal) -> Decimal:
    """The part/whole share of a pool-wide quantity, rounded down to a whole unit."""
    return (quantity * part / whole).to_integral_value(rounding="ROUND_FLOOR") if whole else Decimal(0)


def _team_quota(team: TeamSpec, flavor: Flavor, pool_name: str) -> tuple[dict[str, Decimal], Decimal | None]:
    quota = team.pool_quota(pool_name)
    gpus = Decimal(quota.gpus or 0)
    resources: dict[str, Decimal] = {}
    gpu_capacity = sum((flavor.capacity[r] for r in flavor.gpu_resources), Decimal(0))
    for resource in (CPU, MEMORY):
        declared = getattr(quota, resource)
        if declared is not None:
            resources[resource] = parse_quantity(declared)
        else:  # the GPUs' share of what the nodes let pods request, not of the machine's size
            resources[resource] = _share(flavor.allocatable[resource], gpus, gpu_capacity)
    for resource in flavor.gpu_resources:
        resources[resource] = gpus
    lending = quota.lending_limit
    return resources, Decimal(lending) if lending is not None else None


def _team(name: str, team: TeamSpec, spec: PlatformSpec, flavors: dict[str, Flavor]) -> TeamFacts:
    quota: dict[str, Mapping[str, Decimal]] = {}
    lending: dict[str, Mapping[str, Decimal | None]] = {}
    totals: dict[str, Decimal] = {}
    for pool_name in team.quota:
        flavor = flavors[pool_name]
        resources, lend = _team_quota(team, flavor, pool_name)
        quota[pool_name] = MappingProxyType(resources)
        lending[pool_name] = MappingProxyType({r: lend for r in flavor.gpu_resources})
        for resource, amount in resources.items():
            totals[resource] = totals.get(resource, Decimal(0)) + amount
    return TeamFacts(
        name=name,
        namespaces=tuple(spec.namespaces(name)),
        queue=name,
        quota=MappingProxyType(quota),
        lending=MappingProxyType(lending),
        weight=team.weight,
        totals=MappingProxyType(totals),
    )


def _serving_sums(spec: PlatformSpec, flavors: Mapping[str, Flavor]) -> dict[str, dict[str, Decimal]]:
    """What the teams' InferenceServices may request on each pool (their models namespaces' quotas): not Kueue's
    to lend or borrow, so it is held out of the cohort's shared pool and counted beside the nominal quotas."""
    sums: dict[str, dict[str, Decimal]] = {name: {} for name in flavors}
    for team in spec.teams.values():
        budget = team.serving
        if budget is None:  # its pool is one of this cluster's (check_models; workers carry no serving)
            continue
        flavor = flavors[budget.pool]
        amounts = {CPU: parse_quantity(budget.cpu), MEMORY: parse_quantity(budget.memory),
                   **{resource: Decimal(budget.gpus) for resource in flavor.gpu_resources}}
        for resource, amount in amounts.items():
            sums[budget.pool][resource] = sums[budget.pool].get(resource, Decimal(0)) + amount
    return sums


def _check_pools_fit_cluster(spec: PlatformSpec) -> None:
    problem = next(spec.cluster.pool_problems(spec.pools), None)
    if problem is not None:
        raise SpecError(f"{PLATFORM_KEY}.{problem[0]}", problem[1])


def derive(spec: PlatformSpec, stack: str) -> Platform:
    _check_pools_fit_cluster(spec)
    try:
        storage, backup = backup_of(spec, spec.cluster.identifier(stack))
        pipelines = derive_pipelines(spec.pipelines, storage)
        models = derive_models(spec.models, storage, {name: team.serving for name, team in spec.teams.items()})
        storage = replace(storage, key_copies=derive_key_copies(storage, pipelines is not None, {
            t.team: t.namespace for t in (models.teams if models else ())}))
    except ValueError as mistake:  # storage and backup checks need the derived facts
        raise rooted(PLATFORM_KEY, str(mistake)) from None
    mesh_agent = pipelines is not None and spec.front_door is not None  # Pipelines' sidecars keep Istio's CNI
    flavors = {name: build_flavor(name, pool, spec.cluster, mesh_agent) for name, pool in spec.pools.items()}
    teams = tuple(_team(name, team, spec, flavors) for name, team in spec.teams.items())
    gpu_names = sorted({r for flavor in flavors.values() for r in flavor.gpu_resources})
    serving = _serving_sums(spec, flavors)
    sums: dict[str, dict[str, Decimal]] = {name: {} for name in flavors}
    for team in teams:
        for flavor_name, resources in team.quota.items():
            for resource, amount in resources.items():
                sums[flavor_name][resource] = sums[flavor_name].get(resource, Decimal(0)) + amount
    platform = Platform(
        stack=stack,
        spec=spec,
        cluster_name=spec.cluster.identifier(stack),
        flavors=tuple(flavors.values()),
        teams=teams,
        covered_resources=(CPU, MEMORY, *gpu_names),
        quota_sums=MappingProxyType({k: MappingProxyType(v) for k, v in sums.items()}),
        shared_pool=MappingProxyType({
            name: MappingProxyType({r: max(flavor.max_allocatable.get(r, Decimal(0)) - sums[name].get(r, Decimal(0))
                                           - serving[name].get(r, Decimal(0)), Decimal(0))
                                    for r in (CPU, MEMORY, *gpu_names)})
            for name, flavor in flavors.items()
        }),
        version_verdicts=verdicts(spec.versions),
        runtimes=_runtimes(spec, flavors, storage.pod_annotations()),
        gpu_stack=spec.cluster.gpu_stack(),
        storage=storage,
        backup=backup,
        observability=_observability(spec, tuple(flavors.values()), tuple(k.name for k in storage.classes)),
        prerequisites=derive_prerequisites(spec, storage),
        front_door=derive_front_door(spec.front_door, spec.identity.platform_admins, spec.teams,
                                     {team.name: team.namespaces for team in teams},
                                     spec.observability.enabled and spec.observability.grafana,
                                     _machine_issuer(spec, stack), pipelines is not None),
        pipelines=pipelines,
        models=models,
        serving_sums=MappingProxyType({k: MappingProxyType(v) for k, v in serving.items()}),
    )
    problem = whole_pool_problem(platform.queueing, spec.queueing.default_borrowing_limit)
    if problem is not None:
        raise rooted(PLATFORM_KEY, problem)
    return platform


def _machine_issuer(spec: PlatformSpec, stack: str) -> MachineIssuer | None:
    if spec.front_door is None:
        return None
    gke = spec.cluster.gke
    where = (gke.project, gke.region, spec.cluster.identifier(stack)) if gke is not None else None
    return machine_issuer(spec.front_door, spec.cluster.kind, spec.laptop, where)


def _observability(spec: PlatformSpec, flavors: tuple[Flavor, ...], classes: tuple[str, ...]) -> ObservabilityFacts:
    local = spec.laptop
    # The same condition as the GPU component's: Trainyard installs the operator, whose DCGM exporter we scrape.
    dcgm = spec.cluster.gpu_stack().operator and any(flavor.gpu for flavor in flavors)
    gke = spec.cluster.gke
    return derive_observability(spec.observability, local, dcgm, classes, spec.cluster.kind,
                                (gke.project, gke.region) if gke is not None else None)


def _runtimes(spec: PlatformSpec, flavors: dict[str, Flavor],
              pod_annotations: Mapping[str, str]) -> tuple[Mapping[str, Any], ...]:
    rendered = runtimes.render_stack(spec.trainer, tuple(flavors.values()), spec.pools)
    for runtime in rendered:
        for job in runtimes.replicated_jobs(runtime):
            pod = job["template"]["spec"]["template"]
            # Every training pod reads the team's data as the team's data account: on cloud stacks the account the
            # cluster binds to the team bucket (and GCS FUSE mounts with the pod's identity).
            pod["spec"]["serviceAccountName"] = TEAM_DATA_ACCOUNT
            if pod_annotations:  # GCS FUSE volumes: every pod asks for the sidecar
                pod.setdefault("metadata", {}).setdefault("annotations", {}).update(pod_annotations)
    return rendered
