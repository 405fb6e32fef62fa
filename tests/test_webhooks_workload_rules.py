"""Kueue 0.19.2's Workload webhook (pkg/webhooks/workload_webhook.go validateTASSliceSize), called directly with
hand-built Workloads: each slice-topology layer's size must be greater than 0, and a refusal names the layer and
the size it was given (field.Invalid(path.Index(i).Child("size"), size, "must be greater than 0")). The v1beta2 CRD's
`minimum: 1` refuses such a size before the webhook sees it; the rule is upstream's second line of defence."""

from __future__ import annotations

from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.kueue_v0_19_workload import workload
from tests.kueue_cluster import MANAGED

STATE = ClusterState(MANAGED)
LAYERS = "spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints"


def layered(*sizes: int) -> dict[str, Any]:
    layers = [{"topology": level, "size": size} for level, size in zip(("block", "rack", "host"), sizes, strict=False)]
    container = {"name": "c", "image": "busybox:1.37"}
    pod_set = {"name": "main", "count": 8, "template": {"spec": {"containers": [container]}},
               "topologyRequest": {"podsetSliceRequiredTopologyConstraints": layers}}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "wl", "namespace": "vision"}, "spec": {"queueName": "vision", "podSets": [pod_set]}}


@pytest.mark.parametrize(("sizes", "refused"), [
    ((4, 2, 1), []),
    ((4, 2, 0), [f"{LAYERS}[2].size: Invalid value: 0: must be greater than 0"]),
    ((4, -1), [f"{LAYERS}[1].size: Invalid value: -1: must be greater than 0"]),
    ((-3, 2, -2), [f"{LAYERS}[0].size: Invalid value: -3: must be greater than 0",
                   f"{LAYERS}[2].size: Invalid value: -2: must be greater than 0"])])
def test_each_slice_layer_size_is_at_least_one_and_a_refusal_names_the_size(
        sizes: tuple[int, ...], refused: list[str]) -> None:
    assert [f"{r.field}: {r.message}" for r in workload(layered(*sizes), STATE)] == refused
