"""Where Kueue registers its rules, read from what the stack renders: the Configuration in the kueue-manager-config
ConfigMap (integrations.frameworks, managedJobsNamespaceSelector, featureGates) and the manager's
`--feature-gates` flag over the pinned version's defaults. Kueue serves a no-op webhook for a framework it does
not integrate (kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/job/job_webhook.go SetupWebhook, NoopWebhook),
so a kind outside `frameworks` meets none of its rules and no queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

CONFIG_MAP, CONFIG_KEY = "kueue-manager-config", "controller_manager_config.yaml"
GATES_FLAG = "--feature-gates="
# kubernetes-sigs/kueue v0.19.2 pkg/features/kube_features.go: the defaults at 0.19 of the gates the rules read
DEFAULT_GATES = {"TopologyAwareScheduling": True, "TASMultiLayerTopology": True, "ElasticJobsViaWorkloadSlices": True,
                 "AdmissionGatedBy": True, "WorkloadIdentifierAnnotations": True, "ConcurrentAdmission": False,
                 "ManagedJobsNamespaceSelectorAlwaysRespected": True}
# pkg/controller/jobs/*: framework name -> (API group, kind) of the job it integrates
FRAMEWORKS = {"batch/job": ("batch", "Job"), "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "JobSet"),
              "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "TrainJob"), "pod": ("", "Pod"),
              "deployment": ("apps", "Deployment"), "statefulset": ("apps", "StatefulSet")}


@dataclass(frozen=True)
class KueueConfig:
    installed: bool = False
    kinds: frozenset[tuple[str, str]] = frozenset()  # (group, kind) of the integrated frameworks
    namespace_selector: dict[str, Any] | None = None  # managedJobsNamespaceSelector
    gates: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_GATES))

    def integrates(self, group: str, kind: str) -> bool:
        return (group, kind) in self.kinds

    def gate(self, name: str) -> bool:
        return self.gates.get(name, False)


def _flag_gates(objects: list[dict[str, Any]]) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for obj in objects:
        if obj.get("kind") != "Deployment" or not str(obj.get("metadata", {}).get("name", "")).startswith("kueue"):
            continue
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for arg in container.get("args", []):
                if str(arg).startswith(GATES_FLAG):
                    for pair in str(arg)[len(GATES_FLAG):].split(","):
                        name, _, value = pair.partition("=")
                        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def read(objects: list[dict[str, Any]]) -> KueueConfig:
    """The rendered Kueue configuration; not installed when the render holds none."""
    found = next((o for o in objects if o.get("kind") == "ConfigMap"
                  and o.get("metadata", {}).get("name") == CONFIG_MAP), None)
    if found is None:
        return KueueConfig()
    config = yaml.safe_load(found.get("data", {}).get(CONFIG_KEY, "")) or {}
    frameworks = (config.get("integrations") or {}).get("frameworks") or []
    gates = {**DEFAULT_GATES, **(config.get("featureGates") or {}), **_flag_gates(objects)}
    return KueueConfig(True, frozenset(FRAMEWORKS[f] for f in frameworks if f in FRAMEWORKS),
                       config.get("managedJobsNamespaceSelector"), gates)
