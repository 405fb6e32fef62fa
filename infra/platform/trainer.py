"""Kubeflow Trainer v2: JobSet and the Trainer operator at their pinned versions, and the stack's
ClusterTrainingRuntimes as objects Trainyard owns (not the chart's built-in runtimes)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import TRAINER
from infra.kit.objects import child_opts, helm_chart, kube_object, metadata, namespace, psa_labels
from infra.platform.network import TEAM_PODS, Flow, guard_namespace, metrics, webhooks
from infra.spec import Platform

NAMESPACE = TRAINER.namespace
# The Helm releases (the chart resources' names below) and the controller ServiceAccounts the charts name
# after them: kubeflow/trainer@v2.2.1 charts/kubeflow-trainer/templates/rbac/service_account.yaml
# ("<fullname>-controller-manager") and kubernetes-sigs/jobset@v0.12.0 charts/jobset/templates/rbac/
# service_account.yaml ("<fullname>-controller"); tests render both charts to check.
TRAINER_RELEASE, JOBSET_RELEASE = "kubeflow-trainer", "jobset"
TRAINER_SERVICE_ACCOUNT = f"{TRAINER_RELEASE}-controller-manager"
JOBSET_SERVICE_ACCOUNT = f"{JOBSET_RELEASE}-controller"
# The Trainer controller's TrainJob status server (chart value manager.config.statusServer.port in
# kubeflow/trainer@v2.2.1 charts/kubeflow-trainer/values.yaml): training pods post progress to it.
TRAINER_STATUS_PORT = 10443
# Both charts' Deployments serve webhooks and metrics on the same ports (infra/components.py).
FLOWS = [*(webhooks(port, "the Trainer's and JobSet's webhooks") for port in TRAINER.webhook_ports),
         Flow("trainer-status", "Ingress", TEAM_PODS, (TRAINER_STATUS_PORT,),
              "training pods report progress to the Trainer's status server"),
         metrics(*TRAINER.metrics_ports)]
TRAINER_CONTROLLER = f"system:serviceaccount:{NAMESPACE}:{TRAINER_SERVICE_ACCOUNT}"
JOBSET_CONTROLLER = f"system:serviceaccount:{NAMESPACE}:{JOBSET_SERVICE_ACCOUNT}"


def _image(reference: str, split_registry: bool) -> dict[str, str]:
    """registry.k8s.io/jobset/jobset:v0.12.0 -> the chart's image values. The Trainer chart takes the registry
    apart ({registry, repository, tag}); the JobSet chart has no registry key: its repository carries it."""
    name, tag = reference.rsplit(":", 1)
    registry, repository = name.split("/", 1)
    parts = {"registry": registry, "repository": repository} if split_registry else {"repository": name}
    return {**parts, "tag": tag, "pullPolicy": "IfNotPresent"}


def jobset_values(platform: Platform) -> dict[str, Any]:
    return {"image": _image(platform.spec.versions.jobset_image(), split_registry=False)}


def trainer_values(platform: Platform) -> dict[str, Any]:
    # JobSet is installed on its own at the pinned version (Kueue tests Trainer 2.2.1 with JobSet 0.12.0,
    # not the 0.11.0 the chart bundles); the chart's runtimes stay off: ours are managed objects below.
    return {
        "jobset": {"install": False},
        "image": _image(platform.spec.versions.trainer_image(), split_registry=True),
        "runtimes": {"defaultEnabled": False},
    }


def with_pod_labels(spec: Mapping[str, Any], labels: Mapping[str, str]) -> Mapping[str, Any]:
    """A runtime spec whose every pod template also carries `labels`."""
    if not labels:
        return spec
    spec = copy.deepcopy(dict(spec))
    for job in spec["template"]["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]
        pod.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    return spec


class Trainer(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, pod_labels: Mapping[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        """`pod_labels`: what the cluster's workload identity needs on the pods of the team data account, which
        every runtime pod runs as (infra/spec/derive.py)."""
        super().__init__("trainyard:platform:Trainer", name, None, opts)
        versions = platform.spec.versions
        # The charts' pods meet Pod Security `restricted` (non-root, no capabilities, RuntimeDefault seccomp).
        ns = namespace(NAMESPACE, NAMESPACE, child_opts(self, provider),
                       labels=psa_labels("restricted", versions.kubernetes))
        guard_namespace(self, provider, NAMESPACE, ns, FLOWS)
        jobset = helm_chart(JOBSET_RELEASE, versions.jobset_chart(), NAMESPACE, jobset_values(platform),
                            child_opts(self, provider, depends_on=[ns]))
        self.chart = helm_chart(TRAINER_RELEASE, versions.trainer_chart(), NAMESPACE, trainer_values(platform),
                                child_opts(self, provider, depends_on=[jobset]))
        # The Trainer webhook validates every runtime and fails closed: runtimes wait for the release.
        for runtime in platform.runtimes:
            meta = runtime["metadata"]
            kube_object(f"runtime-{meta['name']}", runtime["apiVersion"], runtime["kind"],
                        metadata(meta["name"], labels=meta.get("labels")),
                        child_opts(self, provider, depends_on=[self.chart]),
                        spec=with_pod_labels(runtime["spec"], pod_labels))
        self.register_outputs({"trainer": versions.trainer, "jobset": versions.jobset,
                               "runtimes": [r["metadata"]["name"] for r in platform.runtimes]})
