"""The cluster is a contract, not a cloud leak: the platform imports neither the cluster layer nor a cloud SDK;
the buckets are the cluster layer's; the platform's provider waits for every node pool or node patch; each
capability a cloud kind claims has its mechanism in the plan; no cloud stack needs a static key."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from infra.kit.contract import account_key
from infra.spec.observability import PROMETHEUS_ACCOUNT
from tests.conftest import ROOT, capture_of, kube_objects, platform_of
from tests.test_cloud_common import CLOUD_STACKS, POOL_TYPES, of_type

FORBIDDEN = ("infra.cluster", "pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_eks")


def imported_modules(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def leaks(source: str) -> set[str]:
    return {m for m in imported_modules(source) if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN)}


def test_the_import_check_sees_a_leak_anywhere_in_a_module() -> None:
    assert leaks("import pulumi_aws as aws\n") == {"pulumi_aws"}
    assert leaks("def f():\n    from infra.cluster.eks.cluster import EksCluster\n") == {"infra.cluster.eks.cluster"}
    assert leaks("from infra.kit.contract import ClusterContract\nimport pulumi_kubernetes\n") == set()


@pytest.mark.parametrize("path", sorted((ROOT / "infra" / "platform").glob("*.py")), ids=lambda p: p.name)
def test_the_platform_imports_neither_the_cluster_layer_nor_a_cloud_sdk(path: Path) -> None:
    assert leaks(path.read_text(encoding="utf-8")) == set()


READY_TYPES = {**POOL_TYPES, "onprem-lab": "kubernetes:core/v1:NodePatch", "local": "kubernetes:core/v1:NodePatch"}


@pytest.mark.parametrize("stack", sorted(READY_TYPES))
def test_the_platform_provider_waits_for_every_node_pool_or_patch(stack: str) -> None:
    capture = capture_of(stack)
    platform_provider = of_type(capture, "pulumi:providers:kubernetes")["kubernetes"]
    ready = {f"{r.type}::{r.name}" for r in capture.resources if r.type == READY_TYPES[stack]}
    assert ready and ready <= set(platform_provider.depends_on)
    for record in capture.resources:
        if record.type == READY_TYPES[stack]:  # the node patches use their own provider, not the waiting one
            assert record.provider != "pulumi:providers:kubernetes::kubernetes"
        elif record.parent.startswith("trainyard:platform:") and record.type.startswith("kubernetes:"):
            assert record.provider == "pulumi:providers:kubernetes::kubernetes", record.name


BUCKET_TYPES = {"aws-prod": "aws:s3/bucket:Bucket", "gcp-prod": "gcp:storage/bucket:Bucket",
                "azure-prod": "azure-native:storage:BlobContainer"}


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_buckets_belong_to_the_cluster_layer_and_stay_protected(stack: str) -> None:
    buckets = of_type(capture_of(stack), BUCKET_TYPES[stack])
    assert {f"bucket-{b.key}" for b in platform_of(stack).storage.buckets} == set(buckets)
    assert all(b.parent.startswith("trainyard:cluster:") and b.protect for b in buckets.values())


def _inputs(stack: str, type_: str, name: str) -> dict[str, Any]:
    return of_type(capture_of(stack), type_)[name].inputs


def test_eks_provides_by_its_own_mechanisms() -> None:
    cluster = _inputs("aws-prod", "eks:index:Cluster", "eks")
    assert (cluster["endpointPublicAccess"], cluster["publicAccessCidrs"]) == (True, ["203.0.113.0/24",
                                                                                       "198.51.100.0/24"])
    addons = {r.inputs["addonName"] for r in of_type(capture_of("aws-prod"), "aws:eks/addon:Addon").values()}
    assert addons == {"vpc-cni", "eks-pod-identity-agent", "aws-ebs-csi-driver", "aws-efs-csi-driver",
                      "snapshot-controller"}
    charts = {r.name: r for r in of_type(capture_of("aws-prod"), "kubernetes:helm.sh/v4:Chart").values()}
    assert charts["cluster-autoscaler"].inputs["values"]["autoDiscovery"] == {"clusterName": "trainyard-prod"}
    assert charts["node-termination-handler"].inputs["values"]["daemonsetNodeSelector"] == {
        "eks.amazonaws.com/capacityType": "SPOT"}
    login = _inputs("aws-prod", "aws:eks/identityProviderConfig:IdentityProviderConfig", "login")["oidc"]
    assert (login["groupsClaim"], login["groupsPrefix"]) == ("groups", "oidc:")
    policies = {r.inputs["policyArn"].rsplit("/", 1)[-1]
                for r in of_type(capture_of("aws-prod"), "aws:iam/rolePolicyAttachment:RolePolicyAttachment").values()
                if r.name.startswith("nodes-")}
    assert "AmazonEC2ContainerRegistryReadOnly" not in policies and "AmazonEC2ContainerRegistryPullOnly" in policies


def test_the_vpc_cni_enforces_policies_on_its_own_irsa_role_and_the_node_role_has_no_cni_policy() -> None:
    capture = capture_of("aws-prod")
    addon = _inputs("aws-prod", "aws:eks/addon:Addon", "addon-vpc-cni")
    assert json.loads(addon["configurationValues"]) == {"enableNetworkPolicy": "true"} and addon["preserve"] is True
    role = addon["serviceAccountRoleArn"].rsplit("/", 1)[-1]
    (statement,) = json.loads(of_type(capture, "aws:iam/role:Role")[role].inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].startswith("arn:aws:iam::")
    assert {key.rsplit(":", 1)[1]: value for key, value in statement["Condition"]["StringEquals"].items()} == {
        "sub": "system:serviceaccount:kube-system:aws-node", "aud": "sts.amazonaws.com"}
    holders = [r.name for r in of_type(capture, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").values()
               if r.inputs["policyArn"].endswith("/AmazonEKS_CNI_Policy")]
    assert holders == [role]  # the CNI's role only: not the node role (nodes-*)
    # The component's own CNI add-on is off (ours replaces it), and no node group starts before the CNI.
    cluster = _inputs("aws-prod", "eks:index:Cluster", "eks")
    assert cluster["useDefaultVpcCni"] is True and "vpcCniOptions" not in cluster
    groups = of_type(capture, "eks:index:ManagedNodeGroup").values()
    assert groups and all("aws:eks/addon:Addon::addon-vpc-cni" in group.depends_on for group in groups)


def test_an_eks_spot_pool_scales_from_zero_with_its_gpus_known() -> None:
    spot = of_type(capture_of("aws-prod"), POOL_TYPES["aws-prod"])["pool-spot"].inputs
    assert spot["scalingConfig"]["minSize"] == 0
    assert spot["tags"] == {"k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "4"}  # g5.12xlarge


def test_a_private_eks_endpoint_has_no_public_access() -> None:
    from tests.test_cloud_common import variant

    def private(raw: dict[str, Any]) -> None:
        raw["cluster"]["eks"]["endpoint"] = {"private": True}

    _, capture = variant("aws-prod", private)
    cluster = of_type(capture, "eks:index:Cluster")["eks"].inputs
    assert cluster["endpointPublicAccess"] is False and "publicAccessCidrs" not in cluster


def test_gke_provides_by_its_own_mechanisms() -> None:
    cluster = _inputs("gcp-prod", "gcp:container/cluster:Cluster", "gke")
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert all(cluster["addonsConfig"][a]["enabled"] for a in (
        "gcePersistentDiskCsiDriverConfig", "gcpFilestoreCsiDriverConfig", "gcsFuseCsiDriverConfig"))
    assert cluster["authenticatorGroupsConfig"] == {"securityGroup": "gke-security-groups@example.com"}
    assert [b["cidrBlock"] for b in cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == [
        "203.0.113.0/24", "198.51.100.0/24"]
    for pool in of_type(capture_of("gcp-prod"), POOL_TYPES["gcp-prod"]).values():
        config = pool.inputs["nodeConfig"]
        assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}, pool.name
        assert config["serviceAccount"], f"{pool.name} runs on the Compute Engine default service account"


def test_gke_runtimes_ask_for_the_gcs_fuse_sidecar_and_other_clouds_do_not() -> None:
    def annotated(stack: str) -> set[str | None]:
        return {job["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
                .get("gke-gcsfuse/volumes") for r in kube_objects(capture_of(stack), "ClusterTrainingRuntime")
                for job in r["spec"]["template"]["spec"]["replicatedJobs"]}
    assert annotated("gcp-prod") == {"true"}
    assert annotated("aws-prod") == {None}


def test_aks_provides_by_its_own_mechanisms() -> None:
    cluster = _inputs("azure-prod", "azure-native:containerservice:ManagedCluster", "aks")
    assert (cluster["networkProfile"]["networkDataplane"], cluster["networkProfile"]["networkPolicy"]) == (
        "cilium", "cilium")
    assert cluster["storageProfile"]["blobCSIDriver"] == {"enabled": True}
    assert cluster["aadProfile"]["managed"] is True and cluster["disableLocalAccounts"] is True
    assert cluster["securityProfile"] == {"workloadIdentity": {"enabled": True}}
    assert cluster["apiServerAccessProfile"] == {"authorizedIPRanges": ["203.0.113.0/24", "198.51.100.0/24"]}


# Per cloud: the resource type that binds a bucket user's service account to its cloud identity, and how its
# inputs name the account.
BINDINGS = {
    "aws-prod": ("aws:eks/podIdentityAssociation:PodIdentityAssociation",
                 lambda i: account_key(i["namespace"], i["serviceAccount"])),
    "gcp-prod": ("gcp:storage/bucketIAMMember:BucketIAMMember",
                 lambda i: "/".join(i["member"].split("/subject/ns/")[1].split("/sa/"))),
    "azure-prod": ("azure-native:managedidentity:FederatedIdentityCredential",
                   lambda i: "/".join(i["subject"].split(":")[2:4])),
}


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_velero_and_every_team_bucket_use_workload_identity_and_no_static_key(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    type_, account = BINDINGS[stack]
    bound = {account(r.inputs) for r in of_type(capture, type_).values()} - {
        "kube-system/cluster-autoscaler", account_key(*PROMETHEUS_ACCOUNT)}  # not bucket users
    wanted = {account_key(ns, sa) for ns, sa, _ in platform.storage.bucket_users()}
    assert wanted == bound and "velero/velero-server" in wanted
    assert not [s for s in kube_objects(capture, "Secret") if s["metadata"]["name"] == "velero-credentials"]
    velero = of_type(capture, "kubernetes:helm.sh/v4:Chart")["velero"].inputs["values"]
    assert velero["credentials"]["useSecret"] is False
    accounts = {f"{a['metadata']['namespace']}/{a['metadata']['name']}" for a in kube_objects(capture, "ServiceAccount")
                if a["metadata"]["name"] == "datasets"}
    assert accounts == wanted - {"velero/velero-server"}


def test_aks_identities_reach_velero_and_team_pods_through_annotations_and_labels() -> None:
    velero = of_type(capture_of("azure-prod"), "kubernetes:helm.sh/v4:Chart")["velero"].inputs["values"]
    assert velero["podLabels"] == {"azure.workload.identity/use": "true"}
    assert "azure.workload.identity/client-id" in velero["serviceAccount"]["server"]["annotations"]
