"""The cloud's managed Prometheus a stack asks for (observability.managedPrometheus) and the identity the in-cluster
Prometheus writes to it with: an Amazon Managed Service for Prometheus workspace on EKS, an Azure Monitor workspace
with its ingestion endpoint and rule on AKS. The platform only adds the remote write the contract describes.

- EKS: Prometheus signs with SigV4 (`sigv4.region`, credentials from the default chain: the EKS Pod Identity
  agent, as for every other pod identity of this cluster) as a role allowed `aps:RemoteWrite` on this workspace only.
- AKS: Prometheus authenticates with Entra Workload ID (`azureAd.workloadIdentity`, Prometheus >= 3.7; the pinned
  chart runs 3.14) as a managed identity holding Monitoring Metrics Publisher on the data collection rule only.
  The rule routes the Microsoft-PrometheusMetrics stream from its endpoint to the workspace; the write URL is the
  endpoint's metrics ingestion host + the rule's immutable id.
- GKE: no remote write. Prometheus runs Google's fork (the platform sets the image), which exports to Managed
  Service for Prometheus through the Cloud Monitoring API as a Google service account holding
  roles/monitoring.metricWriter only, which only the Prometheus Kubernetes service account may impersonate
  (GKE Workload Identity: roles/iam.workloadIdentityUser for <project>.svc.id.goog[monitoring/<account>]).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from infra.kit.contract import RemoteWrite, WorkloadIdentity
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT

MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"  # Azure built-in role
METRIC_WRITER = "roles/monitoring.metricWriter"  # write time series, nothing else (read needs monitoring.viewer)
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GKE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"
PROMETHEUS_STREAM = "Microsoft-PrometheusMetrics"
INGESTION_API = "2023-04-24"


def amazon_managed_prometheus(platform: Platform, region: str, after: Sequence[pulumi.Resource],
                              opts: pulumi.ResourceOptions) -> tuple[RemoteWrite, WorkloadIdentity]:
    """`after`: the Pod Identity agent add-on the association needs."""
    import pulumi_aws as aws

    from infra.cluster.eks.addons import pod_role, policy

    namespace, account = PROMETHEUS_ACCOUNT
    workspace = aws.amp.Workspace("prometheus", alias=platform.cluster_name, opts=opts)
    role = pod_role("prometheus-remote-write", opts, inline=workspace.arn.apply(lambda arn: policy([
        {"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": arn}])))
    aws.eks.PodIdentityAssociation(
        "identity-prometheus", cluster_name=platform.cluster_name, namespace=namespace, service_account=account,
        role_arn=role.arn,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(after))))
    url = workspace.prometheus_endpoint.apply(lambda endpoint: f"{endpoint.rstrip('/')}/api/v1/remote_write")
    return RemoteWrite(url=url, auth={"sigv4": {"region": region}}), WorkloadIdentity()


def azure_monitor(platform: Platform, group: pulumi.Input[str], location: str, issuer: pulumi.Input[str],
                  opts: pulumi.ResourceOptions, provider: pulumi.ProviderResource,
                  ) -> tuple[RemoteWrite, WorkloadIdentity]:
    import pulumi_azure_native as azure

    from infra.cluster.aks.identity import CLIENT_ID, USE_LABEL

    namespace, account = PROMETHEUS_ACCOUNT
    name = f"{platform.cluster_name}-prometheus"
    monitor = azure.monitor
    workspace = monitor.AzureMonitorWorkspace("prometheus", azure_monitor_workspace_name=name,
                                              resource_group_name=group, location=location, opts=opts)
    endpoint = monitor.DataCollectionEndpoint("prometheus", data_collection_endpoint_name=name,
                                              resource_group_name=group, location=location, opts=opts)
    rule = monitor.DataCollectionRule(
        "prometheus", data_collection_rule_name=name, resource_group_name=group, location=location,
        data_collection_endpoint_id=endpoint.id,
        data_sources={"prometheus_forwarder": [{"name": "prometheus", "streams": [PROMETHEUS_STREAM]}]},
        destinations={"monitoring_accounts": [{"account_resource_id": workspace.id, "name": "workspace"}]},
        data_flows=[{"streams": [PROMETHEUS_STREAM], "destinations": ["workspace"]}], opts=opts)
    identity = azure.managedidentity.UserAssignedIdentity(
        "identity-prometheus", resource_group_name=group, resource_name_=name, opts=opts)
    azure.managedidentity.FederatedIdentityCredential(
        "identity-prometheus", resource_group_name=group, resource_name_=name,
        federated_identity_credential_resource_name="kubernetes", issuer=issuer,
        subject=f"system:serviceaccount:{namespace}:{account}", audiences=["api://AzureADTokenExchange"],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[identity])))
    client = azure.authorization.get_client_config_output(
        opts=pulumi.InvokeOutputOptions(parent=opts.parent, provider=provider))
    azure.authorization.RoleAssignment(
        "identity-prometheus", principal_id=identity.principal_id, principal_type="ServicePrincipal",
        role_definition_id=pulumi.Output.concat(
            "/subscriptions/", client.subscription_id,
            f"/providers/Microsoft.Authorization/roleDefinitions/{MONITORING_METRICS_PUBLISHER}"),
        scope=rule.id, opts=opts)
    url = pulumi.Output.concat(
        endpoint.metrics_ingestion.apply(lambda ingestion: ingestion.endpoint if ingestion else ""),
        "/dataCollectionRules/", rule.immutable_id,
        f"/streams/{PROMETHEUS_STREAM}/api/v1/write?api-version={INGESTION_API}")
    auth = {"azureAd": {"cloud": "AzurePublic",
                        "workloadIdentity": {"clientId": identity.client_id, "tenantId": client.tenant_id}}}
    return RemoteWrite(url=url, auth=auth), WorkloadIdentity(annotations={CLIENT_ID: identity.client_id},
                                                             pod_labels=USE_LABEL)


def google_managed_prometheus(platform: Platform, project: str, opts: pulumi.ResourceOptions) -> WorkloadIdentity:
    import pulumi_gcp as gcp

    namespace, account = PROMETHEUS_ACCOUNT
    writer = gcp.serviceaccount.Account("prometheus", account_id=f"{platform.cluster_name}-prometheus"[:30],
                                        display_name=f"Prometheus of {platform.cluster_name} (metric writer)",
                                        opts=opts)
    gcp.projects.IAMMember("prometheus-metric-writer", project=project, role=METRIC_WRITER, member=writer.member,
                           opts=opts)
    gcp.serviceaccount.IAMMember(
        "identity-prometheus", service_account_id=writer.name, role=WORKLOAD_IDENTITY_USER,
        member=f"serviceAccount:{project}.svc.id.goog[{namespace}/{account}]", opts=opts)
    return WorkloadIdentity(annotations={GKE_ACCOUNT_ANNOTATION: writer.email})
