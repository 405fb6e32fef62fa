"""What an EKS cluster adds so that the platform works: the EKS add-ons (VPC CNI with network policy, Pod Identity
agent, EBS/EFS/FSx CSI drivers, snapshot controller), the cluster autoscaler and AWS Node Termination Handler,
login for the personas' groups (OIDC identity provider, access entries), pod identities for the bucket users, and
the EFS mount targets.

Why the cluster autoscaler and not Karpenter: each pool is one managed node group with one instance type, which
is also one Kueue ResourceFlavor whose capacity the quotas are checked against; the autoscaler only moves a node
group between its declared min and max (scale from zero reads the group's labels, taints and node-template tags),
so capacity stays what the stack declares. Karpenter would choose instances itself and needs its own node role,
access entry, NodePools, EC2NodeClasses and an interruption queue with EventBridge rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.kit.contract import WorkloadIdentity, account_key
from infra.kit.objects import helm_chart
from infra.spec import Platform
from infra.spec.versions import CLUSTER_AUTOSCALER_CHART, CLUSTER_AUTOSCALER_IMAGES, NODE_TERMINATION_HANDLER_CHART

POD_TRUST = json.dumps({"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
    "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
MANAGED = "arn:aws:iam::aws:policy"
# Add-on -> (its controller service account, its AWS managed policy); None: the add-on needs no AWS access.
ADDONS: dict[str, tuple[str, str] | None] = {
    "eks-pod-identity-agent": None,
    "snapshot-controller": None,
    "aws-ebs-csi-driver": ("ebs-csi-controller-sa", f"{MANAGED}/service-role/AmazonEBSCSIDriverPolicy"),
    "aws-efs-csi-driver": ("efs-csi-controller-sa", f"{MANAGED}/service-role/AmazonEFSCSIDriverPolicy"),
    "aws-fsx-csi-driver": ("fsx-csi-controller-sa", f"{MANAGED}/AmazonFSxFullAccess"),
}
CNI_ACCOUNT = "kube-system:aws-node"  # the VPC CNI's service account (namespace:name)
AUTOSCALER_ACCOUNT = "cluster-autoscaler"
# cluster-autoscaler/cloudprovider/aws/README.md: the permissions of auto-discovery and scale from zero.
AUTOSCALER_ACTIONS = [
    "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities", "autoscaling:DescribeTags",
    "autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup",
    "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup",
]
BUCKET_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                  "s3:ListMultipartUploadParts"]
SPOT_LABEL = {"eks.amazonaws.com/capacityType": "SPOT"}  # set by EKS on Spot managed node group nodes
SYSTEM = {"trainyard.io/role": "system"}


def policy(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def pod_role(name: str, opts: pulumi.ResourceOptions, managed: str | None = None,
             inline: pulumi.Input[str] | None = None) -> aws.iam.Role:
    """A role that pods assume through EKS Pod Identity, with one managed or inline policy."""
    role = aws.iam.Role(f"role-{name}", assume_role_policy=POD_TRUST, opts=opts)
    if managed:
        aws.iam.RolePolicyAttachment(f"role-{name}", role=role.name, policy_arn=managed, opts=opts)
    if inline is not None:
        aws.iam.RolePolicy(f"role-{name}", role=role.id, policy=inline, opts=opts)
    return role


def vpc_cni(cluster: str, oidc_provider: pulumi.Input[str], issuer: pulumi.Input[str],
            opts: pulumi.ResourceOptions) -> aws.eks.Addon:
    """The VPC CNI add-on with network policy enforcement on, its AWS access (ENIs and pod addresses) on an IRSA
    role of its own instead of the node role, so pods reaching the node's instance profile do not get it.
    IRSA rather than Pod Identity: the CNI needs its credentials as a node boots, before the Pod Identity agent
    (itself a pod) runs there; IRSA needs only the projected token and STS. `preserve`: removing the add-on
    from Pulumi must not remove pod networking from the nodes."""
    def trust(provider: str, host: str) -> str:
        return policy([{"Effect": "Allow", "Principal": {"Federated": provider},
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {"StringEquals": {f"{host}:sub": f"system:serviceaccount:{CNI_ACCOUNT}",
                                                       f"{host}:aud": "sts.amazonaws.com"}}}])

    role = aws.iam.Role("role-vpc-cni", assume_role_policy=pulumi.Output.all(oidc_provider, issuer).apply(
        lambda parts: trust(parts[0], parts[1])), opts=opts)
    grant = aws.iam.RolePolicyAttachment("role-vpc-cni", role=role.name, policy_arn=f"{MANAGED}/AmazonEKS_CNI_Policy",
                                         opts=opts)
    return aws.eks.Addon(
        "addon-vpc-cni", cluster_name=cluster, addon_name="vpc-cni", service_account_role_arn=role.arn,
        configuration_values=json.dumps({"enableNetworkPolicy": "true"}), preserve=True,
        resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[grant])))


def addons(cluster: str, platform: Platform, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The EKS add-ons, after the system node group (an add-on needs a node to become active)."""
    fsx = platform.spec.storage.aws.fsx_subnet_id is not None
    agent: list[pulumi.Resource] = []
    created: list[pulumi.Resource] = []
    for name, access in ADDONS.items():
        if name == "aws-fsx-csi-driver" and not fsx:
            continue
        associations = []
        if access is not None:
            account, managed = access
            role = pod_role(name, opts, managed=managed)
            associations = [aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=account)]
        addon = aws.eks.Addon(
            f"addon-{name}", cluster_name=cluster, addon_name=name, pod_identity_associations=associations or None,
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=agent)))
        created.append(addon)
        if name == "eks-pod-identity-agent":
            agent = [addon]
    return created


def bucket_identities(cluster: str, platform: Platform, buckets: dict[str, pulumi.Input[str]],
                      after: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions) -> dict[str, WorkloadIdentity]:
    """One role per bucket user (Velero, each team's data account) that reaches only its bucket."""
    identities: dict[str, WorkloadIdentity] = {}
    for namespace, account, bucket in platform.storage.bucket_users():
        arn = buckets[bucket.key]
        inline = pulumi.Output.from_input(arn).apply(lambda a: policy([
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": a},
            {"Effect": "Allow", "Action": BUCKET_ACTIONS, "Resource": f"{a}/*"}]))
        role = pod_role(f"{namespace}-{account}", opts, inline=inline)
        aws.eks.PodIdentityAssociation(
            f"identity-{namespace}-{account}", cluster_name=cluster, namespace=namespace, service_account=account,
            role_arn=role.arn, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(after))))
        identities[account_key(namespace, account)] = WorkloadIdentity()
    return identities


def login(cluster: str, platform: Platform, opts: pulumi.ResourceOptions) -> None:
    """The personas' groups in requests: ID tokens of the OIDC provider, or IAM roles mapped to groups."""
    spec, identity = platform.spec.cluster.eks, platform.spec.identity
    assert spec is not None
    oidc = spec.login.oidc
    if oidc is not None:
        prefix = identity.group_prefix or None
        aws.eks.IdentityProviderConfig("login", cluster_name=cluster, oidc={
            "identity_provider_config_name": "trainyard", "issuer_url": oidc.issuer_url, "client_id": oidc.client_id,
            "groups_claim": oidc.groups_claim, "groups_prefix": prefix, "username_claim": oidc.username_claim,
            "username_prefix": prefix}, opts=opts)
    for index, (role, groups) in enumerate(sorted(spec.login.access_entries.items())):
        aws.eks.AccessEntry(f"login-{index}", cluster_name=cluster, principal_arn=role, type="STANDARD",
                            kubernetes_groups=[identity.group(g) for g in groups], opts=opts)


def node_template_tags(platform: Platform, pool_name: str) -> dict[str, str]:
    """What a node of an autoscaled pool will advertise, for the autoscaler to scale it up from zero (read from
    the node group's tags): GPUs as the sharing or MIG setup offers them, and EFA interfaces."""
    pool, flavor = platform.pool(pool_name), platform.flavor(pool_name)
    if pool.autoscale is None:
        return {}
    tags = {f"k8s.io/cluster-autoscaler/node-template/resources/{resource}":
            str(int(flavor.max_capacity[resource]) // pool.autoscale.max) for resource in flavor.gpu_resources}
    if pool.fabric_request is not None:
        resource, count = pool.fabric_request
        tags[f"k8s.io/cluster-autoscaler/node-template/resources/{resource}"] = str(count)
    return tags


def autoscaling(cluster: str, platform: Platform, region: str, provider: pulumi.ProviderResource,
                after: Sequence[pulumi.Resource], opts: pulumi.ResourceOptions, parent: pulumi.Resource) -> None:
    """The cluster autoscaler on the system pool, for pools that grow; the termination handler on Spot nodes."""
    pools = [platform.pool(f.pool) for f in platform.flavors]
    on_k8s = pulumi.ResourceOptions(parent=parent, provider=provider)
    if any(p.autoscale is not None and p.autoscale.min < p.autoscale.max for p in pools):
        role = pod_role(AUTOSCALER_ACCOUNT, opts, inline=policy([
            {"Effect": "Allow", "Action": AUTOSCALER_ACTIONS, "Resource": "*"}]))
        association = aws.eks.PodIdentityAssociation(
            "identity-cluster-autoscaler", cluster_name=cluster, namespace="kube-system",
            service_account=AUTOSCALER_ACCOUNT, role_arn=role.arn,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(after))))
        helm_chart("cluster-autoscaler", CLUSTER_AUTOSCALER_CHART, "kube-system", {
            "cloudProvider": "aws", "awsRegion": region, "autoDiscovery": {"clusterName": cluster},
            "image": {"tag": CLUSTER_AUTOSCALER_IMAGES[platform.spec.versions.kubernetes]},
            "rbac": {"serviceAccount": {"name": AUTOSCALER_ACCOUNT}},
            "extraArgs": {"balance-similar-node-groups": True, "expander": "least-waste",
                          "skip-nodes-with-local-storage": False},
            "nodeSelector": SYSTEM,
        }, pulumi.ResourceOptions.merge(on_k8s, pulumi.ResourceOptions(depends_on=[association])))
    if any(p.capacity_type == "spot" for p in pools):
        # IMDS mode: a DaemonSet on the Spot nodes drains a node on its two-minute interruption notice (EKS
        # itself replaces nodes on rebalance recommendations); it tolerates every taint by default.
        helm_chart("node-termination-handler", NODE_TERMINATION_HANDLER_CHART, "kube-system", {
            "enableSpotInterruptionDraining": True, "daemonsetNodeSelector": SPOT_LABEL,
        }, on_k8s)


def efs_mount_targets(file_system: pulumi.Input[str], vpc_id: pulumi.Input[str], vpc_cidr: pulumi.Input[str],
                      subnets: dict[str, pulumi.Input[str]], opts: pulumi.ResourceOptions) -> None:
    """EFS is reachable from the nodes' subnets only through a mount target in each, open to NFS (2049)."""
    group = aws.ec2.SecurityGroup("efs", vpc_id=vpc_id, description="NFS from the cluster's VPC to EFS",
                                  ingress=[{"protocol": "tcp", "from_port": 2049, "to_port": 2049,
                                            "cidr_blocks": [vpc_cidr]}], opts=opts)
    for zone, subnet in sorted(subnets.items()):
        aws.efs.MountTarget(f"efs-{zone}", file_system_id=file_system, subnet_id=subnet,
                            security_groups=[group.id], opts=opts)
