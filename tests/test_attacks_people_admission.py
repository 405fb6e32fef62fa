"""Team `vision` of onprem-lab (with serving declared for vision and nlp, as tests/test_serving.py's `served`) submits
the people-facing layer's workloads as an attacker would, through the offline API server (`trainyard admit`: RBAC,
then every admission policy, Pod Security and the namespace's quotas): into another team's namespaces, past its queue,
onto the host or the GPU nodes through a pipeline step's or a predictor's pod, and past the front door with a Service
or a route. Pods that controllers create (Argo's step pods, KServe's predictor pods through their ReplicaSet) are
judged as created by that controller. Each refusal has an admitted neighbour, so that refusing everything fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.admit import answer
from infra.apiserver.identity import service_account
from infra.offline import engine
from infra.spec import Platform
from tests.pipelines import ARGO_CONTROLLER, QUEUE, image, step_pod, step_trainjob
from tests.test_serving import (
    CONTROLLER_GROUPS,
    REPLICASET_CONTROLLER,
    _crds,
    _example,
    _runtime_and_storage,
    created_by,
    predictor_pod,
    served,
)

__all__ = ["served"]  # the module fixture of tests/test_serving.py, shared
Served = tuple[Platform, engine.Capture]
ARGO_GROUPS = service_account("kubeflow", "argo").groups


def _admit(s: Served, obj: dict[str, Any], as_: str = "ml-engineer:vision") -> list[str]:
    platform, capture = s
    lines, _ = answer(platform, capture, [copy.deepcopy(obj)], _crds(platform), as_)
    return [line for line in lines if not line.startswith(("not checked", "warning"))]


def _refused(lines: list[str], why: str = "") -> bool:
    return bool(lines) and all(line.startswith("refused") for line in lines) and any(why in line for line in lines)


def _service(kind: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mine", "namespace": "vision-models"},
            "spec": {"type": kind, "selector": {"app": "mine"}, "ports": [{"port": 80, "targetPort": 8080}]}}


ROUTES = [
    {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "mine", "namespace": "vision"},
     "spec": {"rules": [{"host": "mine.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
         "service": {"name": "mine", "port": {"number": 80}}}}]}}]}},
    {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "mine",
                                                                                   "namespace": "vision-models"},
     "spec": {"hosts": ["*"], "gateways": ["kubeflow/kubeflow-gateway"],
              "http": [{"route": [{"destination": {"host": "train-eval-predictor.vision-models.svc"}}]}]}},
    {"apiVersion": "networking.istio.io/v1", "kind": "Gateway", "metadata": {"name": "mine", "namespace": "vision"},
     "spec": {"selector": {"istio": "ingressgateway"}, "servers": [{"port": {"number": 80, "name": "http",
                                                                             "protocol": "HTTP"}, "hosts": ["*"]}]}},
    {"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy", "metadata": {"name": "open",
                                                                                      "namespace": "vision-models"},
     "spec": {"action": "ALLOW", "rules": [{}]}},
]


# --- into another team's namespaces -----------------------------------------------------------------------------------

@pytest.mark.parametrize("as_", ["ml-engineer:vision", "ci:vision", "ci-serviceaccount:vision", "pipeline-step:vision"])
def test_nothing_of_vision_is_created_in_nlps_namespaces(served: Served, as_: str) -> None:
    isvc = _example()
    isvc["metadata"]["namespace"] = "nlp-models"
    isvc["spec"]["predictor"]["model"]["storageUri"] = "s3://trainyard-lab-nlp-datasets/models/ranker/3/"
    assert _refused(_admit(served, isvc, as_), "is forbidden")
    assert _refused(_admit(served, step_trainjob("nlp", "nlp"), as_), "is forbidden")
    # the neighbour: the same TrainJob in the attacker's own namespace on its own queue
    assert _admit(served, step_trainjob("vision", "vision"), as_) == ["admitted TrainJob/vision/train-step"]


def test_an_inference_service_of_vision_serves_nothing_from_nlps_bucket(served: Served) -> None:
    isvc = _example()
    assert _admit(served, isvc) == ["admitted InferenceService/vision-models/train-eval"]
    isvc["spec"]["predictor"]["model"]["storageUri"] = "s3://trainyard-lab-nlp-datasets/models/ranker/3/"
    assert _refused(_admit(served, isvc), "trainyard-serving")


# --- outside the queue ------------------------------------------------------------------------------------------------

def test_a_trainjob_on_another_teams_queue_or_none_is_refused(served: Served) -> None:
    for queue in ("nlp", None):
        job = step_trainjob("vision", "vision")
        if queue:
            job["metadata"]["labels"][QUEUE] = queue
        else:
            del job["metadata"]["labels"][QUEUE]
        assert _refused(_admit(served, job), "trainyard-queue-required"), queue


# --- a pipeline step's pod, as Argo creates it ------------------------------------------------------------------------

STEP_ATTACKS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # name -> (pod spec changes, container changes)
    "privileged": ({}, {"securityContext": {"privileged": True}}),
    "hostPath": ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, {}),
    "hostNetwork": ({"hostNetwork": True}, {}),
    "hostPID": ({"hostPID": True}, {}),
    "a GPU outside Kueue": ({}, {"resources": {"limits": {"nvidia.com/gpu": 1}}}),
    "tolerates every taint": ({"tolerations": [{"operator": "Exists"}]}, {}),
    "placed on a node by name": ({"nodeName": "gpu-a01"}, {}),
    "runs as root": ({"securityContext": {"runAsUser": 0}}, {}),
    "a priority above every job": ({"priorityClassName": "system-node-critical"}, {}),
}


def _changed(pod: dict[str, Any], spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"].update(copy.deepcopy(spec))
    pod["spec"]["containers"][0].update(copy.deepcopy(container))
    return pod


@pytest.mark.parametrize("attack", STEP_ATTACKS)
def test_a_pipeline_steps_pod_meets_every_pod_rule(served: Served, attack: str) -> None:
    pod = step_pod("vision", image(served[0]))
    assert created_by(served, pod, ARGO_CONTROLLER, ARGO_GROUPS) == []
    assert created_by(served, _changed(pod, *STEP_ATTACKS[attack]), ARGO_CONTROLLER, ARGO_GROUPS) != []


# --- a predictor's pod, as KServe's Deployment creates it -------------------------------------------------------------

POOL_RIGHTS = ("a GPU outside Kueue", "tolerates every taint")


@pytest.mark.parametrize("attack", [a for a in STEP_ATTACKS if a not in POOL_RIGHTS])
def test_a_predictors_pod_meets_every_pod_rule(served: Served, attack: str) -> None:
    """A GPU and the serving pool's toleration are a predictor's right on its pool (tests/test_serving.py)."""
    runtime, storage = _runtime_and_storage(served)
    pod = predictor_pod(_example(), runtime, storage)
    assert created_by(served, pod, REPLICASET_CONTROLLER, CONTROLLER_GROUPS) == []
    changed = _changed(pod, *STEP_ATTACKS[attack])
    assert created_by(served, changed, REPLICASET_CONTROLLER, CONTROLLER_GROUPS) != []


def test_a_predictors_pod_in_a_training_namespace_is_refused_a_gpu(served: Served) -> None:
    runtime, storage = _runtime_and_storage(served)
    pod = predictor_pod(_example(), runtime, storage)
    pod["metadata"]["namespace"] = "vision"
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    assert any("Kueue" in line for line in created_by(served, pod, REPLICASET_CONTROLLER, CONTROLLER_GROUPS))


# --- past the front door ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("as_", ["ml-engineer:vision", "ci-serviceaccount:vision", "pipeline-step:vision"])
def test_no_service_or_route_of_vision_exposes_its_pods(served: Served, as_: str) -> None:
    for obj in [_service("LoadBalancer"), _service("NodePort"), _service("ClusterIP"), *ROUTES]:
        assert _refused(_admit(served, obj, as_), "is forbidden"), (as_, obj["kind"], obj.get("spec", {}).get("type"))
    # the platform itself may create them: the refusals are the identity's, not a missing kind
    assert _admit(served, _service("ClusterIP"), "platform") == ["admitted Service/vision-models/mine"]
