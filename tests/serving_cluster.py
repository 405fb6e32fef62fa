"""KServe in Standard mode and a team's Model Registry on the simulated cluster (tests/fake_cluster.py), for
`trainyard accept serve` and `rollback`.

KServe: an InferenceService's predictor is a Deployment rolled with maxUnavailable 0: for a new storageUri a new pod
starts (its storage initializer fetches the model), becomes Ready after READY_STEPS steps, and only then are the old
pods removed; the InferenceService is Ready while a predictor pod is. The predictor's Service
(`<name>-predictor:80`, reached through the API server's service proxy) answers the KServe v1 protocol from a ready pod,
with the prediction of the model at that pod's storageUri (`models`: URI -> predictions); a URI with no model never
becomes Ready (the initializer finds nothing). The predictor pods carry the InferenceService's labels, as KServe
copies them.

Both are reached only through accept's relay (the pod `accept-relay` in the run's namespace, Ready one step after
it is created, serving the namespaces of its $RELAY_NAMESPACES), as the team's network policies allow on a cluster:
a service proxy straight to the models namespace finds nothing.

The registry: the v1alpha3 REST paths accept uses (registered_models, model_versions, their artifacts), ids as
strings, PATCH of `state`; nothing is ever deleted (as v0.3.7's API).

`faults`: predict-fails (the predictor answers 500), drops-old (the old pods go as soon as the new one is created, as
maxUnavailable 1 would do), ignores-rollback (a storageUri served before is never rolled back to: v2 keeps serving),
registry-down (the registry answers 503).
"""

from __future__ import annotations

import itertools
from typing import Any

from infra.accept import relay
from infra.accept.serving import ISVC_POD_LABEL
from infra.spec.models.model import REGISTRY_PORT, REGISTRY_SERVICE, TeamModels
from tests.fake_cluster import SimulatedCluster, _cond, _set

KSERVE = "serving.kserve.io"
READY_STEPS = 3
API = "api/model_registry/v1alpha3/"


class ServingCluster:
    def __init__(self, sim: SimulatedCluster, team: TeamModels, models: dict[str, Any],
                 faults: tuple[str, ...] = ()) -> None:
        self.sim, self.team, self.models, self.faults = sim, team, models, set(faults)
        self.run_namespace = f"{team.team}-accept"
        self.inside: dict[tuple[str, str], Any] = {}  # (namespace, service:port) -> handler, behind the relay
        self.ids = itertools.count(1)
        self.entities: dict[tuple[str, str], dict[str, Any]] = {}  # (registered_models|model_versions, id) -> body
        self.artifacts: dict[str, list[dict[str, Any]]] = {}  # version id -> its artifacts
        self.ages: dict[str, int] = {}  # pod name -> steps since it was created
        self.served: list[str] = []  # storageUris rolled out, in order
        self.answered: list[str] = []  # per prediction: the storageUri of the pod that answered, or the failure
        self.turn = itertools.count()
        sim.controllers.append(self.step)
        self.inside[(team.namespace, f"{REGISTRY_SERVICE}:{REGISTRY_PORT}")] = self.registry
        sim.api.services[f"/api/v1/namespaces/{self.run_namespace}/services/{relay.NAME}:{relay.PORT}/proxy/"] = \
            self._relay
        sim.store.on_create[(KSERVE, "inferenceservices")] = self._created
        sim.store.on_delete[(KSERVE, "inferenceservices")] = self._deleted

    def _relay(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        pod = self.sim.store.get("", "pods", self.run_namespace, relay.NAME)
        if pod is None or not self._is_ready(pod):
            return 503, {"kind": "Status", "message": f"no endpoints available for service {relay.NAME}"}
        allowed = next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "RELAY_NAMESPACES")
        namespace, service, rest = [*path.split("/", 2), "", ""][:3]
        if namespace not in allowed.split(","):
            return 403, {"error": f"relay: {namespace} is not served"}
        handler = self.inside.get((namespace, service))
        return handler(method, rest, body) if handler else (502, {"error": f"relay: no {service} in {namespace}"})

    # the registry
    def registry(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if "registry-down" in self.faults:
            return 503, {"code": "503", "message": "upstream connect error"}
        if not path.startswith(API):
            return 404, {"message": f"no route {path}"}
        parts = path.removeprefix(API).split("/")
        if method == "POST" and parts == ["registered_models"]:
            if any(k == "registered_models" and e["name"] == body["name"] for (k, _), e in self.entities.items()):
                return 409, {"message": f"registered model {body['name']} already exists"}  # archived ones too
            return self._new("registered_models", {"name": body["name"], "state": "LIVE"})
        if method == "POST" and parts == ["model_versions"]:
            if ("registered_models", body.get("registeredModelId")) not in self.entities:
                return 400, {"message": "registeredModelId not found"}
            return self._new("model_versions", {"name": body["name"], "registeredModelId": body["registeredModelId"],
                                                "state": "LIVE"})
        if method == "POST" and len(parts) == 3 and parts[0] == "model_versions" and parts[2] == "artifacts":
            if ("model_versions", parts[1]) not in self.entities or body.get("artifactType") != "model-artifact":
                return 400, {"message": "bad artifact"}
            self.artifacts.setdefault(parts[1], []).append(body)
            return 201, {"id": str(next(self.ids)), **body}
        found = self.entities.get((parts[0], parts[1])) if len(parts) == 2 else None
        if found is None:
            return 404, {"message": f"{path} not found"}
        if method == "PATCH":
            found.update(body)
        return 200, found

    def _new(self, kind: str, body: dict[str, Any]) -> tuple[int, Any]:
        entity = {"id": str(next(self.ids)), **body}
        self.entities[(kind, entity["id"])] = entity
        return 201, entity

    # KServe
    def _created(self, isvc: dict[str, Any]) -> None:
        name = isvc["metadata"]["name"]
        self.inside[(self.team.namespace, f"{name}-predictor:80")] = lambda m, p, b: self._predict(name, m, p, b)

    def _deleted(self, isvc: dict[str, Any], _: bool) -> None:
        for pod in self._pods(isvc["metadata"]["name"]):
            self.sim.store.delete("", "pods", self.team.namespace, pod["metadata"]["name"])
        self.inside.pop((self.team.namespace, f"{isvc['metadata']['name']}-predictor:80"), None)

    def _pods(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.sim.store.list("", "pods", self.team.namespace)
                if p["metadata"]["labels"].get(ISVC_POD_LABEL) == name]

    @staticmethod
    def _uri(pod: dict[str, Any]) -> str:
        return str(pod["spec"]["initContainers"][0]["args"][0])

    @staticmethod
    def _is_ready(pod: dict[str, Any]) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))

    def _predict(self, name: str, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method != "POST" or path != f"v1/models/{name}:predict" or "instances" not in (body or {}):
            return 404, {"error": f"no route {method} {path}"}
        with self.sim.store.lock:
            ready = [p for p in self._pods(name) if self._is_ready(p)]
            if not ready:
                self.answered.append("503")
                return 503, {"kind": "Status", "message": f"no endpoints available for service {name}-predictor"}
            pod = ready[next(self.turn) % len(ready)]
            if "predict-fails" in self.faults:
                self.answered.append("500")
                return 500, {"error": "model raised"}
            self.answered.append(self._uri(pod))
            return 200, {"predictions": self.models[self._uri(pod)]}

    def _start(self, isvc: dict[str, Any], uri: str) -> None:
        labels = {**isvc["metadata"].get("labels", {}), ISVC_POD_LABEL: isvc["metadata"]["name"],
                  "component": "predictor"}
        name = f"{isvc['metadata']['name']}-predictor-{next(self.ids):05x}"
        self.sim.store.put("", "pods", {
            "metadata": {"name": name, "namespace": self.team.namespace, "labels": labels},
            "spec": {"initContainers": [{"name": "storage-initializer", "args": [uri, "/mnt/models"]}],
                     "containers": [{"name": "kserve-container"}]},
            "status": {"phase": "Pending", "conditions": []}})
        self.ages[name] = 0
        if "drops-old" in self.faults:
            for pod in self._pods(isvc["metadata"]["name"]):
                if self._uri(pod) != uri:
                    self.sim.store.delete("", "pods", self.team.namespace, pod["metadata"]["name"])

    def step(self) -> None:
        for pod in self.sim.store.list("", "pods", self.run_namespace):
            if pod["metadata"]["name"] == relay.NAME:
                pod.setdefault("status", {})["phase"] = "Running"
                _set(pod, _cond("Ready"))
        for isvc in self.sim.store.list(KSERVE, "inferenceservices", self.team.namespace):
            name = isvc["metadata"]["name"]
            uri = isvc["spec"]["predictor"]["model"]["storageUri"]
            if "ignores-rollback" in self.faults and uri in self.served[:-1]:
                uri = self.served[-1]
            if not self.served or self.served[-1] != uri:
                self.served.append(uri)
            pods = self._pods(name)
            if not any(self._uri(p) == uri for p in pods):
                self._start(isvc, uri)
            for pod in self._pods(name):
                self.ages[pod["metadata"]["name"]] += 1
                if self.ages[pod["metadata"]["name"]] >= READY_STEPS and self._uri(pod) in self.models:
                    pod["status"]["phase"] = "Running"
                    _set(pod, _cond("Ready"))
            if any(self._uri(p) == uri and self._is_ready(p) for p in self._pods(name)):
                for old in [p for p in self._pods(name) if self._uri(p) != uri]:
                    self.sim.store.delete("", "pods", self.team.namespace, old["metadata"]["name"])
            up = any(self._is_ready(p) for p in self._pods(name))
            _set(isvc, _cond("Ready", "True" if up else "False"))

    def leftovers(self) -> list[str]:
        """What accept left: InferenceServices, predictor pods, registry entities not archived."""
        found = [f"InferenceService {o['metadata']['name']}"
                 for o in self.sim.store.list(KSERVE, "inferenceservices", self.team.namespace)]
        found += [f"pod {p['metadata']['name']}" for p in self.sim.store.list("", "pods", self.team.namespace)
                  if ISVC_POD_LABEL in p["metadata"]["labels"]]
        found += [f"{kind}/{entity_id} {body['state']}" for (kind, entity_id), body in sorted(self.entities.items())
                  if body["state"] != "ARCHIVED"]
        return found
