"""What the offline API server knows of the cluster besides the object under review: the objects the stack
renders plus the ones submitted with it (namespaces with their labels, runtimes, queues, policies). Webhooks
that read the cluster (the Trainer's runtime lookup, Kueue's queues) read this instead."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from infra.apiserver import kueue_config
from infra.apiserver.selectors import matches_selector

TRAINER_GROUP = "trainer.kubeflow.org"
NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def decoded(value: Any) -> Any:
    """An object as the API server decodes it: a `null` field is an unset one (Go's zero value), not a value
    (charts render `volumes: null`; a tenant may write `requests: null`)."""
    if isinstance(value, dict):
        return {key: decoded(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [decoded(item) for item in value]
    return value


def _name(obj: dict[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _namespace(obj: dict[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("namespace", ""))


class ClusterState:
    def __init__(self, objects: Iterable[dict[str, Any]]) -> None:
        self.objects = [obj for obj in objects if isinstance(obj, dict)]
        self._by_kind: dict[str, list[dict[str, Any]]] = {}
        for obj in self.objects:
            self._by_kind.setdefault(str(obj.get("kind", "")), []).append(obj)

    @cached_property
    def kueue(self) -> kueue_config.KueueConfig:
        return kueue_config.read(self.objects)

    def kueue_manages(self, obj: dict[str, Any]) -> bool:
        """Whether Kueue registers its job rules for the object: its framework is integrated and its namespace is
        one managedJobsNamespaceSelector selects (the selector the chart also gives the job webhooks)."""
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        if not self.kueue.integrates(group, str(obj.get("kind", ""))):
            return False
        labels = self.namespace_labels(_namespace(obj))
        return labels is not None and matches_selector(self.kueue.namespace_selector, labels)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return self._by_kind.get(kind, [])

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The labels of a namespace the stack (or the submission) declares, with the name label Kubernetes
        adds; None for a namespace nobody declares."""
        for obj in self.of_kind("Namespace"):
            if _name(obj) == namespace:
                return {**obj.get("metadata", {}).get("labels", {}), NAME_LABEL: namespace}
        return None

    def runtime(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """A ClusterTrainingRuntime by name, or a TrainingRuntime by name in the TrainJob's namespace."""
        for obj in self.of_kind(kind):
            if obj.get("apiVersion", "").startswith(f"{TRAINER_GROUP}/") and _name(obj) == name and (
                    kind == "ClusterTrainingRuntime" or _namespace(obj) == namespace):
                return obj
        return None

    def local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((q for q in self.of_kind("LocalQueue") if _name(q) == name and _namespace(q) == namespace), None)

    def cluster_queue(self, name: str) -> dict[str, Any] | None:
        return next((q for q in self.of_kind("ClusterQueue") if _name(q) == name), None)
