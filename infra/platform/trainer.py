"""Kubeflow Trainer v2: JobSet and the Trainer operator at their pinned versions, and the stack's
ClusterTrainingRuntimes as objects Trainyard owns (not the chart's built-in runtimes)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Platform

from .objects import child_opts, helm_chart, kube_object, metadata, namespace

NAMESPACE = "kubeflow-system"


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


class Trainer(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Trainer", name, None, opts)
        versions = platform.spec.versions
        ns = namespace(NAMESPACE, "kubeflow-system", child_opts(self, provider))
        jobset = helm_chart("jobset", versions.jobset_chart(), NAMESPACE, jobset_values(platform),
                            child_opts(self, provider, depends_on=[ns]))
        self.chart = helm_chart("kubeflow-trainer", versions.trainer_chart(), NAMESPACE, trainer_values(platform),
                                child_opts(self, provider, depends_on=[jobset]))
        # The Trainer webhook validates every runtime and fails closed: runtimes wait for the release.
        for runtime in platform.runtimes:
            meta = runtime["metadata"]
            kube_object(f"runtime-{meta['name']}", runtime["apiVersion"], runtime["kind"],
                        metadata(meta["name"], labels=meta.get("labels")),
                        child_opts(self, provider, depends_on=[self.chart]), spec=runtime["spec"])
        self.register_outputs({"trainer": versions.trainer, "jobset": versions.jobset,
                               "runtimes": [r["metadata"]["name"] for r in platform.runtimes]})
