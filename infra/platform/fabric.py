"""Fabric: what makes a pool's high-speed network interfaces schedulable.

EFA pools (EKS) get AWS's EFA device plugin, which advertises every EFA interface of a node as
`vpc.amazonaws.com/efa`; a training pod requests all of its node's interfaces (Trainer 2.2: in the TrainJob's
`resourcesPerNode`) and NCCL reaches them through aws-ofi-nccl. Without the plugin, or without the request, NCCL
falls back to TCP sockets. Kueue ignores the resource (queueing.excludeResourcePrefixes): the interfaces come
with the node, which the GPUs already gate. InfiniBand and RoCE pools bring their own RDMA device plugin (the
NVIDIA Network Operator, a prerequisite of the cluster); their `fabricDevice` names what it advertises.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.naming import named
from infra.kit.objects import child_opts, helm_chart
from infra.spec import Flavor, Platform
from infra.spec.queues.flavors import distinct_tolerations
from infra.spec.versions import EFA_DEVICE_PLUGIN_CHART

NAMESPACE = "kube-system"


def efa_flavors(platform: Platform) -> list[Flavor]:
    return [flavor for flavor in platform.flavors if platform.pool(flavor.pool).efa_interfaces]


class Fabric(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Fabric", name, None, opts)
        flavors = efa_flavors(platform)
        # The chart's own affinity keeps the DaemonSet on EFA-capable instance types; the GPU pools' taints
        # would keep it off them.
        values = {"tolerations": [dict(t) for t in distinct_tolerations(flavors)]}
        self.chart = helm_chart("efa-device-plugin", EFA_DEVICE_PLUGIN_CHART, NAMESPACE, values,
                                child_opts(self, provider))
        self.register_outputs({"efaDevicePlugin": EFA_DEVICE_PLUGIN_CHART.version,
                               "efaPools": sorted(f.pool for f in flavors)})


def fabric(platform: Platform, provider: k8s.Provider) -> Fabric | None:
    """The fabric component where a pool needs a device plugin; None otherwise."""
    return Fabric(named("fabric"), platform, provider) if efa_flavors(platform) else None
