"""An Azure network for AKS, created or reused by id: a VNet with one node subnet (pods use Azure CNI overlay
addresses outside the VNet)."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure_native

from infra.cluster.base import split
from infra.spec.clouds.azure import AzureNetwork


def azure_subnet(spec: AzureNetwork, resource_group: pulumi.Input[str], location: str,
                 opts: pulumi.ResourceOptions) -> pulumi.Input[str]:
    if spec.existing is not None:
        return spec.existing.subnet_id
    assert spec.create is not None
    return AzureVnet("network", spec.create.cidr, resource_group, location, opts).subnet.id


class AzureVnet(pulumi.ComponentResource):
    def __init__(self, name: str, cidr: str, resource_group: pulumi.Input[str], location: str,
                 opts: pulumi.ResourceOptions) -> None:
        super().__init__("trainyard:cluster:AzureVnet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        vnet = azure_native.network.VirtualNetwork("vnet", resource_group_name=resource_group, location=location,
                                                   address_space={"address_prefixes": [cidr]}, opts=child)
        # Half the VNet for nodes; the rest stays free for private endpoints and later subnets.
        self.subnet = azure_native.network.Subnet("nodes", resource_group_name=resource_group,
                                                  virtual_network_name=vnet.name, address_prefix=split(cidr, 2)[0],
                                                  opts=child)
        self.register_outputs({"subnetId": self.subnet.id})
