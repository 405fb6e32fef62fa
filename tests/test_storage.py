"""Storage: classes per environment, retained team volumes, versioned buckets, and every stateful resource
(CRDs, clusters, node pools, buckets, data volumes) protected or retained under mocks."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import pytest

from infra.checks.backup import check_bucket_versioning, check_data_volumes
from infra.checks.context import Context
from infra.commands import main
from infra.offline import engine
from infra.platform.storage import VOLUME_LABEL
from infra.spec.storage.model import VELERO_VSC_LABEL, storage_of
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack

BUCKET_TYPES = {"aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket", "azure-native:storage:BlobContainer"}
STORE_TYPES = {"azure-native:storage:StorageAccount", "aws:efs/fileSystem:FileSystem"}
CLUSTER_TYPES = {
    "eks:index:Cluster", "eks:index:ManagedNodeGroup", "eks:index:NodeGroup", "eks:index:NodeGroupV2",
    "aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool", "azure-native:containerservice:ManagedCluster",
    "azure-native:containerservice:AgentPool", "kubernetes:core/v1:NodePatch",
}
# What each environment is built on (the list), by the driver names the CSI projects publish.
PROVISIONERS = {
    "rook-ceph": {"rook-ceph.rbd.csi.ceph.com", "rook-ceph.cephfs.csi.ceph.com"},
    "nfs": {"nfs.csi.k8s.io"},
    "aws": {"ebs.csi.aws.com", "efs.csi.aws.com"},
    "gcp": {"pd.csi.storage.gke.io", "filestore.csi.storage.gke.io", "gcsfuse.csi.storage.gke.io"},
    "azure": {"disk.csi.azure.com", "file.csi.azure.com", "blob.csi.azure.com"},
}
VARIANTS = {
    "aws": {"profile": "aws", "region": "eu-west-1",
            "aws": {"fsxSubnetId": "subnet-0a1b2c", "fsxSecurityGroupIds": ["sg-1"]}},
    "gcp": {"profile": "gcp", "region": "europe-west4"},
    "azure": {"profile": "azure", "region": "westeurope"},
    "nfs": {"profile": "nfs", "nfs": {"server": "nfs.lab.internal", "share": "/export/train"}},
}


@functools.cache  # three tests read the gcp variant, two the aws and azure ones: one run each per worker
def _variant(profile: str) -> tuple[Any, Any]:
    raw = raw_platform("onprem-lab")
    raw["storage"] = VARIANTS[profile]
    if profile == "nfs":
        raw["backup"] = {"location": {"bucket": "lab-velero", "s3Url": "https://s3.lab.internal"}}
    from infra.spec import validate

    return validate(raw, "onprem-lab"), run_raw("onprem-lab", raw)


def _protected(record: engine.Registration) -> bool:
    return record.protect or record.retain_on_delete


@pytest.mark.parametrize("stack", STACKS)
def test_stateful_resources_are_protected_or_retained(stack: str) -> None:
    platform, capture = platform_of(stack), capture_of(stack)
    facts = storage_of(platform.spec, platform.cluster_name)
    buckets = [r for r in capture.resources if r.type in BUCKET_TYPES
               or (r.type == "kubernetes:yaml/v2:ConfigGroup" and r.name.startswith("obc-"))]
    assert len(buckets) == len(facts.buckets)
    for record in buckets + [r for r in capture.resources if r.type in STORE_TYPES]:
        assert record.protect, f"{record.type} {record.name} is not protected"
    volumes = [r for r in capture.resources if r.type in {"kubernetes:core/v1:PersistentVolumeClaim",
                                                          "kubernetes:core/v1:PersistentVolume"}
               and VOLUME_LABEL in r.inputs.get("metadata", {}).get("labels", {})]
    claims = [r for r in volumes if r.type.endswith("PersistentVolumeClaim")]
    assert len(claims) == 2 * len(platform.teams)  # a datasets and a checkpoints volume per team
    for record in volumes + [r for r in capture.resources if r.type in CLUSTER_TYPES]:
        assert _protected(record), f"{record.type} {record.name} is neither protected nor retained"


@pytest.mark.parametrize("stack", STACKS)
def test_every_chart_retains_the_crds_it_installs(stack: str) -> None:
    """The offline engine passes what a chart installs through the chart's own transforms, as Pulumi's engine does
    (tests/test_offline_engine.py): a chart without helm_chart()'s transform would install deletable CRDs."""
    crds = [r for r in capture_of(stack).resources if r.chart and r.inputs["kind"] == "CustomResourceDefinition"]
    assert {"kubernetes:helm.sh/v4:Chart::velero", "kubernetes:helm.sh/v4:Chart::kueue"} <= {r.chart for r in crds}
    assert [r.name for r in crds if not r.retain_on_delete] == []
    others = [r for r in capture_of(stack).resources if r.chart and r.inputs["kind"] != "CustomResourceDefinition"
              and not (r.inputs["kind"] == "PersistentVolumeClaim" and (
                  r.chart.endswith("::pipelines") or r.chart.rpartition("::")[2].startswith("model-registry-")))]
    assert others and not any(r.retain_on_delete or r.protect for r in others)


@pytest.mark.parametrize("stack", STACKS)
def test_team_volumes_are_rwx_on_retained_classes(stack: str) -> None:
    platform, capture = platform_of(stack), capture_of(stack)
    classes = {c["metadata"]["name"]: c for c in kube_objects(capture, "StorageClass")}
    for team in platform.teams:
        claims = {c["metadata"]["name"]: c for c in kube_objects(capture, "PersistentVolumeClaim")
                  if c["metadata"]["namespace"] in team.namespaces}
        assert {"datasets", "checkpoints"} <= set(claims)
        for name, claim in claims.items():
            # a team registry's MySQL volume is one pod's (upstream's ReadWriteOnce); the team's volumes are shared
            registry = name == "metadata-mysql" and claim["metadata"]["namespace"].endswith("-models")
            assert claim["spec"]["accessModes"] == (["ReadWriteOnce"] if registry else ["ReadWriteMany"])
            assert classes[claim["spec"]["storageClassName"]]["reclaimPolicy"] == "Retain"
    assert classes["scratch"]["reclaimPolicy"] == "Delete"  # drill restores and temporary volumes


@pytest.mark.parametrize("profile", ["rook-ceph", *VARIANTS])
def test_each_environment_uses_its_drivers_and_labels_one_snapshot_class_per_driver(profile: str) -> None:
    capture = capture_of("onprem-lab") if profile == "rook-ceph" else _variant(profile)[1]
    classes = kube_objects(capture, "StorageClass")
    provisioners = {c["provisioner"] for c in classes if c["metadata"]["name"] != "object-buckets"}
    assert PROVISIONERS[profile] <= provisioners
    if profile == "aws":
        assert "fsx.csi.aws.com" in provisioners  # FSx for Lustre once the stack names its subnet
    groups = [r for r in capture.resources
              if r.type == "kubernetes:yaml/v2:ConfigGroup" and r.name == "snapshot-classes"]
    snapshot_classes = [o for g in groups for o in g.inputs["objs"]]
    drivers = [o["driver"] for o in snapshot_classes]
    assert len(drivers) == len(set(drivers)), "Velero needs exactly one labelled class per driver"
    assert set(drivers) <= provisioners
    for vsc in snapshot_classes:
        assert vsc["metadata"]["labels"][VELERO_VSC_LABEL] == "true"
    assert drivers, f"{profile}: no snapshot class"


@pytest.mark.parametrize("profile", ["aws", "gcp", "azure"])
def test_cloud_buckets_are_versioned(profile: str) -> None:
    platform, capture = _variant(profile)
    ctx = Context(platform, capture, None)
    assert check_bucket_versioning(ctx) == []
    versioning = {"aws": "aws:s3/bucketVersioning:BucketVersioning", "gcp": "gcp:storage/bucket:Bucket",
                  "azure": "azure-native:storage:BlobServiceProperties"}[profile]
    without = [_unversioned(r) if r.type == versioning else r for r in capture.resources]
    findings = check_bucket_versioning(Context(platform, dataclasses.replace(capture, resources=tuple(without)), None))
    assert len(findings) == len(storage_of(platform.spec, platform.cluster_name).buckets)


def _unversioned(record: engine.Registration) -> engine.Registration:
    inputs = {k: v for k, v in record.inputs.items()
              if k not in {"versioning", "versioningConfiguration", "isVersioningEnabled"}}
    return dataclasses.replace(record, inputs=inputs)


def test_a_data_volume_on_a_delete_class_is_reported() -> None:
    platform, capture = platform_of("onprem-lab"), capture_of("onprem-lab")
    assert check_data_volumes(Context(platform, capture, None)) == []
    records = []
    for record in capture.resources:
        if record.inputs.get("kind") == "StorageClass" and record.inputs["metadata"]["name"] == "checkpoints":
            record = dataclasses.replace(record, inputs={**record.inputs, "reclaimPolicy": "Delete"})
        records.append(record)
    findings = check_data_volumes(Context(platform, dataclasses.replace(capture, resources=tuple(records)), None))
    assert sorted(f.subject for f in findings) == sorted(
        f"PersistentVolumeClaim/{team.namespaces[0]}/checkpoints" for team in platform.teams)


def test_gcs_datasets_mount_each_team_bucket_through_a_retained_static_volume() -> None:
    platform, capture = _variant("gcp")
    volumes = {v["spec"]["claimRef"]["namespace"]: v for v in kube_objects(capture, "PersistentVolume")}
    buckets = {r.inputs["name"] for r in capture.resources if r.type == "gcp:storage/bucket:Bucket"}
    for team in platform.teams:
        volume = volumes[team.namespaces[0]]
        assert volume["spec"]["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
        assert volume["spec"]["csi"]["volumeHandle"] in buckets
        assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


@pytest.mark.parametrize(("storage", "backup", "path"), [
    ({"profile": "nfs"}, None, "storage.nfs"),
    ({"teams": {"ghost": {"datasets": "1Ti"}}}, None, "storage.teams.ghost"),
    ({"profile": "aws"}, None, "storage.region"),
    (None, {"drill": {"tier": "monthly"}}, "backup.drill.tier"),
    (None, {"tiers": {"daily": {"schedule": "0 2 * * *", "ttl": "30d"}}}, "backup.tiers.daily.ttl"),
    ({"profile": "nfs", "nfs": {"server": "nfs", "share": "/x"}}, None, "backup.location.bucket"),
])
def test_bad_storage_or_backup_input_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     storage: Any, backup: Any, path: str) -> None:
    raw = raw_platform("onprem-lab")
    for key, value in (("storage", storage), ("backup", backup)):
        if value is not None:
            raw[key] = value
    assert main(["plan", str(write_stack(tmp_path, raw))]) == 2
    err = capsys.readouterr().err
    assert f"trainyard:platform.{path}" in err and "Traceback" not in err
