"""An AWS network for EKS, created or reused by id: a VPC with, per zone, a public subnet (load balancers, the
NAT gateway) and a private subnet (nodes); one NAT gateway gives the private subnets egress. Subnets carry the
tags EKS uses to place load balancers."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.cluster.base import split
from infra.spec.clouds.aws import AwsNetwork


@dataclass(frozen=True)
class AwsSubnets:
    vpc_id: pulumi.Input[str]
    private: dict[str, pulumi.Input[str]]  # zone -> subnet id (nodes)
    public: dict[str, pulumi.Input[str]]


def aws_subnets(spec: AwsNetwork, cluster_name: str, opts: pulumi.ResourceOptions) -> AwsSubnets:
    if spec.existing is not None:
        return AwsSubnets(spec.existing.vpc_id, dict(spec.existing.private_subnets), dict(spec.existing.public_subnets))
    assert spec.create is not None
    created = AwsVpc("network", spec.create.cidr, spec.create.zones, cluster_name, opts)
    return AwsSubnets(created.vpc.id, created.private, created.public)


class AwsVpc(pulumi.ComponentResource):
    def __init__(self, name: str, cidr: str, zones: list[str], cluster_name: str,
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("trainyard:cluster:AwsVpc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {"Name": cluster_name, f"kubernetes.io/cluster/{cluster_name}": "shared"}
        self.vpc = aws.ec2.Vpc("vpc", cidr_block=cidr, enable_dns_hostnames=True, enable_dns_support=True,
                               tags=tags, opts=child)
        gateway = aws.ec2.InternetGateway("internet", vpc_id=self.vpc.id, tags=tags, opts=child)
        ranges = split(cidr, 2 * len(zones))
        public_routes = aws.ec2.RouteTable("public", vpc_id=self.vpc.id, tags=tags, opts=child,
                                           routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}])
        self.public: dict[str, pulumi.Input[str]] = {}
        self.private: dict[str, pulumi.Input[str]] = {}
        for index, zone in enumerate(zones):
            subnet = aws.ec2.Subnet(f"public-{zone}", vpc_id=self.vpc.id, cidr_block=ranges[len(zones) + index],
                                    availability_zone=zone, map_public_ip_on_launch=True,
                                    tags={**tags, "kubernetes.io/role/elb": "1"}, opts=child)
            aws.ec2.RouteTableAssociation(f"public-{zone}", subnet_id=subnet.id, route_table_id=public_routes.id,
                                          opts=child)
            self.public[zone] = subnet.id
        address = aws.ec2.Eip("nat", domain="vpc", tags=tags, opts=child)
        nat = aws.ec2.NatGateway("nat", allocation_id=address.allocation_id, subnet_id=self.public[zones[0]],
                                 tags=tags, opts=child)
        private_routes = aws.ec2.RouteTable("private", vpc_id=self.vpc.id, tags=tags, opts=child,
                                            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}])
        for index, zone in enumerate(zones):
            subnet = aws.ec2.Subnet(f"private-{zone}", vpc_id=self.vpc.id, cidr_block=ranges[index],
                                    availability_zone=zone, tags={**tags, "kubernetes.io/role/internal-elb": "1"},
                                    opts=child)
            aws.ec2.RouteTableAssociation(f"private-{zone}", subnet_id=subnet.id, route_table_id=private_routes.id,
                                          opts=child)
            self.private[zone] = subnet.id
        self.register_outputs({"vpcId": self.vpc.id, "zones": zones})
