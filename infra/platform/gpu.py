"""The NVIDIA GPU Operator at its pinned version, configured from the pools.

- Driver and container toolkit: installed by the operator where nothing else provides them (on-prem, or a
  cloud pool whose stack says `gpuDriver: operator`); left to the node image or the cloud otherwise.
- Sharing: one named device-plugin config per time-sliced or MPS pool, in one ConfigMap; a pool's nodes
  select theirs with the `nvidia.com/device-plugin.config` label (set by the cluster layer from the flavor).
- MIG: the `mixed` strategy (so slices are `nvidia.com/mig-<profile>`) and one mig-parted config per MIG pool,
  selected with the `nvidia.com/mig.config` label.
- DCGM exporter on; every operand tolerates the GPU pools' taints.
Not installed where GPUs are simulated or where GKE runs its own GPU stack (Platform.gpu_stack).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import GPU_OPERATOR
from infra.kit.naming import named
from infra.kit.objects import child_opts, helm_chart, kube_object, metadata, namespace
from infra.platform.network import ANYWHERE, Flow, guard_namespace, metrics
from infra.spec import Platform
from infra.spec.cluster import GpuStack
from infra.spec.metrics import dcgm_metrics_csv
from infra.spec.queues.flavors import GpuOffer
from infra.spec.versions import GPU_DRIVER_VERSION, GPU_OPERATOR_CHART

NAMESPACE = GPU_OPERATOR.namespace
DEVICE_PLUGIN_CONFIGMAP = "trainyard-device-plugin-configs"
MIG_CONFIGMAP = "trainyard-mig-configs"
DCGM_METRICS_CONFIGMAP = "trainyard-dcgm-metrics"  # key dcgm-metrics.csv, as the operator mounts it
# The device-plugin default is a key outside the pools' names (pool names are DNS labels, which have no dots);
# the MIG default has to be `all-disabled`, the only default name the ClusterPolicy CRD accepts.
DEFAULT_DEVICE_PLUGIN_CONFIG = "trainyard.whole-gpus"
DEFAULT_MIG_CONFIG = "all-disabled"
MIG_STRATEGY = "mixed"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                            "effect": "NoSchedule"}
# GKE admits system-node-critical pods only in namespaces with a quota for that priority class.
CRITICAL_PRIORITY_CLASSES = ["system-node-critical", "system-cluster-critical"]


def _yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def device_plugin_config(offer: GpuOffer | None) -> str:
    """A k8s-device-plugin config (version v1): whole GPUs, or R time-sliced / MPS replicas per GPU."""
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": MIG_STRATEGY}}
    if offer is not None and offer.sharing == "time-slicing":
        config["sharing"] = {"timeSlicing": {
            "renameByDefault": False, "failRequestsGreaterThanOne": True,
            "resources": [{"name": offer.resource, "replicas": offer.units_per_gpu}]}}
    elif offer is not None and offer.sharing == "mps":
        config["sharing"] = {"mps": {"renameByDefault": False,
                                     "resources": [{"name": offer.resource, "replicas": offer.units_per_gpu}]}}
    return _yaml(config)


def _offers(platform: Platform) -> list[GpuOffer]:
    return [flavor.gpu for flavor in platform.flavors if flavor.gpu is not None]


def device_plugin_configs(platform: Platform) -> dict[str, str]:
    """ConfigMap data: the default config plus one per shared pool; empty when no pool shares GPUs."""
    shared = {offer.config: device_plugin_config(offer) for offer in _offers(platform)
              if offer.config is not None and offer.sharing in ("time-slicing", "mps")}
    return {DEFAULT_DEVICE_PLUGIN_CONFIG: device_plugin_config(None), **shared} if shared else {}


def mig_configs(platform: Platform) -> dict[str, str]:
    """ConfigMap data for the MIG manager (mig-parted format); empty when no pool uses MIG."""
    pools = {offer.config: [{"devices": "all", "mig-enabled": True,
                             "mig-devices": {offer.mig_profile: offer.units_per_gpu}}]
             for offer in _offers(platform) if offer.config is not None and offer.mig_profile is not None}
    if not pools:
        return {}
    configs = {DEFAULT_MIG_CONFIG: [{"devices": "all", "mig-enabled": False}], **pools}
    return {"config.yaml": _yaml({"version": "v1", "mig-configs": configs})}


def gpu_tolerations(platform: Platform) -> list[dict[str, str]]:
    """The GPU taint convention plus every GPU pool's own taints, each once."""
    tolerations = [dict(GPU_TOLERATION)]
    for flavor in platform.flavors:
        for toleration in flavor.tolerations if flavor.gpu else ():
            covered = any(t["key"] == toleration["key"] and t["effect"] == toleration["effect"]
                          and t["operator"] == "Exists" for t in tolerations)
            if not covered and dict(toleration) not in tolerations:
                tolerations.append(dict(toleration))
    return tolerations


def precompiled_driver(stack: GpuStack) -> dict[str, Any]:
    """The chart's driver values for a precompiled driver: the operator then pulls `<branch>-<kernel>-<os>`."""
    if not stack.driver or stack.driver_kernel is None:
        return {}
    return {"usePrecompiled": True, "version": GPU_DRIVER_VERSION.split(".")[0]}


def chart_values(platform: Platform) -> dict[str, Any]:
    stack = platform.gpu_stack
    tolerations = gpu_tolerations(platform)
    values: dict[str, Any] = {
        "driver": {"enabled": stack.driver, **precompiled_driver(stack)},
        "toolkit": {"enabled": stack.toolkit},
        "mig": {"strategy": MIG_STRATEGY},
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": [CONTROL_PLANE_TOLERATION, *tolerations]}},
        # Our field list (with ECC, NVLink-error and throttle counters); our ServiceMonitor (observability.py), as
        # the operator creates its own only if the monitoring CRDs existed when it reconciled.
        "dcgmExporter": {"enabled": True, "config": {"name": DCGM_METRICS_CONFIGMAP},
                         "serviceMonitor": {"enabled": False}},
        # Its pre-upgrade hook re-applies the chart's CRDs; helm.v4.Chart runs no hooks but applies crds/ itself.
        "operator": {"upgradeCRD": False},
    }
    if device_plugin_configs(platform):
        values["devicePlugin"] = {"config": {"name": DEVICE_PLUGIN_CONFIGMAP, "default": DEFAULT_DEVICE_PLUGIN_CONFIG}}
    mig_manager: dict[str, Any] = {"enabled": True}
    if mig_configs(platform):
        mig_manager["config"] = {"name": MIG_CONFIGMAP, "default": DEFAULT_MIG_CONFIG}
    if stack.reboot_for_mig:
        mig_manager["env"] = [{"name": "WITH_REBOOT", "value": "true"}]  # cloud VMs reset GPUs by rebooting
    values["migManager"] = mig_manager
    return values


class GpuOperator(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:GpuOperator", name, None, opts)
        # The operands are privileged node agents: the namespace admits them.
        ns = namespace(NAMESPACE, NAMESPACE, child_opts(self, provider),
                       labels={"pod-security.kubernetes.io/enforce": "privileged"})
        ready: list[pulumi.Resource] = [ns]
        # DCGM exporter 9400 and the operator's metrics 8080 (gpu-operator v26.7.0); a driver the operator
        # builds fetches kernel headers from the distribution's mirrors. The node agents run on the host network.
        compiles = platform.gpu_stack.driver and platform.gpu_stack.driver_kernel is None
        driver = [Flow("driver-packages", "Egress", ANYWHERE, (80, 443),
                       "the driver container fetches kernel headers from the distribution's mirrors")]
        guard_namespace(self, provider, NAMESPACE, ns,
                        [metrics(*GPU_OPERATOR.metrics_ports), *(driver if compiles else [])])
        for resource_name, configmap, data in (("device-plugin-configs", DEVICE_PLUGIN_CONFIGMAP,
                                                device_plugin_configs(platform)),
                                               ("mig-configs", MIG_CONFIGMAP, mig_configs(platform)),
                                               ("dcgm-metrics", DCGM_METRICS_CONFIGMAP,
                                                {"dcgm-metrics.csv": dcgm_metrics_csv()})):
            if data:
                ready.append(kube_object(resource_name, "v1", "ConfigMap", metadata(configmap, NAMESPACE),
                                         child_opts(self, provider, depends_on=[ns]), data=data))
        if platform.spec.cluster.gke is not None:
            critical = {
                "hard": {"pods": "100"},
                "scopeSelector": {"matchExpressions": [
                    {"operator": "In", "scopeName": "PriorityClass", "values": CRITICAL_PRIORITY_CLASSES}]}}
            ready.append(kube_object("critical-pods", "v1", "ResourceQuota", metadata("gpu-operator-quota", NAMESPACE),
                                     child_opts(self, provider, depends_on=[ns]), spec=critical))
        self.chart = helm_chart(GPU_OPERATOR.charts[0].release, GPU_OPERATOR_CHART, NAMESPACE, chart_values(platform),
                                child_opts(self, provider, depends_on=ready))
        self.register_outputs({"version": GPU_OPERATOR_CHART.version, "driver": platform.gpu_stack.driver,
                               "deviceConfigs": sorted(device_plugin_configs(platform)),
                               "migPools": sorted(o.config or "" for o in _offers(platform) if o.mig_profile)})

def gpu_operator(platform: Platform, provider: k8s.Provider) -> GpuOperator | None:
    """The operator where this cluster needs it and has GPU pools; None otherwise."""
    if not platform.gpu_stack.operator or not any(flavor.gpu for flavor in platform.flavors):
        return None
    return GpuOperator(named("gpu"), platform, provider)
