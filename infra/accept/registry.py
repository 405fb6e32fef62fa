"""The team's Model Registry as `trainyard accept` uses it: its REST API (v1alpha3, kubeflow/model-registry@v0.3.7:
api/openapi/model-registry.yaml) at the team's registry Service (TeamModels.registry_url), reached through the run's
relay (relay.py).

v0.3.7's API deletes nothing (registered models, versions and artifacts have GET and PATCH only): what accept
registers it archives at the end (`state: ARCHIVED`), which is the registry's own way to retire a version.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from infra.accept.relay import Relayed
from infra.accept.runner import Failed
from infra.spec.models.model import REGISTRY_PORT, REGISTRY_SERVICE

API = "api/model_registry/v1alpha3"
ARCHIVED = "ARCHIVED"


class Registry:
    """One team's registry; a refusal or no answer fails the check naming the call."""

    def __init__(self, relayed: Relayed, namespace: str) -> None:
        self.relayed, self.namespace = relayed, namespace
        self.service = f"{REGISTRY_SERVICE}:{REGISTRY_PORT}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        status, answer = self.relayed.call(method, self.namespace, self.service, f"{API}{path}", body)
        if not 200 <= status < 300 or not isinstance(answer, dict):
            why = answer.get("message", answer) if isinstance(answer, dict) else answer
            raise Failed(f"model registry in {self.namespace}: {method} /{API}{path}: HTTP {status}: {why}")
        return answer

    def register_model(self, name: str, description: str) -> str:
        return str(self.call("POST", "/registered_models", {"name": name, "description": description})["id"])

    def register_version(self, model_id: str, name: str, uri: str, model_format: str) -> str:
        """A version of the model and its model artifact (where the bytes are, in which format)."""
        version = str(self.call("POST", "/model_versions", {"name": name, "registeredModelId": model_id})["id"])
        self.call("POST", f"/model_versions/{version}/artifacts", {
            "artifactType": "model-artifact", "name": f"{name}-model", "uri": uri, "modelFormatName": model_format})
        return version

    def archive(self, kind: str, entity_id: str) -> int:
        """PATCH the entity ARCHIVED (`kind`: registered_models or model_versions); the HTTP status."""
        status, _ = self.relayed.call("PATCH", self.namespace, self.service, f"{API}/{kind}/{quote(entity_id)}",
                                      {"state": ARCHIVED})
        return status
