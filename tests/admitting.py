"""Requests sent to the admission policies that infra/platform/admission.py builds now from a stack's spec (called
directly, not read from the session's cached run, so that a change to the builders is seen), through the offline API
server's evaluation of ValidatingAdmissionPolicies with their bindings (infra/apiserver/vap.py): the policies'
resource rules, the bindings' namespace selector, the variables and every validation. The cluster holds the team
namespaces with their team label, and kube-system without it."""

from __future__ import annotations

import copy
from typing import Any

from infra.apiserver.state import ClusterState
from infra.apiserver.vap import Request, evaluate
from infra.platform.admission import API, binding_spec, policies
from infra.spec import Platform
from infra.vocabulary import TEAM_LABEL

SYSTEM_NAMESPACE = "kube-system"
TENANT = "oidc:alice"
TENANT_GROUPS = ("oidc:vision-eng", "system:authenticated")
QUEUE = "kueue.x-k8s.io/queue-name"


def cluster(platform: Platform) -> ClusterState:
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {TEAM_LABEL: team.name}}}
                  for team in platform.teams for ns in team.job_namespaces]
    namespaces.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
    objects: list[dict[str, Any]] = list(namespaces)
    for name, spec in policies(platform).items():
        objects.append({"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                        "spec": spec})
        objects.append({"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
                        "spec": binding_spec(name)})
    return ClusterState(objects)


def refusals(platform: Platform, obj: dict[str, Any], user: str = TENANT,
             groups: tuple[str, ...] = TENANT_GROUPS, operation: str = "CREATE",
             state: ClusterState | None = None) -> list[str]:
    """The refusal lines for the request (empty: admitted)."""
    request = Request(copy.deepcopy(obj), operation=operation, user=user, groups=groups)
    return [refusal.line() for refusal in evaluate(request, state or cluster(platform)).refusals]


def by(policy: str, lines: list[str]) -> list[str]:
    """The refusals of one policy."""
    return [line for line in lines if f"ValidatingAdmissionPolicy '{policy}' denied" in line]


def pod(namespace: str, image: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A Pod of `image` that passes every policy in a GPU team's namespace, or a Pod of the pod spec `spec`."""
    pod_spec = spec or {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "image": image}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace,
                                                            "labels": labels or {}}, "spec": pod_spec}


def job(namespace: str, queue: str | None, pod_spec: dict[str, Any]) -> dict[str, Any]:
    labels = {QUEUE: queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": namespace,
                                                                  "labels": labels},
            "spec": {"suspend": True, "template": {"spec": pod_spec}}}


def jobset(namespace: str, queue: str | None, pod_spec: dict[str, Any]) -> dict[str, Any]:
    labels = {QUEUE: queue} if queue else {}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": namespace, "labels": labels},
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}}


def runtime(namespace: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A team's namespaced TrainingRuntime."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
            "metadata": {"name": "mine", "namespace": namespace},
            "spec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}}}}


def trainjob(namespace: str, queue: str | None, image: str | None = None, **spec: Any) -> dict[str, Any]:
    labels = {QUEUE: queue} if queue else {}
    trainer: dict[str, Any] = {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}
    if image:
        trainer["image"] = image
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": namespace, "labels": labels},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer, **spec}}


def patched(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A TrainJob's runtimePatches that patch one replicated job's pod spec."""
    return [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}}}}]


def messages(lines: list[str], policy: str) -> list[str]:
    """The messages of one policy's refusals, as the user reads them after the API server's prefix."""
    return [line.split("denied request: ", 1)[1] for line in by(policy, lines)]
