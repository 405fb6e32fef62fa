"""Kubeflow Pipelines (docs/pipelines.md): the stack's `pipelines` section, and the facts derived from it.

`pipelines` installs Kubeflow Pipelines in multi-user mode from the vendored Kubeflow Platform release, one
version only (the release's). Its state: the run database (MySQL, its journal of runs, experiments and metadata) and
the store of pipeline definitions (SeaweedFS) on volumes of the stack's own classes; the runs' artifacts in each
team's own bucket where the stack has an object store the KFP launcher writes (S3 on aws, GCS on gcp, Ceph RGW on
rook-ceph), else in the SeaweedFS store under per-namespace keys (nfs, azure: docs/pipelines.md says why). People
reach it through the front door (its identity header is who they are), so `pipelines` requires `frontDoor`.

Upstream names: `pipeline-install-config` keys, the `kfp-launcher` ConfigMap's `defaultPipelineRoot` and
`providers.{s3,gs}.default.{endpoint,region,disableSSL,forcePathStyle,credentials.{fromEnv,secretRef.{secretName,
accessKeyKey,secretKeyKey}}}` (KFP 2.16 backend/src/v2/config/s3.go), Argo's artifact repository `s3`/`gcs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from infra.spec.base import DnsLabel, Strict, VolumeSize
from infra.spec.input.keys import PIPELINES_DB_PASSWORD_KEY
from infra.spec.storage.classes import CHECKPOINTS, SCRATCH
from infra.spec.storage.keys import OBC_ACCESS_KEY, OBC_SECRET_KEY, RGW_REGION
from infra.spec.storage.model import StorageFacts

# The versions whose manifests are vendored (Kubeflow Platform 26.03 carries KFP 2.16.0, README table).
VENDORED_VERSIONS = ("2.16.0",)
DEFAULT_SIZE = "20Gi"  # what the vendored PVCs request (mysql-pv-claim, seaweedfs-pvc)
ARTIFACTS_PREFIX = "pipelines"  # the key prefix of pipeline artifacts in a team bucket: <prefix>/<namespace>/...
# The Argo log archive's key format inside that prefix (upstream's, under our prefix).
LOG_KEYS = ("{{workflow.name}}/{{workflow.creationTimestamp.Y}}/{{workflow.creationTimestamp.m}}/"
            "{{workflow.creationTimestamp.d}}/{{pod.name}}")
ArtifactMode = Literal["team-buckets", "seaweedfs"]


class PipelinesVolume(Strict):
    """A volume of Pipelines' state: its size, and its class (one of the stack's Retain classes; by default
    `checkpoints`, the stack's shared file class)."""

    size: VolumeSize = DEFAULT_SIZE
    storage_class: DnsLabel | None = Field(default=None, alias="storageClass")


class PipelinesSpec(Strict):
    """`version`: a version the vendored release carries. `database`: the MySQL volume (the run journal).
    `definitions`: the SeaweedFS volume holding uploaded pipeline definitions (and, on nfs and azure stacks, the
    runs' artifacts)."""

    version: str
    database: PipelinesVolume = Field(default_factory=PipelinesVolume)
    definitions: PipelinesVolume = Field(default_factory=PipelinesVolume)

    @field_validator("version")
    @classmethod
    def _vendored(cls, version: str) -> str:
        if version not in VENDORED_VERSIONS:
            raise ValueError(f"'{version}' is not in the vendored Kubeflow Platform release: use "
                             f"{', '.join(VENDORED_VERSIONS)} (another version needs its manifests vendored first: "
                             "docs/pipelines.md)")
        return version


def check_pipelines(spec: PipelinesSpec | None, front_door: bool) -> None:
    if spec is not None and not front_door:
        raise ValueError("pipelines: multi-user Pipelines knows people by the identity header the front door writes; "
                         "declare frontDoor (docs/front-door.md) or remove pipelines")


@dataclass(frozen=True)
class ArtifactStore:
    """Where the runs of one team namespace keep their artifacts and logs: the launcher's pipeline root and
    providers (ConfigMap kfp-launcher) and Argo's log archive (ConfigMap artifact-repositories)."""

    namespace: str
    team: str
    bucket: str
    root: str  # defaultPipelineRoot
    providers: Mapping[str, Any]
    argo: Mapping[str, Any]  # the artifact repository (archiveLogs + s3 | gcs)


@dataclass(frozen=True)
class PipelinesFacts:
    version: str
    database: tuple[str, str]  # (class, size)
    definitions: tuple[str, str]
    artifacts: ArtifactMode
    stores: tuple[ArtifactStore, ...]  # team-buckets: one per team namespace
    secret_key: str = PIPELINES_DB_PASSWORD_KEY

    def store(self, namespace: str) -> ArtifactStore | None:
        return next((s for s in self.stores if s.namespace == namespace), None)


def state_volume(where: str, volume: PipelinesVolume, storage: StorageFacts) -> tuple[str, str]:
    """A database's volume (Pipelines', a team model registry's): (class, size). The class must keep its volumes
    when their claim goes (reclaimPolicy Retain, as every data volume of the platform: the policy
    data-volumes-retain), which refuses the temporary `scratch` and, today, `block`; and must
    be a disk or file share, not a bucket mounted as files."""
    names = [k.name for k in storage.classes]
    name = volume.storage_class or CHECKPOINTS
    if name not in names:
        raise ValueError(f"{where}.storageClass: no class '{name}' on this stack: use one of {', '.join(names)}")
    klass = storage.klass(name)
    if klass.reclaim != "Retain":
        what = "holds temporary volumes (drill restores, scratch space)" if name == SCRATCH else \
            "deletes its volumes with their claim (reclaimPolicy Delete)"
        raise ValueError(f"{where}.storageClass: '{name}' {what}, and the run journal must outlive its pod and its "
                         f"claim: use {CHECKPOINTS} (reclaimPolicy Retain)")
    if klass.static:
        raise ValueError(f"{where}.storageClass: '{name}' mounts a bucket as files, which a database cannot run "
                         f"on: use {CHECKPOINTS}")
    return name, str(volume.size)


def _store(storage: StorageFacts, namespace: str, team: str, bucket: str, rook_secret: str) -> ArtifactStore:
    prefix = f"{ARTIFACTS_PREFIX}/{namespace}"
    logs = {"keyFormat": f"{prefix}/logs/{LOG_KEYS}"}
    if storage.profile == "gcp":
        return ArtifactStore(namespace, team, bucket, f"gs://{bucket}/{prefix}",
                             {"gs": {"default": {"credentials": {"fromEnv": True}}}},
                             {"archiveLogs": True, "gcs": {"bucket": bucket, **logs}})
    if storage.profile == "aws":
        endpoint = f"s3.{storage.region}.amazonaws.com"
        s3: dict[str, Any] = {"endpoint": endpoint, "region": storage.region, "forcePathStyle": False,
                              "credentials": {"fromEnv": True}}
        return ArtifactStore(namespace, team, bucket, f"s3://{bucket}/{prefix}", {"s3": {"default": s3}},
                             {"archiveLogs": True, "s3": {"endpoint": endpoint, "region": storage.region,
                                                          "bucket": bucket, "useSDKCreds": True, **logs}})
    assert storage.rgw_url is not None
    endpoint = storage.rgw_url.removeprefix("http://")
    s3 = {"endpoint": endpoint, "region": RGW_REGION, "disableSSL": True, "forcePathStyle": True,
          "credentials": {"secretRef": {"secretName": rook_secret, "accessKeyKey": OBC_ACCESS_KEY,
                                        "secretKeyKey": OBC_SECRET_KEY}}}
    return ArtifactStore(namespace, team, bucket, f"s3://{bucket}/{prefix}", {"s3": {"default": s3}},
                         {"archiveLogs": True, "s3": {
                             "endpoint": endpoint, "bucket": bucket, "insecure": True, **logs,
                             "accessKeySecret": {"name": rook_secret, "key": OBC_ACCESS_KEY},
                             "secretKeySecret": {"name": rook_secret, "key": OBC_SECRET_KEY}}})


def derive_pipelines(spec: PipelinesSpec | None, storage: StorageFacts) -> PipelinesFacts | None:
    """The volumes and each team namespace's artifact store. On rook-ceph the bucket's credentials are the claim's
    Secret, which Rook writes only in the team's first namespace: the storage layer copies it into the team's other
    namespaces (infra/spec/storage/keys.py), where their stores read it under the same name."""
    if spec is None:
        return None
    database = state_volume("pipelines.database", spec.database, storage)
    definitions = state_volume("pipelines.definitions", spec.definitions, storage)
    if storage.profile not in ("aws", "gcp", "rook-ceph"):
        return PipelinesFacts(spec.version, database, definitions, "seaweedfs", ())
    stores = tuple(_store(storage, ns, bucket.team, bucket.name, bucket.key)
                   for bucket in storage.buckets if bucket.team is not None for ns in bucket.readers)
    return PipelinesFacts(spec.version, database, definitions, "team-buckets", stores)
