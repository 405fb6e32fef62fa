"""Entra Workload ID for the bucket users: per user a managed identity, a federated credential trusting the
cluster's OIDC issuer for that service account, and Storage Blob Data Contributor on its container only."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure_native

from infra.kit.contract import WorkloadIdentity, account_key
from infra.spec import Platform

BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
CLIENT_ID = "azure.workload.identity/client-id"
USE_LABEL = {"azure.workload.identity/use": "true"}  # the webhook injects the token into these pods only


def bucket_identities(platform: Platform, group: pulumi.Input[str], issuer: pulumi.Input[str],
                      containers: dict[str, pulumi.Input[str]], opts: pulumi.ResourceOptions,
                      provider: pulumi.ProviderResource) -> dict[str, WorkloadIdentity]:
    subscription = azure_native.authorization.get_client_config_output(
        opts=pulumi.InvokeOutputOptions(parent=opts.parent, provider=provider)).subscription_id
    role = pulumi.Output.concat("/subscriptions/", subscription,
                                f"/providers/Microsoft.Authorization/roleDefinitions/{BLOB_DATA_CONTRIBUTOR}")
    identities: dict[str, WorkloadIdentity] = {}
    for namespace, account, bucket in platform.storage.bucket_users():
        name = f"{namespace}-{account}"
        identity_name = f"{platform.cluster_name}-{name}"
        identity = azure_native.managedidentity.UserAssignedIdentity(
            f"identity-{name}", resource_group_name=group, resource_name_=identity_name, opts=opts)
        azure_native.managedidentity.FederatedIdentityCredential(
            f"identity-{name}", resource_group_name=group, resource_name_=identity_name,
            federated_identity_credential_resource_name="kubernetes", issuer=issuer,
            subject=f"system:serviceaccount:{namespace}:{account}", audiences=["api://AzureADTokenExchange"],
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[identity])))
        azure_native.authorization.RoleAssignment(
            f"identity-{name}", principal_id=identity.principal_id, principal_type="ServicePrincipal",
            role_definition_id=role, scope=containers[bucket.key], opts=opts)
        identities[account_key(namespace, account)] = WorkloadIdentity(
            annotations={CLIENT_ID: identity.client_id}, pod_labels=USE_LABEL)
    return identities
