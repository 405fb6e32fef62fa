"""The calls `trainyard accept` makes, over the official kubernetes client; objects go in and come out as plain
dicts (what `kubectl get -o json` shows)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from infra.live.verify import kubeconfig_files

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
KSERVE = ("serving.kserve.io", "v1beta1")
PROXY_TIMEOUT = 30  # seconds: one request through the API server's service proxy


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core, self.batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    @classmethod
    def from_context(cls, context: str | None) -> Kube:
        """The kubeconfig's context (the same loading `trainyard verify` does)."""
        config.load_kube_config(config_file=kubeconfig_files(), context=context)
        return cls(client.ApiClient())

    def _plain(self, item: Any) -> dict[str, Any]:
        plain: dict[str, Any] = self.api.sanitize_for_serialization(item)
        return plain

    def _items(self, listing: Any) -> list[dict[str, Any]]:
        items = listing.get("items", []) if isinstance(listing, dict) else listing.items
        return [self._plain(item) for item in items]

    @staticmethod
    def _absent(call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    # namespaces and plain objects
    def namespace(self, name: str) -> dict[str, Any] | None:
        found = self._absent(self.core.read_namespace, name)
        return self._plain(found) if found is not None else None

    def create_namespace(self, name: str, labels: dict[str, str]) -> None:
        body: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        self.core.create_namespace(body)

    def delete_namespace(self, name: str) -> None:
        self._absent(self.core.delete_namespace, name)

    def create(self, namespace: str, body: Any) -> None:
        """Any object accept makes, given as a dict (the client serialises dicts as they are)."""
        kind = body["kind"]
        if kind == "ConfigMap":
            self.core.create_namespaced_config_map(namespace, body)
        elif kind == "PersistentVolumeClaim":
            self.core.create_namespaced_persistent_volume_claim(namespace, body)
        elif kind == "Pod":
            self.core.create_namespaced_pod(namespace, body)
        elif kind == "Service":
            self.core.create_namespaced_service(namespace, body)
        elif kind == "ServiceAccount":
            self.core.create_namespaced_service_account(namespace, body)
        elif kind == "TrainJob":
            self.custom.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", body)
        elif kind == "LocalQueue":
            self.custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", body)
        elif kind == "Job":
            self.batch.create_namespaced_job(namespace, body)
        elif kind == "InferenceService":
            self.custom.create_namespaced_custom_object(*KSERVE, namespace, "inferenceservices", body)
        else:
            raise ValueError(f"accept creates no {kind}")

    # training
    def trainjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._absent(self.custom.get_namespaced_custom_object, *TRAINER, namespace,
                                                    "trainjobs", name)
        return found

    def delete_trainjob(self, namespace: str, name: str) -> None:
        self._absent(self.custom.delete_namespaced_custom_object, *TRAINER, namespace, "trainjobs", name)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads"))

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._items(self.core.list_namespaced_pod(namespace, label_selector=selector))

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        return self._items(self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}"))

    def delete_pod(self, namespace: str, name: str) -> None:
        self._absent(self.core.delete_namespaced_pod, name, namespace)

    def evict(self, namespace: str, name: str) -> None:
        """The Eviction API, as `kubectl drain` uses it (PodDisruptionBudgets are respected)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self._absent(self.core.create_namespaced_pod_eviction, name, namespace, body)

    def log(self, namespace: str, name: str) -> str:
        text = self._absent(self.core.read_namespaced_pod_log, name, namespace)
        return str(text or "")

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(self.core.list_namespaced_event(namespace))

    # serving
    def inference_service(self, namespace: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._absent(self.custom.get_namespaced_custom_object, *KSERVE, namespace,
                                                    "inferenceservices", name)
        return found

    def patch_inference_service(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch, as `kubectl patch --type merge` sends it (the client sends a dict body as one)."""
        self.custom.patch_namespaced_custom_object(*KSERVE, namespace, "inferenceservices", name, patch)

    def delete_inference_service(self, namespace: str, name: str) -> None:
        self._absent(self.custom.delete_namespaced_custom_object, *KSERVE, namespace, "inferenceservices", name)

    def proxy(self, method: str, namespace: str, service: str, path: str, body: Any = None) -> tuple[int, Any]:
        """An HTTP request to a Service through the API server's service proxy (`service` is `name:port`), as verify
        reads Prometheus: (status, the JSON answer or its text); status 0 when no answer came."""
        where = f"/api/v1/namespaces/{namespace}/services/{service}/proxy/{path.lstrip('/')}"
        headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if body is not None else {})}
        try:
            verb, url, sent, payload, _ = self.api.param_serialize(method, where, header_params=headers, body=body,
                                                                    auth_settings=["BearerToken"])
            response = self.api.call_api(verb, url, header_params=sent, body=payload, _request_timeout=PROXY_TIMEOUT)
            data = response.read()
        except Exception as error:  # connection refused, reset, timeout: no answer to judge
            return 0, f"{type(error).__name__}: {error}"
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
        try:
            return response.status, json.loads(text) if text else None
        except ValueError:
            return response.status, text

    # nodes
    def node(self, name: str) -> dict[str, Any] | None:
        found = self._absent(self.core.read_node, name)
        return self._plain(found) if found is not None else None

    def set_unschedulable(self, name: str, unschedulable: bool) -> None:
        self.core.patch_node(name, {"spec": {"unschedulable": unschedulable}})

    # batch
    def cronjob(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._absent(self.batch.read_namespaced_cron_job, name, namespace)
        return self._plain(found) if found is not None else None

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._absent(self.batch.read_namespaced_job, name, namespace)
        return self._plain(found) if found is not None else None

    # access
    def can_i(self, user: str, group: str | None, verb: str, api_group: str, resource: str,
              namespace: str) -> bool:
        """A SelfSubjectAccessReview sent as the impersonated identity (Impersonate-User, Impersonate-Group):
        what that identity may do, as the API server's authorizers answer it. One group per identity, since the
        client sends each header once."""
        impersonated = client.ApiClient(self.api.configuration, "Impersonate-User", user)
        if group:
            impersonated.set_default_header("Impersonate-Group", group)
        review: Any = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": verb, "group": api_group, "resource": resource,
                                                  **({"namespace": namespace} if namespace else {})}}}
        with impersonated:
            answer = client.AuthorizationV1Api(impersonated).create_self_subject_access_review(review)
        return bool(answer.status and answer.status.allowed)
