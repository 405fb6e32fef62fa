"""KServe and its guards (issue 31 point 3, docs/models.md "Serving"), on onprem-lab with `models` declared: vision
serves on the cpu pool (the example's model), nlp on the l40s pool with 2 GPUs.

- KServe renders in Standard mode, creates no Ingress, rolls with maxUnavailable 0; every webhook it installs has
  its Service; its images are pinned and listed.
- The example's predictor pod, as KServe builds it (runtime + storage initializer), passes PSA `restricted` and every
  policy and quota of its namespace when the replicaset controller creates it; with upstream's storage container
  (no securityContext) it is refused.
- `trainyard admit` admits the example's InferenceService, refuses another team's bucket, model-registry://, hf://,
  the wrong pool, and one above the serving budget (at the budget passes, one unit past is refused).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from infra.apiserver.admit import answer
from infra.apiserver.quota import Quotas
from infra.apiserver.rbac import Authorizer
from infra.apiserver.review import Reviewer
from infra.apiserver.schema import CrdIndex
from infra.apiserver.state import ClusterState
from infra.checks.charts import image_findings
from infra.offline import engine
from infra.offline.images import stack_images
from infra.platform.models.serving_policy import PREDICTOR_LABEL
from infra.spec import Platform, validate
from infra.spec.input.keys import PLATFORM_KEY
from tests.conftest import CRDS, ROOT, kube_objects, raw_platform

STACK = "onprem-lab"
EXAMPLE = ROOT / "examples" / "serving" / "inferenceservice.yaml"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
CONTROLLER_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
SERVING = "ValidatingAdmissionPolicy 'trainyard-serving' denied request: "


def _raw() -> dict[str, Any]:
    raw = raw_platform(STACK)
    raw["models"] = {"registry": {"version": "0.3.7"}, "serving": {"version": "0.16.0"}}
    raw["teams"]["vision"]["serving"] = {"pool": "cpu", "cpu": "8", "memory": "32Gi"}
    raw["teams"]["nlp"]["quota"]["l40s"] = 6
    raw["teams"]["nlp"]["serving"] = {"pool": "l40s", "gpus": 2, "cpu": "4", "memory": "16Gi"}
    return raw


@pytest.fixture(scope="module")
def served() -> tuple[Platform, engine.Capture]:
    raw = _raw()
    return validate(raw, STACK), engine.run(STACK, {PLATFORM_KEY: raw})


def _crds(platform: Platform) -> CrdIndex:
    return CrdIndex(CRDS, platform.spec.versions.crd_dirs())


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))


def _admit(served: tuple[Platform, engine.Capture], *objects: dict[str, Any], as_: str = "ml-engineer:vision"
           ) -> list[str]:
    platform, capture = served
    lines, _ = answer(platform, capture, [copy.deepcopy(o) for o in objects], _crds(platform), as_)
    return [line for line in lines if not line.startswith(("not checked", "warning"))]


# --- KServe as installed -----------------------------------------------------------------------------------------

def test_kserve_runs_in_standard_mode_with_no_ingress_and_rolls_without_unavailability(served: Any) -> None:
    objects = kube_objects(served[1])
    config = _one(objects, "ConfigMap", "inferenceservice-config")["data"]
    deploy, ingress = json.loads(config["deploy"]), json.loads(config["ingress"])
    assert deploy == {"defaultDeploymentMode": "Standard",
                      "deploymentRolloutStrategy": {"defaultRollout": {"maxSurge": "25%", "maxUnavailable": "0%"}}}
    assert ingress["disableIngressCreation"] is True and ingress["enableGatewayApi"] is False
    assert "pathTemplate" not in ingress
    assert not [o for o in objects if o["kind"] in ("Ingress", "IngressClass", "HTTPRoute")]
    assert not [o for o in objects if str(o["apiVersion"]).startswith("serving.knative.dev")]


def test_every_kserve_webhook_reaches_a_service_with_pods(served: Any) -> None:
    """The LLM controller is removed with its webhook: no failurePolicy Fail webhook points at a missing Service."""
    objects = kube_objects(served[1])
    services = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "Service"}
    configs = [o for o in objects if o["kind"].endswith("WebhookConfiguration") and "kserve" in o["metadata"]["name"]]
    assert len(configs) == 7
    for config in configs:
        for hook in config["webhooks"]:
            service = hook["clientConfig"]["service"]
            assert (service["namespace"], service["name"]) == ("kubeflow", "kserve-webhook-server-service")
    assert ("kubeflow", "kserve-webhook-server-service") in services
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"}
    assert "kserve-controller-manager" in names
    assert not {"llmisvc-controller-manager", "kserve-localmodel-controller-manager"} & names


def test_kserve_images_are_pinned_and_listed(served: Any) -> None:
    objects = kube_objects(served[1])
    kserve = [o for o in objects if o.get("apiVersion", "").startswith("serving.kserve.io")
              or o["metadata"].get("name", "").startswith("kserve")]
    assert image_findings(kserve) == []
    images = stack_images(objects)
    for image in ("docker.io/kserve/kserve-controller:v0.16.0", "docker.io/kserve/storage-initializer:v0.16.0",
                  "docker.io/kserve/sklearnserver:v0.16.0", "docker.io/library/python:3.12.12-slim-bookworm"):
        assert image in images, image


def test_without_models_nothing_of_kserve_renders() -> None:
    raw = raw_platform(STACK)
    del raw["models"]
    for team in raw["teams"].values():
        team.pop("serving", None)
    capture = engine.run(STACK, {PLATFORM_KEY: raw})
    assert kube_objects(capture)  # the stack still renders
    assert not [o for o in kube_objects(capture) if "kserve" in json.dumps(o.get("metadata", {}))]


# --- the example's predictor pod ------------------------------------------------------------------------------------

def predictor_pod(isvc: dict[str, Any], runtime: dict[str, Any], storage: dict[str, Any]) -> dict[str, Any]:
    """The pod KServe's Deployment makes of an InferenceService in Standard mode: the runtime's container with the
    model's resources and the name filled in, and the storage container's initializer downloading to /mnt/models."""
    name, predictor = isvc["metadata"]["name"], isvc["spec"]["predictor"]
    model = predictor["model"]
    mount = {"name": "kserve-provision-location", "mountPath": "/mnt/models"}
    container = copy.deepcopy(runtime["spec"]["containers"][0])
    container["args"] = [arg.replace("{{.Name}}", name) for arg in container.get("args", [])]
    container["resources"] = model["resources"]
    container["volumeMounts"] = [{**mount, "readOnly": True}]
    init = {**copy.deepcopy(storage["spec"]["container"]), "args": [model["storageUri"], "/mnt/models"],
            "volumeMounts": [mount]}
    spec = {key: copy.deepcopy(predictor[key]) for key in ("nodeSelector", "tolerations", "serviceAccountName")
            if key in predictor}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-predictor-5d8f7c9b4-x2x7q", "namespace": isvc["metadata"]["namespace"],
                         "labels": {PREDICTOR_LABEL: name, "component": "predictor"}},
            "spec": {**spec, "initContainers": [init], "containers": [container],
                     "volumes": [{"name": mount["name"], "emptyDir": {}}]}}


def created_by(served: Any, pod: dict[str, Any], user: str = REPLICASET_CONTROLLER,
               groups: tuple[str, ...] = CONTROLLER_GROUPS) -> list[str]:
    """A controller's Pod create (KServe's predictors: the ReplicaSet controller's): every admission rule, then the
    namespace's quota."""
    platform, capture = served
    rendered = kube_objects(capture)
    cluster = ClusterState([*rendered, pod])
    crds = _crds(platform)
    crds.install(o for o in rendered if o["kind"] == "CustomResourceDefinition")
    verdict = Reviewer(platform.spec.versions, crds, cluster, platform.queueing.exclude_resource_prefixes).review(
        pod, user=user, groups=groups)
    return [r.line() for r in verdict.refusals or Quotas(cluster, rendered).review(pod)]


def _runtime_and_storage(served: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    objects = kube_objects(served[1])
    return (_one(objects, "ClusterServingRuntime", "trainyard-linear"),
            _one(objects, "ClusterStorageContainer", "default"))


def test_the_examples_predictor_pod_passes_psa_restricted_and_every_policy(served: Any) -> None:
    runtime, storage = _runtime_and_storage(served)
    assert created_by(served, predictor_pod(_example(), runtime, storage)) == []


def test_upstreams_storage_initializer_would_be_refused_by_psa_restricted(served: Any) -> None:
    runtime, storage = _runtime_and_storage(served)
    upstream = copy.deepcopy(storage)
    del upstream["spec"]["container"]["securityContext"]
    refusals = created_by(served, predictor_pod(_example(), runtime, upstream))
    assert refusals and any("restricted" in line or "runAsNonRoot" in line for line in refusals)


def _gpu_isvc(namespace: str = "nlp-models", pool: str = "l40s", gpus: int = 1) -> dict[str, Any]:
    isvc = _example()
    isvc["metadata"] = {"name": "ranker", "namespace": namespace}
    predictor = isvc["spec"]["predictor"]
    predictor["nodeSelector"] = {"trainyard.io/pool": pool}
    predictor["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    predictor["model"]["storageUri"] = "s3://trainyard-lab-nlp-datasets/models/ranker/3/"
    predictor["model"]["resources"] = {"requests": {"cpu": "1", "memory": "4Gi"},
                                       "limits": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": gpus}}
    return isvc


def test_a_gpu_predictor_pod_runs_outside_kueue_in_the_models_namespace_only(served: Any) -> None:
    runtime, storage = _runtime_and_storage(served)
    assert created_by(served, predictor_pod(_gpu_isvc(), runtime, storage)) == []
    elsewhere = predictor_pod(_gpu_isvc(namespace="nlp"), runtime, storage)
    assert any("a Pod that requests GPUs must be created by a Job that Kueue admitted" in line
               for line in created_by(served, elsewhere))


def test_a_predictor_pod_off_its_teams_serving_pool_is_refused(served: Any) -> None:
    runtime, storage = _runtime_and_storage(served)
    pod = predictor_pod(_gpu_isvc(), runtime, storage)
    pod["spec"]["nodeSelector"] = {"trainyard.io/pool": "h100"}
    refusals = created_by(served, pod)
    assert any(SERVING + "a predictor pod runs on its team's serving pool" in line for line in refusals)


# --- trainyard admit -------------------------------------------------------------------------------------------------

def test_admit_admits_the_example(served: Any) -> None:
    assert _admit(served, _example()) == ["admitted InferenceService/vision-models/train-eval"]
    assert _admit(served, _example(), as_="ci:vision") == ["admitted InferenceService/vision-models/train-eval"]


def _with_uri(uri: str) -> dict[str, Any]:
    isvc = _example()
    isvc["spec"]["predictor"]["model"]["storageUri"] = uri
    return isvc


@pytest.mark.parametrize("uri", ["s3://trainyard-lab-nlp-datasets/models/ranker/3/", "model-registry://train-eval/1",
                                 "hf://meta-llama/Llama-3.2-1B", "https://example.com/model.json",
                                 "s3://trainyard-lab-vision-datasets/models/../../trainyard-lab-nlp-datasets/x"])
def test_admit_refuses_a_model_from_outside_the_teams_artifacts(served: Any, uri: str) -> None:
    (line,) = _admit(served, _with_uri(uri))
    assert line.startswith(f"refused InferenceService/vision-models/train-eval: admission-policy: {SERVING}"
                           "a storageUri must be inside the team's own artifacts (s3://trainyard-lab-vision-datasets/)")
    assert "nlp-datasets/)" not in line and "speech-datasets" not in line  # no other team's bucket is named


def test_admit_admits_a_claim_of_the_namespace(served: Any) -> None:
    assert _admit(served, _with_uri("pvc://models/train-eval/1/")) == [
        "admitted InferenceService/vision-models/train-eval"]


def test_admit_refuses_another_storage_uri_in_storage_uris(served: Any) -> None:
    isvc = _example()
    isvc["spec"]["predictor"]["storageUris"] = [{"uri": "s3://trainyard-lab-nlp-datasets/models/x/1/",
                                                 "mountPath": "/mnt/extra"}]
    (line,) = _admit(served, isvc)
    assert SERVING + "a storageUri must be inside" in line


@pytest.mark.parametrize("change", ["other-pool", "no-selector", "gpu-toleration", "node-name"])
def test_admit_refuses_a_predictor_off_the_teams_serving_pool(served: Any, change: str) -> None:
    isvc = _example()
    predictor = isvc["spec"]["predictor"]
    if change == "other-pool":
        predictor["nodeSelector"] = {"trainyard.io/pool": "l40s"}
    elif change == "no-selector":
        del predictor["nodeSelector"]
    elif change == "gpu-toleration":
        predictor["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    else:
        predictor["nodeName"] = "cpu-01"
    (line,) = _admit(served, isvc)
    assert SERVING + "the predictor runs on the team's serving pool cpu" in line


def test_admit_refuses_an_inference_service_outside_a_models_namespace(served: Any) -> None:
    isvc = _example()
    isvc["metadata"]["namespace"] = "vision"
    (line,) = _admit(served, isvc, as_="platform")
    assert SERVING + "InferenceServices run in a team's models namespace" in line


def _sized(cpu: str = "500m", memory: str = "256Mi", replicas: int = 1) -> dict[str, Any]:
    isvc = _example()
    isvc["spec"]["predictor"]["minReplicas"] = replicas
    isvc["spec"]["predictor"]["maxReplicas"] = max(replicas, 1)
    isvc["spec"]["predictor"]["model"]["resources"] = {"requests": {"cpu": cpu, "memory": memory},
                                                       "limits": {"cpu": cpu, "memory": memory}}
    return isvc


@pytest.mark.parametrize(("at", "past"), [({"cpu": "4"}, {"cpu": "4001m"}),
                                          ({"memory": "16Gi"}, {"memory": "16385Mi"}),
                                          ({"cpu": "2", "replicas": 3}, {"cpu": "2001m", "replicas": 3})])
def test_admit_holds_minreplicas_plus_one_pods_to_the_serving_budget(served: Any, at: dict[str, Any],
                                                                     past: dict[str, Any]) -> None:
    """vision's budget: 8 cpu, 32Gi; (minReplicas + 1) pods must fit: at the budget admitted, one unit past refused."""
    assert _admit(served, _sized(**at)) == ["admitted InferenceService/vision-models/train-eval"]
    (line,) = _admit(served, _sized(**past))
    assert line.startswith(f"refused InferenceService/vision-models/train-eval: admission-policy: {SERVING}"
                           "(minReplicas + 1) predictor pods")
    assert "teams.vision.serving: cpu 8, memory 32Gi" in line


def test_admit_holds_gpus_to_the_serving_budget(served: Any) -> None:
    assert _admit(served, _gpu_isvc(gpus=1), as_="ml-engineer:nlp") == [
        "admitted InferenceService/nlp-models/ranker"]
    (line,) = _admit(served, _gpu_isvc(gpus=2), as_="ml-engineer:nlp")
    assert SERVING + "(minReplicas + 1) predictor pods" in line and "nvidia.com/gpu 2" in line


def test_admit_refuses_requests_left_to_the_runtime(served: Any) -> None:
    isvc = _example()
    del isvc["spec"]["predictor"]["model"]["resources"]
    (line,) = _admit(served, isvc)
    assert SERVING + "state spec.predictor.model.resources.requests cpu and memory" in line


def test_admit_refuses_other_routes_to_a_download(served: Any) -> None:
    isvc = _example()
    isvc["spec"]["predictor"]["sklearn"] = {"storageUri": "s3://trainyard-lab-nlp-datasets/models/x/1/"}
    assert any(SERVING + "serve a model with spec.predictor.model" in line for line in _admit(served, isvc))


def test_serving_rights_by_persona_and_inference_services_in_the_models_namespace_only(served: Any) -> None:
    from infra.apiserver.identity import resolve
    platform, capture = served
    authorizer = Authorizer(kube_objects(capture))

    def can(persona: str, verb: str, namespace: str) -> bool:
        _, who = resolve(platform, persona, [])
        return authorizer.allows(who, verb, "serving.kserve.io", "inferenceservices", namespace)

    for verb in ("create", "update", "patch", "delete", "get", "list", "watch"):
        assert can("ml-engineer:vision", verb, "vision-models") and can("ci:vision", verb, "vision-models")
    for verb in ("get", "list", "watch"):
        assert can("analyst:vision", verb, "vision-models")
    for verb in ("create", "update", "patch", "delete"):
        assert not can("analyst:vision", verb, "vision-models")
    # Bound in each of the team's namespaces like the personas' roles; the serving policy keeps InferenceServices
    # to the models namespace.
    assert can("ml-engineer:vision", "create", "vision")
    elsewhere = _example()
    elsewhere["metadata"]["namespace"] = "vision"
    assert _admit(served, elsewhere)[0].startswith("refused InferenceService/vision/train-eval: admission-policy: "
                                                   f"{SERVING}InferenceServices run in a team's models namespace")
    assert not can("ml-engineer:vision", "create", "nlp-models")  # never in another team's
    assert _admit(served, _example(), as_="analyst:vision")[0].startswith(
        "refused InferenceService/vision-models/train-eval: rbac:")
