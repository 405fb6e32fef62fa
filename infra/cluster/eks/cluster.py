"""EKS: the cluster (pulumi_eks), its network, the node role, and one managed node group per pool; the add-ons,
autoscaler, login, buckets and pod identities the platform needs are in eks_addons.py.

GPU pools use the AL2023 NVIDIA AMI (driver and container toolkit come with the image), EFA with a cluster
placement group in the pool's zone where the instance supports it, the pool's labels and taints, and
on-demand, Spot or capacity-block capacity (a capacity block needs a launch template that targets it).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.cluster.base import CLOUD_TAINT_EFFECTS, CloudCluster, kubernetes_provider
from infra.cluster.buckets import cloud_buckets
from infra.cluster.eks.addons import (
    addons,
    autoscaling,
    bucket_identities,
    efs_mount_targets,
    login,
    node_template_tags,
    vpc_cni,
)
from infra.cluster.eks.managed_prometheus import amazon_managed_prometheus
from infra.cluster.eks.network import AwsSubnets, aws_subnets
from infra.kit.contract import account_key
from infra.spec import Flavor, Platform
from infra.spec.audit import EKS_LOG_TYPES, destination
from infra.spec.clouds.common import SystemPool
from infra.spec.observability import PROMETHEUS_ACCOUNT
from infra.spec.pools import PoolSpec

GPU_AMI, CPU_AMI = "AL2023_x86_64_NVIDIA", "AL2023_x86_64_STANDARD"
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "reserved": "CAPACITY_BLOCK"}
# What the kubelet needs, and images only pulled; the VPC CNI's policy is on its own role (eks_addons.vpc_cni).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


def node_group_args(flavor: Flavor, pool: PoolSpec, subnets: AwsSubnets, tags: dict[str, str]) -> dict[str, Any]:
    """The ManagedNodeGroup arguments a pool implies (the launch template for capacity blocks aside)."""
    args: dict[str, Any] = {
        "instance_types": [pool.instance_type],
        "ami_type": GPU_AMI if pool.gpu else CPU_AMI,
        "capacity_type": CAPACITY_TYPES[pool.capacity_type],
        "scaling_config": {"min_size": pool.node_count, "desired_size": pool.node_count,
                           "max_size": pool.max_node_count},
        "labels": dict(flavor.node_labels),
        "taints": [{"key": t["key"], "value": t.get("value", ""), "effect": CLOUD_TAINT_EFFECTS[t["effect"]]}
                   for t in flavor.taints],
    }
    if pool.autoscale is not None:
        args["ignore_scaling_changes"] = True  # the cluster autoscaler owns desiredSize between min and max
    if tags:
        args["tags"] = tags
    if pool.fabric == "efa":
        # pulumi_eks exposes every EFA interface, creates the placement group and picks the zone's subnets.
        args |= {"enable_efa_support": True, "placement_group_availability_zone": pool.zone}
    elif pool.zone is not None:
        args["subnet_ids"] = [subnets.private[pool.zone]]
    return args


class EksCluster(CloudCluster):
    def __init__(self, name: str, platform: Platform, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:cluster:Eks", name, None, opts)
        spec = platform.spec.cluster.eks
        assert spec is not None
        self.aws = aws.Provider("aws", region=spec.region, opts=pulumi.ResourceOptions(parent=self))
        self.kind = "eks"
        subnets = aws_subnets(spec.network, platform.cluster_name, self._opts())
        role = self._node_role()
        endpoint = spec.endpoint
        # EKS writes control-plane logs to this group and would create it with no expiry: made first, with the
        # stack's retention (docs/access.md, the audit trail).
        audit_logs = aws.cloudwatch.LogGroup(
            "audit-logs", name=destination(platform.spec.audit, "eks", platform.cluster_name),
            retention_in_days=platform.spec.audit.retention_days, opts=self._opts())
        self.cluster = eks.Cluster(
            "eks",
            name=platform.cluster_name,
            version=platform.spec.versions.kubernetes,
            vpc_id=subnets.vpc_id,
            private_subnet_ids=list(subnets.private.values()),
            public_subnet_ids=list(subnets.public.values()) or None,
            node_associate_public_ip_address=False,
            authentication_mode=eks.AuthenticationMode.API,
            skip_default_node_group=True,
            create_oidc_provider=True,
            deletion_protection=True,
            # The API server answers the stack's networks only, and the VPC through the private endpoint.
            endpoint_private_access=True,
            endpoint_public_access=bool(endpoint.cidrs),
            public_access_cidrs=list(endpoint.cidrs) or None,
            # The VPC CNI is our own add-on (vpc_cni below): its role trusts this cluster's OIDC provider, which
            # the component's add-on could not be given without a cycle.
            use_default_vpc_cni=True,
            enabled_cluster_log_types=list(EKS_LOG_TYPES),
            opts=self._opts(protect=True, depends_on=[audit_logs]),
        )
        name = platform.cluster_name  # a plain name: the add-ons need no output of the remote component
        # The issuer URL itself (`oidc_issuer` is the same without https://, as IAM trust conditions name it).
        self.service_account_issuer = self.cluster.oidc_provider_url
        # Before any node: a node is Ready only once the CNI runs there with its credentials.
        self.cni = vpc_cni(name, self.cluster.oidc_provider_arn, self.cluster.oidc_issuer,
                           self._opts(depends_on=[self.cluster]))
        system = self._system(spec.system_pool, role)
        after_cluster = self._opts(depends_on=[self.cluster, system])
        installed = addons(name, platform, after_cluster)
        login(name, platform, self._opts(depends_on=[self.cluster]))
        groups: list[pulumi.Resource] = [system]
        for flavor in platform.flavors:
            pool = platform.pool(flavor.pool)
            args = node_group_args(flavor, pool, subnets, node_template_tags(platform, flavor.pool))
            if pool.capacity_type == "reserved":
                args["launch_template"] = self._capacity_block(flavor.name, pool)
            groups.append(eks.ManagedNodeGroup(f"pool-{flavor.name}", cluster=self.cluster, node_role=role,
                                               opts=self._opts(protect=True, depends_on=[self.cni]), **args))
        self.ready = (self.cni, *groups, *installed)
        self.provider = kubernetes_provider(self, platform, self.cluster.kubeconfig_json, self.ready)
        autoscaling(name, platform, spec.region, self.provider, installed, self._opts(), self)
        stored = cloud_buckets(platform, self)
        self.buckets, self.storage_parameters = stored.names, stored.parameters
        self.identities = {}
        if platform.storage.profile == "aws":
            self.identities = bucket_identities(name, platform, stored.ids, installed, self._opts())
            file_system = platform.spec.storage.aws.efs_file_system_id or stored.efs.id
            vpc_cidr = spec.network.create.cidr if spec.network.create else aws.ec2.get_vpc_output(
                id=subnets.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self, provider=self.aws)).cidr_block
            efs_mount_targets(file_system, subnets.vpc_id, vpc_cidr, subnets.private, self._opts())
        if platform.observability.managed_prometheus:
            self.remote_write, identity = amazon_managed_prometheus(platform, spec.region, installed, self._opts())
            self.identities[account_key(*PROMETHEUS_ACCOUNT)] = identity
        self.register_outputs({"cluster": platform.cluster_name, "region": spec.region,
                               "nodeGroups": [flavor.name for flavor in platform.flavors]})

    def _opts(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, providers=[self.aws], **options)

    def _node_role(self) -> aws.iam.Role:
        trust = {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
        role = aws.iam.Role("nodes", assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": [trust]}),
                            opts=self._opts())
        for policy in NODE_POLICIES:
            aws.iam.RolePolicyAttachment(f"nodes-{policy}", role=role.name,
                                         policy_arn=f"arn:aws:iam::aws:policy/{policy}", opts=self._opts())
        return role

    def _system(self, system: SystemPool, role: aws.iam.Role) -> eks.ManagedNodeGroup:
        return eks.ManagedNodeGroup(
            "system", cluster=self.cluster, node_role=role, instance_types=[system.instance_type],
            ami_type=CPU_AMI, capacity_type="ON_DEMAND", labels={"trainyard.io/role": "system"},
            scaling_config={"min_size": system.count, "desired_size": system.count, "max_size": system.count},
            opts=self._opts(protect=True, depends_on=[self.cni]))

    def _capacity_block(self, name: str, pool: PoolSpec) -> dict[str, pulumi.Input[str]]:
        template = aws.ec2.LaunchTemplate(
            f"capacity-block-{name}",
            instance_market_options={"market_type": "capacity-block"},
            capacity_reservation_specification={"capacity_reservation_target": {
                "capacity_reservation_id": pool.reservation}},
            opts=self._opts())
        return {"id": template.id, "version": template.latest_version.apply(str)}
