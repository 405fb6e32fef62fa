"""Serving inside the team's bounds (issue 31 point 3, docs/models.md "Serving"): `trainyard-serving`.

An InferenceService is created in a team's models namespace (`<team>-models`) whose team declares a serving budget
(teams.<t>.serving), and there:
- it names its model by `spec.predictor.model.storageUri` (and `spec.predictor.storageUris[].uri`) inside the
  team's own artifacts prefix (TeamModels.artifacts: `s3://<team bucket>/models/`, `gs://...`), or `pvc://` (a claim
  of the namespace itself: KServe mounts it from the pod's namespace). Another team's bucket, `model-registry://`
  (its storage initializer is `:latest`, and the URI may name any team's registry), `hf://`, `http(s)://`, `oci://`
  are refused; so are the other routes to a download: the deprecated framework fields, `storage` (a storage-config
  key naming any bucket), a STORAGE_URI in a container's environment, transformers, explainers and multi-node
  workers;
- its predictor selects the team's serving pool (the pool's node labels) and tolerates only that pool's taints,
  sets no nodeName, and keeps the platform's rollout (maxUnavailable 0: no deploymentStrategy of its own);
- its predictor states cpu and memory requests, and (minReplicas + 1) pods of it fit the serving budget: the one
  more pod is the rollout's surge, in which the next (or the previous, on rollback) version starts while the
  serving one keeps answering. The namespace's ResourceQuota bounds the sum over all of them; this bound refuses
  at creation what could never roll.
The predictor pods KServe's Deployments create (label `serving.kserve.io/inferenceservice`) are held to the same
pool: they are not Kueue's (infra/platform/admission.py exempts them from the queue rules in models namespaces
only), so the pool and the quota are what bound them.
"""

from __future__ import annotations

from typing import Any

from infra.platform.admission_cel import lit, when
from infra.platform.models.linear_runtime import PYTHON_IMAGE
from infra.platform.models.serving_patches import AGENT, RUNTIMES, STORAGE_INITIALIZER
from infra.spec import Platform
from infra.spec.queues.flavors import CPU, MEMORY
from infra.vocabulary import tolerates_cel

SERVING_POLICY = "trainyard-serving"
KSERVE_GROUP = "serving.kserve.io"
PREDICTOR_LABEL = "serving.kserve.io/inferenceservice"  # KServe's InferenceServicePodLabelKey, on predictor pods
PVC = "pvc://"
# PredictorSpec's deprecated framework fields (KServe v0.16.0 pkg/apis/serving/v1beta1/predictor.go).
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml", "lightgbm",
              "paddle")
P = "object.spec.predictor"
M = f"{P}.model"


def predictor_images() -> list[str]:
    """What a predictor pod runs: the ClusterServingRuntimes' images, the storage initializer and the agent KServe
    injects (request logging, batching): admitted by the registry policy like the training runtimes' images."""
    return [*RUNTIMES.values(), PYTHON_IMAGE, STORAGE_INITIALIZER, AGENT]


NO_TEAM: dict[str, Any] = {"team": "", "prefix": "", "pool": "", "labels": {}, "taints": [], "budget": {}}


def serving_facts(platform: Platform) -> dict[str, dict[str, Any]]:
    """Models namespace -> its team's serving bounds ('' pool: the team serves nothing)."""
    facts: dict[str, dict[str, Any]] = {}
    if platform.models is None:
        return facts
    for team in platform.models.teams:
        budget = team.serving
        if budget is None:
            facts[team.namespace] = {**NO_TEAM, "team": team.team, "prefix": team.artifacts}
            continue
        flavor = platform.flavor(budget.pool)
        amounts = {CPU: str(budget.cpu), MEMORY: str(budget.memory),
                   **{resource: str(budget.gpus) for resource in flavor.gpu_resources}}
        facts[team.namespace] = {
            "team": team.team, "prefix": team.artifacts, "pool": budget.pool, "labels": dict(flavor.node_labels),
            "taints": [{"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]} for t in flavor.taints],
            "budget": amounts}
    return facts


def _request(var: str) -> str:
    """CEL: what container-like `var` requests of the budget's resource `r` (its limit when it states no request:
    the API server's default for an extended resource), as a float."""
    def amount(part: str) -> str:
        return f"quantity(string({var}.resources.{part}[r])).asApproximateFloat()"
    requests = f"has({var}.resources.requests) && r in {var}.resources.requests"
    limits = f"has({var}.resources.limits) && r in {var}.resources.limits"
    return (f"(!has({var}.resources) ? 0.0 : (({requests}) ? {amount('requests')} : "
            f"(({limits}) ? {amount('limits')} : 0.0)))")


def _pod_request() -> str:
    """CEL: one predictor pod's request of `r`: the model container and any other predictor containers (the
    storage initializer's 100m/100Mi runs before them, inside their sum)."""
    others = f"(has({P}.containers) && size({P}.containers) > 0 ? {P}.containers.map(c, {_request('c')}).sum() : 0.0)"
    return f"((has({M}) ? {_request(M)} : 0.0) + {others})"


def _placed(spec: str) -> str:
    """CEL over pod spec `spec` (an ISVC predictor or a Pod's spec): on the team's pool, tolerating its taints
    only, no nodeName."""
    selected = (f"variables.team.labels.all(k, has({spec}.nodeSelector) && k in {spec}.nodeSelector && "
                f"{spec}.nodeSelector[k] == variables.team.labels[k])")
    tolerated = (f"(!has({spec}.tolerations) || {spec}.tolerations.all(t, "
                 f"variables.team.taints.exists(x, {tolerates_cel('t', 'x')})))")
    return f"({selected} && {tolerated} && (!has({spec}.nodeName) || {spec}.nodeName == ''))"


def _uris_inside() -> str:
    """CEL: every storage URI of the predictor is a claim of the namespace or under the team's prefix."""
    inside = (f"(u.startsWith('{PVC}') || (variables.team.prefix != '' && u.startsWith(variables.team.prefix))) "
              "&& !u.contains('..')")
    model = f"(!has({M}) || !has({M}.storageUri) || [{M}.storageUri].all(u, {inside}))"
    many = f"(!has({P}.storageUris) || {P}.storageUris.all(s, [s.uri].all(u, {inside})))"
    return f"{model} && {many}"


def _one_route() -> str:
    """CEL: the model is downloaded only through the checked URIs."""
    frameworks = " && ".join(f"!has({P}.{name})" for name in FRAMEWORKS)
    env = (f"(!has({P}.containers) || {P}.containers.all(c, !has(c.env) || "
           "c.env.all(e, e.name != 'STORAGE_URI')))")
    return (f"{frameworks} && (!has({M}) || !has({M}.storage)) && {env} && !has(object.spec.transformer) && "
            f"!has(object.spec.explainer) && !has({P}.workerSpec)")


def _fits_budget() -> str:
    pods = f"(double(has({P}.minReplicas) && {P}.minReplicas > 1 ? {P}.minReplicas : 1) + 1.0)"
    return (f"variables.team.budget.all(r, {pods} * {_pod_request()} <= "
            "quantity(variables.team.budget[r]).asApproximateFloat())")


def served(expression: str) -> str:
    """CEL: `expression` (over variables.team) holds, or the first rule already refuses the namespace."""
    return f"!variables.served || ({expression})"


def serving_policy(platform: Platform) -> dict[str, Any]:
    facts = serving_facts(platform)
    pools = "; ".join(f"{ns}: pool {f['pool']}" for ns, f in sorted(facts.items()) if f["pool"])
    stated = " && ".join(f"has({M}.resources.requests) && '{r}' in {M}.resources.requests" for r in (CPU, MEMORY))
    isvc = "inferenceservices"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [KSERVE_GROUP], "apiVersions": ["*"], "resources": [isvc],
             "operations": ["CREATE", "UPDATE"]},
            {"apiGroups": [""], "apiVersions": ["*"], "resources": ["pods"], "operations": ["CREATE"]}]},
        "variables": [
            {"name": "serving", "expression": lit(facts)},
            {"name": "served", "expression": ("request.namespace in variables.serving && "
                                              "variables.serving[request.namespace].pool != ''")},
            # Every namespace gets a value (an empty team outside the models namespaces), so no evaluator, lazy or
            # not, ever looks up a missing key.
            {"name": "team", "expression": ("request.namespace in variables.serving ? "
                                            "variables.serving[request.namespace] : " + lit(NO_TEAM))},
            {"name": "predictorPod", "expression": (
                f"request.resource.resource == 'pods' && has(object.metadata.labels) && "
                f"'{PREDICTOR_LABEL}' in object.metadata.labels")},
        ],
        "validations": [
            {"expression": when(isvc, "variables.served"), "reason": "Forbidden",
             "message": "InferenceServices run in a team's models namespace, and only for a team with a serving "
                        "budget (teams.<team>.serving): " + (pools or "no team declares one")},
            {"expression": when(isvc, _one_route()), "reason": "Forbidden",
             "message": "serve a model with spec.predictor.model and its storageUri: the framework fields, "
                        "`storage`, STORAGE_URI in a container, transformers, explainers and multi-node workers "
                        "are not offered"},
            # The message names the requester's own bucket only: another team's bucket names stay its own.
            {"expression": when(isvc, served(_uris_inside())), "reason": "Forbidden",
             "messageExpression": (
                 "'a storageUri must be inside the team\\'s own artifacts (' + (variables.team.prefix != '' ? "
                 "variables.team.prefix : 'none on this stack') + ') or a claim of the namespace "
                 "(pvc://<claim>/<path>); another team\\'s bucket, model-registry://, hf://, http(s):// and "
                 "oci:// are refused'"),
             "message": "a storageUri must be inside the team's own artifacts or a claim of the namespace "
                        "(pvc://<claim>/<path>); another team's bucket, model-registry://, hf://, http(s):// and "
                        "oci:// are refused"},
            {"expression": when(isvc, served(_placed(P) + f" && !has({P}.deploymentStrategy)")), "reason": "Forbidden",
             "messageExpression": (
                 "'the predictor runs on the team\\'s serving pool ' + variables.team.pool + ': its nodeSelector "
                 "carries the pool\\'s labels, it tolerates only the pool\\'s taints, sets no nodeName, and keeps "
                 "the platform\\'s rollout (no deploymentStrategy)'"),
             "message": f"the predictor runs on the team's serving pool ({pools}), with no nodeName and no "
                        "deploymentStrategy of its own"},
            {"expression": when(isvc, served(f"has({M}) && {stated}")), "reason": "Forbidden",
             "message": "state spec.predictor.model.resources.requests cpu and memory: the models namespace's "
                        "quota is the team's serving budget"},
            {"expression": when(isvc, served(_fits_budget())), "reason": "Forbidden",
             "messageExpression": (
                 "'(minReplicas + 1) predictor pods (the rollout starts one more before the serving one goes) must "
                 "fit the team\\'s serving budget (teams.' + variables.team.team + '.serving: ' + "
                 "variables.team.budget.map(r, r + ' ' + variables.team.budget[r]).join(', ') + ')'"),
             "message": "(minReplicas + 1) predictor pods must fit the team's serving budget"},
            {"expression": f"!variables.predictorPod || !(request.namespace in variables.serving) || "
                           f"(variables.served && {_placed('object.spec')})", "reason": "Forbidden",
             "message": f"a predictor pod runs on its team's serving pool ({pools or 'none declared'}) and "
                        "tolerates only that pool's taints"},
        ],
    }
