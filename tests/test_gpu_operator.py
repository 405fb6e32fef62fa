"""The NVIDIA GPU Operator under mocks: pinned chart, driver where nothing else installs it, device-plugin
configs per shared pool selected by node label, MIG configs and strategy, DCGM on, GPU taints tolerated."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from infra.apiserver.schema import check_core, is_custom
from infra.offline.engine import Capture
from infra.spec import Platform
from infra.spec.pools import GPU_RESOURCE
from infra.spec.versions import GPU_OPERATOR_CHART
from tests.conftest import capture_of, kube_objects, platform_of
from tests.test_cloud_common import configmap, of_type, variant

ONPREM = "onprem-lab"


def _values(capture: Capture) -> dict[str, Any]:
    return dict(of_type(capture, "kubernetes:helm.sh/v4:Chart")["gpu-operator"].inputs["values"])


def _node_labels(capture: Capture, pool: str, platform: Platform) -> list[dict[str, str]]:
    patches = {r.inputs["metadata"]["name"]: r for r in capture.resources if r.type == "kubernetes:core/v1:NodePatch"}
    return [patches[node].inputs["metadata"]["labels"] for node in platform.pool(pool).nodes or []]


def test_on_prem_the_operator_installs_the_driver_from_the_pinned_chart() -> None:
    chart = of_type(capture_of(ONPREM), "kubernetes:helm.sh/v4:Chart")["gpu-operator"]
    assert chart.inputs["version"] == GPU_OPERATOR_CHART.version == "v26.7.0"
    assert chart.inputs["chart"] == GPU_OPERATOR_CHART.path and "repositoryOpts" not in chart.inputs
    assert chart.inputs["namespace"] == "gpu-operator"
    values = chart.inputs["values"]
    assert values["driver"]["enabled"] is True and values["toolkit"]["enabled"] is True
    assert values["dcgmExporter"]["enabled"] is True
    assert values["mig"]["strategy"] == "mixed"


def test_operands_tolerate_every_gpu_pool_taint() -> None:
    platform, values = platform_of(ONPREM), _values(capture_of(ONPREM))
    tolerations = values["daemonsets"]["tolerations"]
    for flavor in platform.flavors:
        for taint in flavor.taints if flavor.gpu else ():
            assert any(t["key"] == taint["key"] and t["effect"] == taint["effect"]
                       and (t["operator"] == "Exists" or t.get("value") == taint.get("value")) for t in tolerations)
    assert all(t in values["node-feature-discovery"]["worker"]["tolerations"] for t in tolerations)


def test_clouds_that_bring_the_driver_keep_it() -> None:
    values = _values(capture_of("aws-prod"))  # the EKS AL2023 NVIDIA AMI has driver and toolkit
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    assert values["migManager"]["env"] == [{"name": "WITH_REBOOT", "value": "true"}]


def test_no_operator_where_gpus_are_simulated() -> None:
    assert platform_of("local").spec.cluster.existing.simulated_gpus  # type: ignore[union-attr]
    assert not of_type(capture_of("local"), "trainyard:platform:GpuOperator")


@functools.cache
def _time_sliced() -> tuple[Platform, Capture]:
    return variant(ONPREM, lambda raw: raw["pools"]["l40s"].update(sharing={"timeSlicing": 3}))


def test_a_time_sliced_pool_gets_its_named_config_and_its_nodes_select_it() -> None:
    platform, capture = _time_sliced()
    configs = configmap(capture, "trainyard-device-plugin-configs")["data"]
    sharing = yaml.safe_load(configs["l40s"])["sharing"]["timeSlicing"]
    assert sharing["resources"] == [{"name": GPU_RESOURCE, "replicas": 3}]
    assert sharing["failRequestsGreaterThanOne"] is True and sharing["renameByDefault"] is False
    assert "sharing" not in yaml.safe_load(configs["trainyard.whole-gpus"])
    config = _values(capture)["devicePlugin"]["config"]
    assert config == {"name": "trainyard-device-plugin-configs", "default": "trainyard.whole-gpus"}
    label = "nvidia.com/device-plugin.config"
    assert all(labels[label] == "l40s" for labels in _node_labels(capture, "l40s", platform))
    assert all(label not in labels for labels in _node_labels(capture, "h100", platform))


def test_a_time_sliced_pool_offers_and_is_guaranteed_replicas() -> None:
    platform, _ = _time_sliced()
    pool = platform.pool("l40s")
    assert platform.flavor("l40s").capacity[GPU_RESOURCE] == len(pool.nodes or []) * 4 * 3
    assert platform.quota_sums["l40s"][GPU_RESOURCE] == sum(
        team.pool_quota("l40s").gpus or 0 for team in platform.spec.teams.values() if "l40s" in team.quota)


def test_an_mps_pool_gets_an_mps_config() -> None:
    _, capture = variant(ONPREM, lambda raw: raw["pools"]["l40s"].update(sharing={"mps": 2}))
    sharing = yaml.safe_load(configmap(capture, "trainyard-device-plugin-configs")["data"]["l40s"])["sharing"]
    assert sharing == {"mps": {"renameByDefault": False, "resources": [{"name": GPU_RESOURCE, "replicas": 2}]}}


@functools.cache
def _mig() -> tuple[Platform, Capture]:
    def edit(raw: dict[str, Any]) -> None:
        raw["pools"]["h100"]["mig"] = {"profile": "3g.40gb"}
        for team in raw["teams"].values():
            if "h100" in team["quota"]:
                team["quota"]["h100"] = 8
    return variant(ONPREM, edit)


def test_a_mig_pool_gets_its_mig_manager_config_and_offers_mig_instances() -> None:
    platform, capture = _mig()
    layout = yaml.safe_load(configmap(capture, "trainyard-mig-configs")["data"]["config.yaml"])
    assert layout["version"] == "v1"
    assert layout["mig-configs"]["h100"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    values = _values(capture)["migManager"]["config"]
    assert values["name"] == "trainyard-mig-configs" and values["default"] in layout["mig-configs"]
    assert all(labels["nvidia.com/mig.config"] == "h100" for labels in _node_labels(capture, "h100", platform))
    flavor = platform.flavor("h100")  # 4 nodes x 8 H100 x 2 instances of 3g.40gb
    assert flavor.gpu_resources == ("nvidia.com/mig-3g.40gb",)
    assert flavor.capacity["nvidia.com/mig-3g.40gb"] == 4 * 8 * 2


def test_gpu_operator_objects_pass_the_kubernetes_schema() -> None:
    for platform, capture in (_time_sliced(), _mig()):
        objects = [o for o in kube_objects(capture) if not is_custom(o, None) and (
            o["metadata"].get("namespace") == "gpu-operator" or o["metadata"]["name"] == "gpu-operator")]
        assert objects
        for obj in objects:
            assert check_core(obj, platform.spec.versions.kubernetes) == [], obj["metadata"]["name"]
