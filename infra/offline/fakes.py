"""What the mock engine answers: deterministic ids, inputs echoed as outputs, and the few outputs
that a real provider computes and the program reads (kubeconfigs, chart resource lists)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pulumi

FAKE_KUBECONFIG = json.dumps({
    "apiVersion": "v1", "kind": "Config", "current-context": "offline",
    "clusters": [{"name": "offline", "cluster": {"server": "https://offline.invalid"}}],
    "contexts": [{"name": "offline", "context": {"cluster": "offline", "user": "offline"}}],
    "users": [{"name": "offline", "user": {}}],
})

_EKS_ISSUER = "oidc.eks.us-east-1.amazonaws.com/id/OFFLINE"
_FAKE_CA = base64.b64encode(b"offline certificate authority").decode()

# Resource type -> extra outputs a real provider would compute. Cloud layers add their own entries.
OUTPUTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "kubernetes:helm.sh/v4:Chart": lambda inputs: {"resources": []},
    "kubernetes:kustomize/v2:Directory": lambda inputs: {"resources": []},
    # The cloud clusters' outputs the cluster layer builds its kubeconfig from.
    "eks:index:Cluster": lambda inputs: {
        "kubeconfigJson": FAKE_KUBECONFIG, "kubeconfig": json.loads(FAKE_KUBECONFIG),
        "oidcProviderArn": f"arn:aws:iam::123456789012:oidc-provider/{_EKS_ISSUER}", "oidcIssuer": _EKS_ISSUER,
        "oidcProviderUrl": f"https://{_EKS_ISSUER}"},
    "gcp:container/cluster:Cluster": lambda inputs: {
        "endpoint": "203.0.113.10", "masterAuth": {"clusterCaCertificate": _FAKE_CA},
        "privateClusterConfig": {**inputs.get("privateClusterConfig", {}), "masterIpv4CidrBlock": "172.16.0.0/28"}},
    "azure-native:containerservice:ManagedCluster": lambda inputs: {
        "name": inputs.get("resourceName"),
        "oidcIssuerProfile": {"enabled": True, "issuerURL": "https://oidc.offline.invalid/issuer/"}},
    "azure-native:resources:ResourceGroup": lambda inputs: {"name": inputs.get("resourceGroupName")},
    # An Entra managed identity: the bucket users' ServiceAccounts carry its client id, role assignments its
    # principal id (deterministic UUIDs from its name).
    "azure-native:managedidentity:UserAssignedIdentity": lambda inputs: {
        "clientId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"client/{inputs.get('resourceName')}")),
        "principalId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"principal/{inputs.get('resourceName')}"))},
    # The GKE node service account: node pools name it by email, IAM bindings by member.
    "gcp:serviceaccount/account:Account": lambda inputs: {
        "email": f"{inputs.get('accountId')}@offline.iam.gserviceaccount.com",
        "member": f"serviceAccount:{inputs.get('accountId')}@offline.iam.gserviceaccount.com",
        "name": f"projects/offline/serviceAccounts/{inputs.get('accountId')}@offline.iam.gserviceaccount.com"},
    # The managed Prometheus of observability.managedPrometheus: what its remote write URL is built from.
    "aws:amp/workspace:Workspace": lambda inputs: {
        "arn": "arn:aws:aps:us-east-1:123456789012:workspace/ws-offline",
        "prometheusEndpoint": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-offline/"},
    "azure-native:monitor:DataCollectionEndpoint": lambda inputs: {
        "metricsIngestion": {"endpoint": "https://offline.eastus-1.metrics.ingest.monitor.azure.com"}},
    "azure-native:monitor:DataCollectionRule": lambda inputs: {"immutableId": "dcr-offline"},
}

# Resource type -> outputs a real provider computes from the resource's name (IAM role ARNs, which add-ons and pod
# identity associations name).
NAMED_OUTPUTS: dict[str, Callable[[str], dict[str, Any]]] = {
    "aws:iam/role:Role": lambda name: {"arn": f"arn:aws:iam::123456789012:role/{name}"},
}

# Invoke token -> its answer.
CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "azure-native:containerservice:listManagedClusterUserCredentials": lambda args: {
        "kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(FAKE_KUBECONFIG.encode()).decode()}]},
    # The lookups the cluster layer's workload identities and EFS mount targets make.
    "azure-native:authorization:getClientConfig": lambda args: {
        "subscriptionId": "00000000-0000-0000-0000-000000000000", "tenantId": "33333333-3333-3333-3333-333333333333"},
    "gcp:organizations/getProject:getProject": lambda args: {"number": "123456789012"},
    "aws:ec2/getVpc:getVpc": lambda args: {"cidrBlock": "10.0.0.0/16"},
}


def fake_id(name: str) -> str:
    return f"{name}-id"


def echoes_inputs(type_: str) -> bool:
    """Whether a resource's outputs are exactly its inputs (no computed outputs to add)."""
    return type_ not in OUTPUTS and type_ not in NAMED_OUTPUTS


class OfflineMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        outputs = dict(args.inputs)
        extra = OUTPUTS.get(args.typ)
        if extra:
            outputs.update(extra(args.inputs))
        named = NAMED_OUTPUTS.get(args.typ)
        if named:
            outputs.update(named(args.name))
        return fake_id(args.name), outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        answer = CALLS.get(args.token)
        return (answer(args.args) if answer else {}), []  # the mock monitor iterates the failures
