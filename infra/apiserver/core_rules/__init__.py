"""What the API server refuses beyond the OpenAPI schema (k8s.io/kubernetes pkg/apis/core, apps and batch
validation), each refusal worded as the server prints it: Services (services.py), pod specs (pods.py, resources.py)
in Pods and in the workload kinds' templates (workloads.py), and the pod templates of custom resources that a
controller turns into Jobs later (children.py), a TrainJob's among them once its runtime is known (trainjobs.py)."""

from __future__ import annotations

from typing import Any

from infra.apiserver.core_rules import children, workloads
from infra.apiserver.core_rules.services import service_problems
from infra.apiserver.core_rules.trainjobs import RuntimeLookup, trainjob_problems
from infra.apiserver.state import TRAINER_GROUP

__all__ = ["CORE_RULES", "RuntimeLookup", "core_problems", "template_problems"]

CORE_RULES = {("v1", "Service"): service_problems, **workloads.RULES}


def core_problems(obj: dict[str, Any]) -> list[str]:
    """The API server's own refusals of a Kubernetes object that its schema lets through."""
    rule = CORE_RULES.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    return rule(obj) if rule is not None else []


def template_problems(obj: dict[str, Any], runtimes: RuntimeLookup | None = None) -> list[str]:
    """The refusals that a custom resource's pod templates will meet when its controller creates Jobs from them.
    `runtimes`: the cluster's training runtimes, without which a TrainJob's Jobs are unknown."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    if (group, obj.get("kind")) == (TRAINER_GROUP, "TrainJob"):
        return trainjob_problems(obj, runtimes) if runtimes is not None else []
    rule = children.RULES.get((group, str(obj.get("kind", ""))))
    return rule(obj) if rule is not None else []
