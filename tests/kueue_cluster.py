"""A cluster where Kueue registers its job rules, for the webhook rule tests: its Configuration integrating Jobs,
JobSets and TrainJobs (as every stack's does), and the namespaces the tests submit to."""

from __future__ import annotations

from typing import Any

import yaml

from infra.apiserver.kueue_config import CONFIG_KEY, CONFIG_MAP

FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


def kueue_config(frameworks: list[str] | None = None, selector: dict[str, Any] | None = None,
                 gates: dict[str, bool] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                              "integrations": {"frameworks": FRAMEWORKS if frameworks is None else frameworks}}
    if selector is not None:
        config["managedJobsNamespaceSelector"] = selector
    if gates:
        config["featureGates"] = gates
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG_MAP, "namespace": "kueue-system"},
            "data": {CONFIG_KEY: yaml.safe_dump(config)}}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


MANAGED = [kueue_config(), *(namespace(n, **{"trainyard.io/team": n}) for n in ("v", "vision", "default"))]
