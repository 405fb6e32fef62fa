"""The Azure Monitor workspace a stack asks for (observability.managedPrometheus), with its ingestion endpoint and
rule, and the identity the in-cluster Prometheus writes to it with. Prometheus authenticates with Entra Workload ID
(`azureAd.workloadIdentity`, Prometheus >= 3.7; the pinned chart runs 3.14) as a managed identity holding Monitoring
Metrics Publisher on the data collection rule only. The rule routes the Microsoft-PrometheusMetrics stream from its
endpoint to the workspace; the write URL is the endpoint's metrics ingestion host + the rule's immutable id."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.cluster.aks.identity import CLIENT_ID, USE_LABEL
from infra.kit.contract import RemoteWrite, WorkloadIdentity
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT

MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"  # Azure built-in role
PROMETHEUS_STREAM = "Microsoft-PrometheusMetrics"
INGESTION_API = "2023-04-24"


def azure_monitor(platform: Platform, group: pulumi.Input[str], location: str, issuer: pulumi.Input[str],
                  opts: pulumi.ResourceOptions, provider: pulumi.ProviderResource,
                  ) -> tuple[RemoteWrite, WorkloadIdentity]:
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
