"""Nothing lost: every team namespace is in a Velero Schedule, data volumes are retained, buckets keep
versions. Read from what the program declared (the capture), not from the spec, so that a component
that forgets something is caught."""

from __future__ import annotations

from typing import Any

from infra.checks.context import Context
from infra.offline.engine import Registration
from infra.spec import Finding
from infra.vocabulary import BUCKET_LABEL, BUCKET_NAMESPACE_LABEL, VOLUME_LABEL


def check_schedule_coverage(ctx: Context) -> list[Finding]:
    covered: set[str] = set()
    for _, schedule in ctx.of_kind("Schedule"):
        covered |= set(schedule.get("spec", {}).get("template", {}).get("includedNamespaces") or [])
    if "*" in covered:
        return []
    return [
        Finding("backup", f"namespace/{ns}", f"team {team.name}'s namespace is in no Velero Schedule: add the team "
                                              "to a backup tier (backup.tiers.<tier>.teams)")
        for team in ctx.platform.teams for ns in team.namespaces if ns not in covered
    ]


def check_data_volumes(ctx: Context) -> list[Finding]:
    """A dataset or checkpoint volume survives its claim (class reclaimPolicy Retain) and `pulumi destroy`."""
    reclaim = {obj["metadata"]["name"]: obj.get("reclaimPolicy", "Delete")
               for _, obj in ctx.of_kind("StorageClass")}
    findings = []
    for record, claim in ctx.of_kind("PersistentVolumeClaim"):
        meta = claim.get("metadata", {})
        if VOLUME_LABEL not in meta.get("labels", {}):
            continue
        subject = f"PersistentVolumeClaim/{meta.get('namespace')}/{meta.get('name')}"
        klass = claim.get("spec", {}).get("storageClassName")
        if reclaim.get(klass) != "Retain":
            findings.append(Finding("backup", subject, f"data volume on class '{klass}' whose reclaimPolicy is "
                                    f"{reclaim.get(klass, 'unknown (class not declared)')}: use a Retain class"))
        if not (record.retain_on_delete or record.protect):
            findings.append(Finding("backup", subject, "data volume is neither retained nor protected: "
                                    "declare it with retain_on_delete=True"))
    for _, volume in ctx.of_kind("PersistentVolume"):
        if VOLUME_LABEL in volume.get("metadata", {}).get("labels", {}) \
                and volume.get("spec", {}).get("persistentVolumeReclaimPolicy") != "Retain":
            findings.append(Finding("backup", f"PersistentVolume/{volume['metadata']['name']}",
                                    "data volume without persistentVolumeReclaimPolicy Retain"))
    return findings


def _versioned_claims(ctx: Context) -> set[tuple[str, str]]:
    """(namespace, bucket key) of the claims whose versioning a job turns on (the claim's namespace is on
    the job, which runs in the Rook namespace)."""
    found = set()
    for _, job in ctx.of_kind("Job"):
        labels = job["metadata"].get("labels", {})
        found.add((labels.get(BUCKET_NAMESPACE_LABEL, job["metadata"].get("namespace", "")),
                   labels.get(BUCKET_LABEL, "")))
    return found


def check_bucket_versioning(ctx: Context) -> list[Finding]:
    by_type: dict[str, list[Registration]] = {}
    for record in ctx.capture.resources:
        by_type.setdefault(record.type, []).append(record)

    def inputs(type_: str) -> list[dict[str, Any]]:
        return [r.inputs for r in by_type.get(type_, [])]

    s3_versioned = {v.get("bucket") for v in inputs("aws:s3/bucketVersioning:BucketVersioning")
                    if v.get("versioningConfiguration", {}).get("status") == "Enabled"}
    blob_versioned = {v.get("accountName") for v in inputs("azure-native:storage:BlobServiceProperties")
                      if v.get("isVersioningEnabled")}
    unversioned: list[str] = []
    unversioned += [f"s3 bucket {b.get('bucket')}" for b in inputs("aws:s3/bucket:Bucket")
                    if b.get("bucket") not in s3_versioned and not b.get("versioning", {}).get("enabled")]
    unversioned += [f"gcs bucket {b.get('name')}" for b in inputs("gcp:storage/bucket:Bucket")
                    if not b.get("versioning", {}).get("enabled")]
    unversioned += [f"blob container {c.get('containerName')}" for c in inputs("azure-native:storage:BlobContainer")
                    if c.get("accountName") not in blob_versioned]
    jobs = _versioned_claims(ctx)
    for _, claim in ctx.of_kind("ObjectBucketClaim"):
        meta = claim["metadata"]
        enabled = claim.get("spec", {}).get("additionalConfig", {}).get("bucketVersioning") == "Enabled"
        if not enabled and (meta.get("namespace", ""), meta.get("labels", {}).get(BUCKET_LABEL)) not in jobs:
            unversioned.append(f"bucket claim {meta.get('namespace')}/{meta['name']}")
    return [Finding("backup", subject, "bucket without versioning: an overwritten or deleted object cannot be "
                    "recovered; enable versioning") for subject in unversioned]


def check_backup_credentials(ctx: Context) -> list[Finding]:
    secrets = {(obj["metadata"].get("namespace"), obj["metadata"]["name"]) for _, obj in ctx.of_kind("Secret")}
    findings = []
    for _, location in ctx.of_kind("BackupStorageLocation"):
        credential = location.get("spec", {}).get("credential")
        if credential and (location["metadata"].get("namespace"), credential.get("name")) not in secrets:
            findings.append(Finding(
                "backup", f"BackupStorageLocation/{location['metadata']['name']}",
                f"credentials Secret '{credential.get('name')}' is not declared: set the provider's credentials "
                "file with `pulumi config set --secret trainyard:backupCredentials < credentials`, or give "
                "backup.location.identity", "warning"))
    return findings


def check_backups_off_cluster(ctx: Context) -> list[Finding]:
    """Backups in a bucket that this cluster's own object store serves (an ObjectBucketClaim of the stack)
    share the fate of the data they protect."""
    claimed = {obj.get("spec", {}).get("bucketName") for _, obj in ctx.of_kind("ObjectBucketClaim")}
    return [
        Finding("backup", f"BackupStorageLocation/{location['metadata']['name']}",
                f"backups go to bucket '{bucket}' of the cluster's own object store, on the same disks as the "
                "data they protect: losing the cluster loses them; set backup.location.bucket (and s3Url) to an "
                "off-site store", "warning")
        for _, location in ctx.of_kind("BackupStorageLocation")
        if (bucket := location.get("spec", {}).get("objectStorage", {}).get("bucket")) in claimed
    ]

