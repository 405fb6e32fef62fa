"""The root of the stack schema: `trainyard:platform`, and the checks that span sections."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from infra.spec.audit import AuditSpec, check_audit
from infra.spec.backup import BackupSpec
from infra.spec.base import DnsLabel, Strict
from infra.spec.clouds import CLOUDS
from infra.spec.cluster import CiSpec, ClusterSpec
from infra.spec.frontdoor.model import FrontDoorSpec, check_front_door
from infra.spec.models.model import ModelsSpec, check_models, models_namespace
from infra.spec.namespaces import reserved_problem
from infra.spec.observability import ObservabilitySpec, check_managed_prometheus
from infra.spec.pipelines.model import PipelinesSpec, check_pipelines
from infra.spec.policy import PolicySpec
from infra.spec.pools import MAX_NODES, PoolSpec
from infra.spec.queues.queueing import Queueing, check_queueing
from infra.spec.runtimes import available as available_runtimes
from infra.spec.storage.model import StorageSpec
from infra.spec.teams import GROUP_PERSONAS, Egress, GroupName, TeamSpec, acceptance_namespace, check_group_personas
from infra.spec.versions import Versions, verdicts


class Identity(Strict):
    """How identity-provider groups appear in Kubernetes: `groupPrefix` is the API server's
    --oidc-groups-prefix (EKS `groupsPrefix`; empty on GKE and AKS, where groups are emails or object ids).
    `platformAdmins` are the groups bound cluster-wide to the trainyard-platform-admin role."""

    group_prefix: str = Field(default="", alias="groupPrefix", pattern=r"^\S*$")
    platform_admins: list[GroupName] = Field(default_factory=list, alias="platformAdmins")

    @field_validator("group_prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        if prefix.startswith("system:"):
            raise ValueError("must not start with 'system:' (reserved for Kubernetes' own groups)")
        return prefix

    @field_validator("platform_admins")
    @classmethod
    def _distinct(cls, groups: list[str]) -> list[str]:
        if len(set(groups)) != len(groups):
            raise ValueError("a group is listed twice")
        return groups

    def group(self, name: str) -> str:
        """The group name as the API server sees it, for RBAC subjects."""
        return f"{self.group_prefix}{name}"


Fabric = Literal["efa", "infiniband", "roce"]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class TrainerSpec(Strict):
    """The ClusterTrainingRuntimes the stack installs (files in runtimes/; all of them unless listed), and
    their `<runtime>-<pool>` variants for pools with a fabric or a topology: `fabricEnv` adds to or overrides
    the NCCL/libfabric settings per fabric, `topology` makes the variants prefer or require the pool's
    narrowest topology level."""

    runtimes: list[str] = Field(default_factory=lambda: list(available_runtimes()))
    fabric_env: dict[Fabric, dict[EnvName, str]] = Field(default_factory=dict, alias="fabricEnv")
    topology: Literal["preferred", "required"] = "preferred"

    @field_validator("runtimes")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        known = available_runtimes()
        for name in names:
            if name not in known:
                raise ValueError(f"unknown runtime '{name}': use one of {', '.join(known)}")
        if len(set(names)) != len(names):
            raise ValueError("a runtime is listed twice")
        return names


class PlatformSpec(Strict):
    cluster: ClusterSpec
    identity: Identity = Field(default_factory=Identity)
    versions: Versions = Field(default_factory=Versions)
    pools: dict[DnsLabel, PoolSpec]
    teams: dict[DnsLabel, TeamSpec] = Field(default_factory=dict)
    queueing: Queueing = Field(default_factory=Queueing)
    trainer: TrainerSpec = Field(default_factory=TrainerSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    backup: BackupSpec = Field(default_factory=BackupSpec)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec)
    audit: AuditSpec = Field(default_factory=AuditSpec)
    front_door: FrontDoorSpec | None = Field(default=None, alias="frontDoor")
    ci: CiSpec | None = None
    pipelines: PipelinesSpec | None = None
    models: ModelsSpec | None = None
    # where team pods go outside the cluster: the object store, the model hub (infra/spec/teams.py)
    egress: Egress = Field(default_factory=Egress)

    @model_validator(mode="after")
    def _cross_checks(self) -> PlatformSpec:
        if not self.pools:
            raise ValueError("declare at least one pool")
        _check_nodes_unique(self.pools)
        _check_team_quotas(self.pools, self.teams)
        _check_namespaces_unique(self.teams, self.models is not None)
        _check_rook_namespace(self.teams, self.storage.rook_ceph.namespace)
        check_queueing(self.queueing, self.pools, self.teams)
        check_managed_prometheus(self.observability, self.cluster.kind)
        check_audit(self.audit, self.cluster.kind)
        _check_group_forms(self.cluster.kind, self.identity, self.teams)
        check_group_personas(self.teams)
        self._check_front_door()
        check_pipelines(self.pipelines, self.front_door is not None)
        check_models(self.models, self.front_door is not None, {n: t.serving for n, t in self.teams.items()},
                     {n: p.is_gpu for n, p in self.pools.items()})
        for verdict in verdicts(self.versions):
            if not verdict.ok:
                raise ValueError(f"versions: incompatible pins {verdict.pair}: {verdict.reason}")
        for field, chart in self.versions.charts().items():
            if not chart.digest:
                raise ValueError(f"versions.{field}: '{chart.version}' has no pinned chart digest ({chart.archive}): "
                                 f"run `scripts/fetch-charts --bump {chart.name} {chart.version}` on a connected "
                                 "machine and add the line it prints to CHART_DIGESTS in infra/spec/versions.py")
        return self

    def namespaces(self, team: str) -> list[str]:
        """The team's namespaces: those it declares (default: its name), then its models namespace when the stack
        declares `models`."""
        own = list(self.teams[team].namespaces or [team])
        return [*own, models_namespace(team)] if self.models is not None else own

    @property
    def laptop(self) -> bool:
        """A laptop stack: a kind cluster with simulated GPU capacity (docs/local.md)."""
        return self.cluster.existing is not None and self.cluster.existing.simulated_gpus

    def _check_front_door(self) -> None:
        declared = {*self.identity.platform_admins, *(group for team in self.teams.values()
                                                      for persona in GROUP_PERSONAS
                                                      for group in getattr(team.groups, persona))}
        eks = self.cluster.eks
        oidc = eks.login.oidc if eks is not None else None
        check_front_door(self.front_door, self.laptop, declared,
                         (oidc.issuer_url, oidc.groups_claim) if oidc is not None else None)


def _check_group_forms(kind: str, identity: Identity, teams: dict[str, TeamSpec]) -> None:
    """The form of a group as the cloud's login hands it to the API server (CloudFacts.group_form); a binding to a
    name of another form is never used. EKS (OIDC claims, access entries) and existing clusters name groups as
    their provider does."""
    group_form = CLOUDS[kind].group_form
    if group_form is None:
        return
    pattern, form = group_form
    if identity.group_prefix:
        raise ValueError(f"identity.groupPrefix: '{identity.group_prefix}' would be put before every group, but "
                         f"{kind}'s login gives groups without a prefix: set it to ''")
    named = [("identity.platformAdmins", group) for group in identity.platform_admins] + [
        (f"teams.{name}.groups.{persona}", group) for name, team in teams.items()
        for persona in GROUP_PERSONAS for group in getattr(team.groups, persona)]
    for where, group in named:
        if not pattern.fullmatch(group):
            raise ValueError(f"{where}: '{group}' is not a group {kind}'s login produces, so the binding would "
                             f"never apply: give {form}")


def _check_nodes_unique(pools: dict[str, PoolSpec]) -> None:
    total = sum(pool.max_node_count for pool in pools.values())
    if total > MAX_NODES:
        biggest = max(pools, key=lambda name: pools[name].max_node_count)
        raise ValueError(f"pools.{biggest}: the pools add up to {total} nodes, more than the {MAX_NODES} a Kubernetes "
                         "cluster supports: check the node counts")
    owner: dict[str, str] = {}
    for name, pool in pools.items():
        for node in pool.nodes or []:
            if node in owner:
                raise ValueError(f"pools.{name}.nodes: node '{node}' already belongs to pool '{owner[node]}'")
            owner[node] = name


def _check_team_quotas(pools: dict[str, PoolSpec], teams: dict[str, TeamSpec]) -> None:
    for team_name, team in teams.items():
        for pool_name in team.quota:
            where = f"teams.{team_name}.quota.{pool_name}"
            if pool_name not in pools:
                raise ValueError(f"{where}: no pool named '{pool_name}': declare it under pools or use one of "
                                 f"{', '.join(sorted(pools))}")
            quota, pool = team.pool_quota(pool_name), pools[pool_name]
            if not pool.is_gpu and quota.gpus:
                raise ValueError(f"{where}: pool '{pool_name}' has no GPUs: give {{cpu: N, memory: M}} instead")
            if pool.is_gpu and quota.gpus is None:
                raise ValueError(f"{where}: give `gpus`, the team's guaranteed GPUs in this pool")
            if quota.lending_limit is not None and quota.gpus is not None and quota.lending_limit > quota.gpus:
                raise ValueError(f"{where}.lendingLimit: {quota.lending_limit} is above the team's "
                                 f"{quota.gpus} GPUs: a team can lend at most what it has")


def _check_rook_namespace(teams: dict[str, TeamSpec], rook: str) -> None:
    for team_name, team in teams.items():
        if rook in (team.namespaces or [team_name]):
            where = f"teams.{team_name}" + (".namespaces" if team.namespaces else "")
            raise ValueError(f"{where}: namespace '{rook}' is reserved: it is the Rook-Ceph cluster's "
                             "(storage.rookCeph.namespace); choose another name")


def _check_namespaces_unique(teams: dict[str, TeamSpec], models: bool) -> None:
    # Each team's acceptance namespace is reserved too: `trainyard accept` creates and deletes it; so is its
    # models namespace on a stack with `models`.
    owner = {acceptance_namespace(name): f"{name} (its acceptance runs)" for name in teams}
    if models:
        owner.update({models_namespace(name): f"{name} (its models)" for name in teams})
    for team_name, team in teams.items():
        if team.namespaces is None and (problem := reserved_problem(team_name)):
            raise ValueError(f"teams.{team_name}: a team's namespace is its name, and {problem}: rename the team "
                             "or give it `namespaces`")
        for namespace in team.namespaces or [team_name]:
            if namespace in owner:
                raise ValueError(f"teams.{team_name}.namespaces: '{namespace}' already belongs to team "
                                 f"'{owner[namespace]}'")
            owner[namespace] = team_name
