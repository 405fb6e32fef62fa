"""Model versions and serving (docs/models.md): the stack's `models` section, each team's `serving` budget, and
the facts derived from them.

`models` installs Kubeflow Model Registry and KServe from the vendored Kubeflow Platform release, one version of
each (the release's). Each team gets a models namespace, `<team>-models`, one of its own namespaces (its access,
network policies, data account and profile marks as the others'), which holds:
- the team's own Model Registry server and its database (on a Retain class of the stack), because the registry
  has no authorization of its own (kubeflow-platform reference §5): a registry per team keeps one team's models
  out of another's reach by the network and by who may route to it, not by trusting a shared server;
- the team's InferenceServices, whose pods are not Kueue's (Kueue cannot admit a Deployment's pods without
  gating every pod of the team's namespaces): they run on a budget carved out of one pool, the namespace's
  ResourceQuota, counted against the pool's capacity beside the teams' Kueue quotas.
People reach each registry through the front door (its routes and who may write: infra/platform), so `models`
requires `frontDoor`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field, field_validator

from infra.spec.base import Strict, VolumeSize
from infra.spec.input.keys import MODEL_REGISTRY_DB_PASSWORD_KEY
from infra.spec.pipelines.model import PipelinesVolume, state_volume
from infra.spec.storage.model import StorageFacts
from infra.spec.teams import ServingBudget

# The versions whose manifests are vendored (Kubeflow Platform 26.03's README table).
REGISTRY_VERSIONS = ("0.3.7",)
SERVING_VERSIONS = ("0.16.0",)
REGISTRY_DB_SIZE = "10Gi"  # what the vendored claim (metadata-mysql) requests
MODELS_SUFFIX = "-models"
# The registry's Service and REST port as the vendored overlays name them (overlays/db, base).
REGISTRY_SERVICE, REGISTRY_PORT = "model-registry-service", 8080
REGISTRY_ROUTE = "/model-registry"  # the front door's path prefix: /model-registry/<team>/


def models_namespace(team: str) -> str:
    """The team's models namespace: its registry and its InferenceServices."""
    return f"{team}{MODELS_SUFFIX}"


def _vendored(what: str, versions: tuple[str, ...]) -> Callable[[str], str]:
    def check(version: str) -> str:
        if version not in versions:
            raise ValueError(f"'{version}' is not the vendored Kubeflow Platform release's {what}: use "
                             f"{', '.join(versions)} (another version needs its manifests vendored first: "
                             "docs/models.md)")
        return version
    return check


class RegistryVolume(PipelinesVolume):
    size: VolumeSize = REGISTRY_DB_SIZE


class RegistrySpec(Strict):
    """`version`: the Model Registry version the vendored release carries. `database`: each team registry's
    MySQL volume (size and class, one of the stack's Retain classes; default `checkpoints`)."""

    version: str
    database: RegistryVolume = Field(default_factory=RegistryVolume)

    _version = field_validator("version")(_vendored("Model Registry", REGISTRY_VERSIONS))


class ServingSpec(Strict):
    """`version`: the KServe version the vendored release carries (installed in Standard mode: no Knative)."""

    version: str

    _version = field_validator("version")(_vendored("KServe", SERVING_VERSIONS))


class ModelsSpec(Strict):
    registry: RegistrySpec
    serving: ServingSpec


def check_models(spec: ModelsSpec | None, front_door: bool, budgets: dict[str, ServingBudget | None],
                 pools: dict[str, bool]) -> None:
    """`pools`: pool name -> whether it has GPUs."""
    if spec is not None and not front_door:
        raise ValueError("models: people reach the registries through the front door, which decides who may read "
                         "and write each team's; declare frontDoor (docs/front-door.md) or remove models")
    for team, budget in budgets.items():
        if spec is not None and len(models_namespace(team)) > 63:
            raise ValueError(f"teams.{team}: its models namespace '{models_namespace(team)}' is longer than 63 "
                             "characters: shorten the team's name")
        if budget is None:
            continue
        where = f"teams.{team}.serving"
        if spec is None:
            raise ValueError(f"{where}: serving needs the stack's `models` section (KServe and the registries): "
                             "declare it (docs/models.md) or remove serving")
        if budget.pool not in pools:
            raise ValueError(f"{where}.pool: no pool named '{budget.pool}': use one of {', '.join(sorted(pools))}")
        if budget.gpus and not pools[budget.pool]:
            raise ValueError(f"{where}.gpus: pool '{budget.pool}' has no GPUs: serve on a GPU pool or set gpus: 0")


@dataclass(frozen=True)
class TeamModels:
    """One team's registry and serving: its models namespace, the registry's in-cluster URL and its route at the
    front door, where its models live (its bucket's URI, under which its InferenceServices may read; '' without
    one), and its serving budget (None: the team registers models but serves none). On rook-ceph the bucket's keys
    reach the models namespace as a copy of the claim's Secret (StorageFacts.key_copies)."""

    team: str
    namespace: str
    registry_url: str
    route: str
    artifacts: str
    serving: ServingBudget | None


@dataclass(frozen=True)
class ModelsFacts:
    registry_version: str
    serving_version: str
    database: tuple[str, str]  # (class, size) of each team registry's MySQL volume
    teams: tuple[TeamModels, ...]
    secret_key: str = MODEL_REGISTRY_DB_PASSWORD_KEY

    def team(self, name: str) -> TeamModels:
        return next(t for t in self.teams if t.team == name)

    def by_namespace(self, namespace: str) -> TeamModels | None:
        return next((t for t in self.teams if t.namespace == namespace), None)


def _artifacts(storage: StorageFacts, team: str) -> str:
    """The team bucket's URI, where Pipelines' launcher writes the team's runs' artifacts (its pipeline root is
    inside it: infra/spec/pipelines/model.py), so a registered model is served from where its run wrote it; '' on
    stacks whose object store the launcher and KServe do not read (nfs, azure)."""
    bucket = next((b for b in storage.buckets if b.team == team), None)
    if bucket is None or storage.profile not in ("aws", "gcp", "rook-ceph"):
        return ""
    return f"{'gs' if storage.profile == 'gcp' else 's3'}://{bucket.name}/"


def derive_models(spec: ModelsSpec | None, storage: StorageFacts,
                  budgets: dict[str, ServingBudget | None]) -> ModelsFacts | None:
    """`budgets`: team -> its serving budget (None: none), in the stack's team order."""
    if spec is None:
        return None
    database = state_volume("models.registry.database", spec.registry.database, storage)
    teams = tuple(
        TeamModels(team, models_namespace(team),
                   f"http://{REGISTRY_SERVICE}.{models_namespace(team)}.svc.cluster.local:{REGISTRY_PORT}",
                   f"{REGISTRY_ROUTE}/{team}/", _artifacts(storage, team), budget)
        for team, budget in budgets.items())
    return ModelsFacts(spec.registry.version, spec.serving.version, database, teams)
