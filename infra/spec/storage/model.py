"""Storage: where training data lives per environment, and the classes, volumes and buckets derived from it.

A profile names the storage system (Rook-Ceph or NFS on-prem; EBS/EFS/FSx, PD/Filestore/GCS FUSE,
Azure Disk/Files/Blob in the clouds). Its default follows the cluster kind, so a stack without a
`storage:` section still gets a complete, retained storage layer.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import Field, field_validator

from infra.components import VELERO
from infra.spec.base import DnsLabel, Strict, VolumeSize
from infra.spec.clouds import CLOUD_STORAGE, CLOUDS
from infra.spec.clouds.aws import Aws
from infra.spec.clouds.azure import Azure
from infra.spec.clouds.gcp import Gcp
from infra.spec.cron import Cron
from infra.spec.names import dns1123_subdomain
from infra.spec.storage.classes import BLOCK, CHECKPOINTS, DATASETS, SCRATCH, Klass, SnapshotClass

if TYPE_CHECKING:
    from infra.spec.storage.keys import KeyCopy

Profile = Literal["rook-ceph", "nfs", "aws", "gcp", "azure"]  # the clouds' are CLOUD_STORAGE's keys (tested)

VELERO_VSC_LABEL = "velero.io/csi-volumesnapshot-class"
# Service accounts that act as cloud identities (workload identity): Velero's server, under which its node agent
# also runs, and per team the account its pods read and write the team's dataset bucket as.
VELERO_NAMESPACE, VELERO_ACCOUNT = VELERO.namespace, "velero-server"
TEAM_DATA_ACCOUNT = "datasets"


class RookCeph(Strict):
    """A Rook-Ceph cluster (names as in rook/rook deploy/examples)."""

    namespace: DnsLabel = "rook-ceph"
    cluster_id: DnsLabel = Field(default="rook-ceph", alias="clusterId")
    block_pool: DnsLabel = Field(default="replicapool", alias="blockPool")
    filesystem: DnsLabel = "myfs"
    data_pool: DnsLabel = Field(default="myfs-replicated", alias="dataPool")
    object_store: DnsLabel = Field(default="my-store", alias="objectStore")


class Nfs(Strict):
    """An NFS export served through csi-driver-nfs (nfs.csi.k8s.io)."""

    server: str = Field(min_length=1)
    share: str = Field(pattern=r"^/")

    @field_validator("server")
    @classmethod
    def _host(cls, server: str) -> str:
        """The driver mounts `server:share`: a host name or an IP address, nothing else."""
        try:
            ipaddress.ip_address(server)
            return server
        except ValueError:
            pass
        if dns1123_subdomain(server.lower()):
            raise ValueError(f"'{server}' is not a host name or an IP address: give the NFS server's name "
                             "(letters, digits, '-' and '.') or its address")
        return server


class TeamVolumes(Strict):
    datasets: VolumeSize = "10Ti"
    checkpoints: VolumeSize = "2Ti"


class Cleanup(Strict):
    """Finished TrainJobs are deleted this long after they finish (their JobSets and pods go with them)."""

    finished_train_jobs: str = Field(default="168h", alias="finishedTrainJobs", pattern=r"^[0-9]+h$")
    schedule: Cron = "17 * * * *"

    @field_validator("finished_train_jobs")
    @classmethod
    def _not_zero(cls, value: str) -> str:
        if int(value[:-1]) == 0:
            raise ValueError(f"'{value}' deletes a TrainJob the moment it finishes, before anyone reads its status "
                             "or logs: give at least 1h (default 168h)")
        return value


class StorageSpec(Strict):
    profile: Profile | None = None  # None: derived from the cluster kind
    region: str | None = None  # cloud profiles: where buckets live; defaults to the cluster's region
    bucket_prefix: str | None = Field(default=None, alias="bucketPrefix",
                                      pattern=r"^[a-z0-9][a-z0-9-]{1,40}$")
    rook_ceph: RookCeph = Field(default_factory=RookCeph, alias="rookCeph")
    nfs: Nfs | None = None
    aws: Aws = Field(default_factory=Aws)
    gcp: Gcp = Field(default_factory=Gcp)
    azure: Azure = Field(default_factory=Azure)
    volumes: TeamVolumes = Field(default_factory=TeamVolumes)
    teams: dict[DnsLabel, TeamVolumes] = Field(default_factory=dict)  # per-team size overrides
    cleanup: Cleanup = Field(default_factory=Cleanup)

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"^[a-z0-9-]+$", value):
            raise ValueError(f"'{value}' is not a cloud region name "
                             "(examples: eu-west-1, europe-west4, westeurope)")
        return value


@dataclass(frozen=True)
class Bucket:
    """An object storage bucket Trainyard owns; `team` is None for the stack's backup bucket."""

    key: str  # resource-name suffix: backups, <team>-datasets
    name: str  # the bucket's name in the object store
    team: str | None
    namespace: str  # where the on-prem claim (and its credentials) live
    readers: tuple[str, ...] = ()  # team buckets: every namespace of the team, whose `datasets` account uses it


@dataclass(frozen=True)
class Volume:
    team: str
    namespace: str
    name: str  # datasets | checkpoints
    klass: str
    size: str
    bucket: str | None = None  # static volumes: the bucket they mount


@dataclass(frozen=True)
class StorageFacts:
    profile: Profile
    region: str | None
    classes: tuple[Klass, ...]
    snapshot_classes: tuple[SnapshotClass, ...]
    buckets: tuple[Bucket, ...]
    volumes: tuple[Volume, ...]
    bucket_class: str | None  # on-prem: the StorageClass that ObjectBucketClaims use
    rgw_url: str | None  # on-prem: the Ceph RGW S3 endpoint inside the cluster
    azure_resource_group: str | None
    azure_account: str | None  # the storage account holding the blob containers
    azure_group_created: bool  # no resource group given: Trainyard creates one for the account
    # rook-ceph: the team bucket claims' Secrets copied into the team's other namespaces (keys.py), once Pipelines'
    # and serving's facts say which need them
    key_copies: tuple[KeyCopy, ...] = ()

    def klass(self, name: str) -> Klass:
        return next(k for k in self.classes if k.name == name)

    def pod_annotations(self) -> dict[str, str]:
        """What every training pod carries so that it can mount the team volumes."""
        return {key: value for klass in self.classes for key, value in klass.pod_annotations.items()}

    def bucket_users(self) -> tuple[tuple[str, str, Bucket], ...]:
        """(namespace, service account, bucket) for every bucket: the data account of each of its team's
        namespaces, or Velero's."""
        return tuple(user for b in self.buckets
                     for user in ([(ns, TEAM_DATA_ACCOUNT, b) for ns in b.readers] if b.team
                                  else [(VELERO_NAMESPACE, VELERO_ACCOUNT, b)]))


def _rook_classes(spec: RookCeph) -> tuple[list[Klass], list[SnapshotClass]]:
    def secrets(kind: str) -> dict[str, str]:
        return {
            f"csi.storage.k8s.io/{role}-secret-{part}": value
            for role, suffix in (("provisioner", "provisioner"), ("controller-expand", "provisioner"),
                                 ("node-stage", "node"))
            for part, value in (("name", f"rook-csi-{kind}-{suffix}"), ("namespace", spec.namespace))
        }

    rbd = "rook-ceph.rbd.csi.ceph.com"
    cephfs = "rook-ceph.cephfs.csi.ceph.com"
    block = {"clusterID": spec.cluster_id, "pool": spec.block_pool, "imageFormat": "2",
             "imageFeatures": "layering", "csi.storage.k8s.io/fstype": "ext4", **secrets("rbd")}
    shared = {"clusterID": spec.cluster_id, "fsName": spec.filesystem, "pool": spec.data_pool,
              **secrets("cephfs")}

    def snapshotter(kind: str) -> dict[str, str]:
        return {"clusterID": spec.cluster_id,
                "csi.storage.k8s.io/snapshotter-secret-name": f"rook-csi-{kind}-provisioner",
                "csi.storage.k8s.io/snapshotter-secret-namespace": spec.namespace}

    return (
        [Klass(BLOCK, rbd, block, "Delete", "WaitForFirstConsumer"),
         Klass(DATASETS, cephfs, shared, "Retain"), Klass(CHECKPOINTS, cephfs, shared, "Retain"),
         Klass(SCRATCH, cephfs, shared, "Delete")],
        [SnapshotClass("rbd", rbd, snapshotter("rbd")),
         SnapshotClass("cephfs", cephfs, snapshotter("cephfs"))],
    )


def _nfs_classes(spec: Nfs) -> tuple[list[Klass], list[SnapshotClass]]:
    driver = "nfs.csi.k8s.io"
    keep = {"server": spec.server, "share": spec.share, "onDelete": "retain"}
    drop = {"server": spec.server, "share": spec.share, "onDelete": "delete"}
    options = ("nfsvers=4.1",)
    return (
        [Klass(DATASETS, driver, keep, "Retain", mount_options=options),
         Klass(CHECKPOINTS, driver, keep, "Retain", mount_options=options),
         Klass(SCRATCH, driver, drop, "Delete", mount_options=options)],
        [SnapshotClass("nfs", driver)],
    )


def _cluster_field(cluster: Any, *names: str) -> str | None:
    """A field of the cluster kind's spec, read defensively: kinds differ in what they declare."""
    kind_spec = getattr(cluster, cluster.kind, None)
    for attribute in names:
        value = getattr(kind_spec, attribute, None)
        if isinstance(value, str):
            return value
    return None


def cluster_region(cluster: Any) -> str | None:
    return _cluster_field(cluster, "region", "location")


def derive_storage(spec: StorageSpec, cluster: Any, cluster_name: str,
                   teams: Mapping[str, tuple[str, ...]]) -> StorageFacts:
    """Every class, snapshot class, bucket and team volume of the stack. `teams`: team -> its namespaces."""
    own_cloud = CLOUDS[cluster.kind].storage_profile
    profile = cast(Profile, spec.profile or own_cloud)
    region = spec.region or cluster_region(cluster)
    cloud = CLOUD_STORAGE.get(profile)
    if cloud is not None and own_cloud in CLOUD_STORAGE and profile != own_cloud:
        raise ValueError(f"storage.profile: '{profile}' is another cloud's storage; this {cluster.kind} cluster has "
                         f"the {own_cloud} CSI drivers: use {own_cloud} (or rook-ceph, nfs)")
    if spec.region is not None and cloud is not None and cloud.region_check is not None:
        try:
            cloud.region_check(spec.region)
        except ValueError as error:
            raise ValueError(f"storage.region: {error}") from None
    if cloud is not None and region is None:
        raise ValueError(f"storage.region: profile '{profile}' keeps buckets in a region: set storage.region "
                         "(the cluster declares none)")
    if profile == "nfs" and spec.nfs is None:
        raise ValueError("storage.nfs: profile 'nfs' needs {server, share} of the export")
    if profile == "rook-ceph":
        classes, snapshots = _rook_classes(spec.rook_ceph)
    elif profile == "nfs":
        assert spec.nfs is not None
        classes, snapshots = _nfs_classes(spec.nfs)
    else:
        assert cloud is not None
        classes, snapshots = cloud.classes(spec, cluster, cluster_name)
    unknown = sorted(set(spec.teams) - set(teams))
    if unknown:
        raise ValueError(f"storage.teams.{unknown[0]}: no team named '{unknown[0]}'")
    prefix = spec.bucket_prefix or f"trainyard-{cluster_name}"
    # NFS stacks have no object store of their own: backups go to an external location (backup.location).
    with_buckets = profile != "nfs"
    buckets: list[Bucket] = []
    volumes: list[Volume] = []
    static_datasets = next(k for k in classes if k.name == DATASETS).static
    for team, namespaces in teams.items():
        primary = namespaces[0]
        sizes = spec.teams.get(team, spec.volumes)
        bucket = f"{prefix}-{team}-datasets"
        if len(bucket) > MAX_BUCKET:
            raise ValueError(_long_bucket(spec, prefix, team, bucket))
        if with_buckets:
            buckets.append(Bucket(f"{team}-datasets", bucket, team, primary, tuple(namespaces)))
        volumes.append(Volume(team, primary, DATASETS, DATASETS, str(sizes.datasets),
                              bucket if static_datasets else None))
        volumes.append(Volume(team, primary, CHECKPOINTS, CHECKPOINTS, str(sizes.checkpoints)))
    if with_buckets:
        buckets.append(Bucket("backups", f"{prefix}-backups", None, "velero"))
    azure_group = spec.azure.resource_group or _cluster_field(cluster, "resource_group", "resourceGroup")
    return StorageFacts(
        profile=profile,
        region=region,
        classes=tuple(classes),
        snapshot_classes=tuple(snapshots),
        buckets=tuple(buckets),
        volumes=tuple(volumes),
        bucket_class="object-buckets" if profile == "rook-ceph" else None,
        # Rook names the RGW service rook-ceph-rgw-<object store> (port 80 in its examples).
        rgw_url=f"http://rook-ceph-rgw-{spec.rook_ceph.object_store}.{spec.rook_ceph.namespace}.svc:80"
        if profile == "rook-ceph" else None,
        azure_resource_group=(azure_group or f"{prefix}-storage") if profile == "azure" else None,
        azure_group_created=profile == "azure" and azure_group is None,
        # Storage account names: 3-24 lowercase letters and digits, globally unique.
        azure_account=re.sub(r"[^a-z0-9]", "", prefix)[:24] if profile == "azure" else None,
    )


MAX_BUCKET = 63  # S3 and GCS bucket names; Azure container names too


def _long_bucket(spec: StorageSpec, prefix: str, team: str, bucket: str) -> str:
    """Blame the key the user wrote that makes <prefix>-<team>-datasets too long: the team name when a short
    one would fit, else the prefix (its own key, or the cluster name it defaults to)."""
    room = MAX_BUCKET - len(f"{prefix}--datasets")
    if room >= 1:
        return (f"teams.{team}: the team's dataset bucket '{bucket}' would be longer than {MAX_BUCKET} characters: "
                f"use a team name of at most {room} characters, or a shorter storage.bucketPrefix")
    where = "storage.bucketPrefix" if spec.bucket_prefix else "storage"
    return (f"{where}: the bucket prefix '{prefix}' leaves no room for team names in {MAX_BUCKET}-character bucket "
            "names: set a shorter storage.bucketPrefix")


def storage_of(spec: Any, cluster_name: str) -> StorageFacts:
    """The storage facts of a PlatformSpec (typed Any: platform.py imports this module)."""
    teams = {name: tuple(spec.namespaces(name)) for name in spec.teams}
    return derive_storage(spec.storage, spec.cluster, cluster_name, teams)
