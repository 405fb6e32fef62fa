"""The object storage the platform asks for: versioned, private, protected buckets in the cloud's store (S3,
GCS, Azure Blob containers), and the EFS file system of the AWS classes when the stack names none.

These resources were children of the platform's storage component before the cluster layer owned them; their
alias to that parent keeps them (no replacement of a protected bucket)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

from infra.spec import Platform
from infra.spec.storage.model import StorageFacts

EFS_PROVISIONER = "efs.csi.aws.com"


@dataclass
class Buckets:
    names: dict[str, pulumi.Input[str]] = field(default_factory=dict)  # bucket key -> name in the store
    ids: dict[str, pulumi.Input[str]] = field(default_factory=dict)  # bucket key -> the cloud's id / scope
    parameters: dict[str, dict[str, pulumi.Input[str]]] = field(default_factory=dict)  # provisioner -> extra
    efs: Any = None  # the created EFS file system (its mount targets belong to the EKS network)
    account: Any = None  # the Azure storage account


def _was_in_storage(name: str) -> list[pulumi.Input[pulumi.Alias | str]]:
    stack, project = pulumi.get_stack(), pulumi.get_project()
    return [pulumi.Alias(name=name, parent=f"urn:pulumi:{stack}::{project}::trainyard:platform:Storage::storage")]


class _Options:
    """Options of one moved resource: under `parent`, aliased to its old place, protected unless said."""

    def __init__(self, parent: pulumi.Resource, provider: pulumi.ProviderResource | None = None) -> None:
        self.parent, self.provider = parent, provider

    def __call__(self, name: str, protect: bool = True, depends_on: list[pulumi.Resource] | None = None,
                 ) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent, provider=self.provider, protect=protect,
                                      depends_on=depends_on, aliases=_was_in_storage(name))


def cloud_buckets(platform: Platform, parent: pulumi.Resource) -> Buckets:
    """The buckets of a cloud storage profile (none for rook-ceph and nfs, whose buckets are in-cluster claims).
    GCS and Azure use the default provider, as they did under the storage component."""
    facts = platform.storage
    if facts.profile == "aws":
        return _s3(platform, facts, parent)
    if facts.profile == "gcp":
        return _gcs(facts, _Options(parent))
    if facts.profile == "azure":
        return _azure(facts, _Options(parent))
    return Buckets()


def _s3(platform: Platform, facts: StorageFacts, parent: pulumi.Resource) -> Buckets:
    import pulumi_aws as aws

    # Buckets live in the storage region, which may differ from the cluster's.
    cloud = aws.Provider("aws-storage", region=facts.region, opts=pulumi.ResourceOptions(
        parent=parent, aliases=_was_in_storage("aws")))
    keep = _Options(parent, cloud)
    result = Buckets()
    for bucket in facts.buckets:
        s3 = aws.s3.Bucket(f"bucket-{bucket.key}", bucket=bucket.name, opts=keep(f"bucket-{bucket.key}"))
        aws.s3.BucketVersioning(f"versioning-{bucket.key}", bucket=s3.bucket,
                                versioning_configuration={"status": "Enabled"},
                                opts=keep(f"versioning-{bucket.key}", protect=False, depends_on=[s3]))
        aws.s3.BucketPublicAccessBlock(f"private-{bucket.key}", bucket=s3.bucket, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True,
                                       opts=keep(f"private-{bucket.key}", protect=False, depends_on=[s3]))
        result.names[bucket.key] = bucket.name
        result.ids[bucket.key] = f"arn:aws:s3:::{bucket.name}"
    if platform.spec.storage.aws.efs_file_system_id is None:
        result.efs = aws.efs.FileSystem("efs", creation_token=f"trainyard-{platform.cluster_name}", encrypted=True,
                                        opts=keep("efs"))
        result.parameters[EFS_PROVISIONER] = {"fileSystemId": result.efs.id}
    return result


def _gcs(facts: StorageFacts, keep: _Options) -> Buckets:
    import pulumi_gcp as gcp

    result = Buckets()
    for bucket in facts.buckets:
        gcp.storage.Bucket(f"bucket-{bucket.key}", name=bucket.name, location=(facts.region or "").upper(),
                           versioning={"enabled": True}, uniform_bucket_level_access=True,
                           public_access_prevention="enforced", opts=keep(f"bucket-{bucket.key}"))
        result.names[bucket.key] = result.ids[bucket.key] = bucket.name
    return result


def _azure(facts: StorageFacts, keep: _Options) -> Buckets:
    import pulumi_azure_native as azure

    # Plain names (not outputs) keep the account and its containers linked in previews and checks.
    group, account_name = facts.azure_resource_group or "", facts.azure_account or ""
    created: list[pulumi.Resource] = []
    if facts.azure_group_created:
        created.append(azure.resources.ResourceGroup("storage-group", resource_group_name=group,
                                                     location=facts.region, opts=keep("storage-group")))
    account = azure.storage.StorageAccount(
        "storage-account", account_name=account_name, resource_group_name=group, location=facts.region,
        kind="StorageV2", sku={"name": "Standard_ZRS"}, allow_blob_public_access=False,
        minimum_tls_version="TLS1_2", opts=keep("storage-account", depends_on=created))
    versioning = azure.storage.BlobServiceProperties(
        "blob-versioning", account_name=account_name, resource_group_name=group, blob_services_name="default",
        is_versioning_enabled=True, opts=keep("blob-versioning", protect=False, depends_on=[account]))
    result = Buckets(account=account)
    for bucket in facts.buckets:
        container = azure.storage.BlobContainer(
            f"bucket-{bucket.key}", container_name=bucket.name, account_name=account_name,
            resource_group_name=group, public_access=azure.storage.PublicAccess.NONE,
            opts=keep(f"bucket-{bucket.key}", depends_on=[versioning]))
        result.names[bucket.key] = bucket.name
        result.ids[bucket.key] = container.id
    return result
