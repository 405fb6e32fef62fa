"""What a GKE cluster adds so that the platform works: a dedicated node service account with only what nodes
need (not the Compute Engine default account), and bucket access for the bucket users' Kubernetes service
accounts through Workload Identity Federation (principal identifiers, no Google service account, no key)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.kit.contract import WorkloadIdentity, account_key
from infra.spec import Platform

# GKE's minimal node role (logging, monitoring, metadata) and image pulls from Artifact Registry.
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")


def node_account(platform: Platform, project: str, opts: pulumi.ResourceOptions) -> Any:
    account = gcp.serviceaccount.Account("nodes", account_id=f"{platform.cluster_name}-nodes"[:30],
                                         display_name=f"GKE nodes of {platform.cluster_name}", opts=opts)
    for role in NODE_ROLES:
        gcp.projects.IAMMember(f"nodes-{role.split('/')[-1]}", project=project, role=role, member=account.member,
                               opts=opts)
    return account


def bucket_identities(platform: Platform, project: str, buckets: dict[str, pulumi.Input[str]],
                      opts: pulumi.ResourceOptions, provider: pulumi.ProviderResource) -> dict[str, WorkloadIdentity]:
    """Each bucket user's Kubernetes service account may read and write its bucket (roles/storage.objectUser)."""
    number = gcp.organizations.get_project_output(
        project_id=project, opts=pulumi.InvokeOutputOptions(parent=opts.parent, provider=provider)).number
    identities: dict[str, WorkloadIdentity] = {}
    for namespace, account, bucket in platform.storage.bucket_users():
        member = pulumi.Output.concat(
            "principal://iam.googleapis.com/projects/", number, f"/locations/global/workloadIdentityPools/"
            f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{account}")
        gcp.storage.BucketIAMMember(f"identity-{namespace}-{account}", bucket=buckets[bucket.key],
                                    role="roles/storage.objectUser", member=member, opts=opts)
        identities[account_key(namespace, account)] = WorkloadIdentity()
    return identities
