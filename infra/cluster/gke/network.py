"""A GCP network for GKE, created or reused by name: a VPC, one subnetwork for nodes with secondary ranges for
pods and services (VPC-native), and Cloud NAT so private nodes reach registries."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.spec.clouds.gcp import GcpNetwork


@dataclass(frozen=True)
class GcpSubnet:
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range: str
    services_range: str


def gcp_subnet(spec: GcpNetwork, region: str, vpc: str, opts: pulumi.ResourceOptions) -> GcpSubnet:
    """`vpc`: the name a created network gets (the Filestore classes name it: spec.clouds.gcp.vpc_name)."""
    if spec.existing is not None:
        existing = spec.existing
        return GcpSubnet(existing.network, existing.subnetwork, existing.pods_range, existing.services_range)
    assert spec.create is not None
    created = GcpVpc("network", spec.create.nodes, spec.create.pods, spec.create.services, region, vpc, opts)
    return GcpSubnet(created.network.id, created.subnetwork.id, GcpVpc.PODS, GcpVpc.SERVICES)


class GcpVpc(pulumi.ComponentResource):
    PODS, SERVICES = "pods", "services"

    def __init__(self, name: str, nodes: str, pods: str, services: str, region: str, vpc: str,
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("trainyard:cluster:GcpVpc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.network = gcp.compute.Network("vpc", name=vpc, auto_create_subnetworks=False, opts=child)
        self.subnetwork = gcp.compute.Subnetwork(
            "nodes", network=self.network.id, region=region, ip_cidr_range=nodes, private_ip_google_access=True,
            secondary_ip_ranges=[{"range_name": self.PODS, "ip_cidr_range": pods},
                                 {"range_name": self.SERVICES, "ip_cidr_range": services}],
            opts=child)
        router = gcp.compute.Router("router", network=self.network.id, region=region, opts=child)
        gcp.compute.RouterNat("nat", router=router.name, region=region, nat_ip_allocate_option="AUTO_ONLY",
                              source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES", opts=child)
        self.register_outputs({"network": self.network.id, "subnetwork": self.subnetwork.id})
