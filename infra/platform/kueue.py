"""Kueue: the pinned chart and its manager configuration, one ResourceFlavor per pool, Topologies,
the cohort with its shared pool, a ClusterQueue per team and a LocalQueue in every team namespace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.spec import Flavor, Platform, TeamFacts
from infra.spec.base import format_amount

from .objects import child_opts, custom_object, helm_chart, metadata, namespace

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "kueue-system"
FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
HOSTNAME = "kubernetes.io/hostname"


def manager_config(platform: Platform) -> dict[str, Any]:
    """The Configuration (config.kueue.x-k8s.io/v1beta2) the chart renders into kueue-manager-config."""
    queueing = platform.spec.queueing
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": FRAMEWORKS},
        # All-or-nothing starts: a job whose pods are not all ready in time releases its quota.
        "waitForPodsReady": {
            "timeout": queueing.wait_for_pods_ready.timeout,
            "recoveryTimeout": queueing.wait_for_pods_ready.recovery_timeout,
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
    }
    if queueing.fair_sharing:
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return config


def chart_values(platform: Platform) -> dict[str, Any]:
    image = platform.spec.versions.kueue_image()
    repository, tag = image.rsplit(":", 1)
    return {
        "controllerManager": {"manager": {"image": {"repository": repository, "tag": tag,
                                                     "pullPolicy": "IfNotPresent"}}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(platform), sort_keys=True)},
    }


def flavor_spec(flavor: Flavor) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    if flavor.topology_levels:
        spec["topologyName"] = topology_name(flavor)
    return spec


def topology_name(flavor: Flavor) -> str:
    return f"{flavor.name}-topology"


def _resources(covered: Sequence[str], quota: Mapping[str, Decimal],
               borrowing: Mapping[str, Decimal | None], lending: Mapping[str, Decimal | None]) -> list[dict[str, Any]]:
    resources = []
    for resource in covered:
        entry: dict[str, Any] = {"name": resource, "nominalQuota": format_amount(resource, quota.get(resource, 0))}
        if borrowing.get(resource) is not None:
            entry["borrowingLimit"] = format_amount(resource, borrowing[resource] or 0)
        if lending.get(resource) is not None:
            entry["lendingLimit"] = format_amount(resource, lending[resource] or 0)
        resources.append(entry)
    return resources


def cluster_queue_spec(platform: Platform, team: TeamFacts) -> dict[str, Any]:
    covered = [r for r in platform.covered_resources
               if any(r in platform.flavor(f).capacity for f in team.quota)]
    flavors = [
        {"name": name, "resources": _resources(covered, quota, team.borrowing[name], team.lending[name])}
        for name, quota in team.quota.items()
    ]
    queueing = platform.spec.queueing
    return {
        "cohortName": queueing.cohort,
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(team.namespaces)}]},
        "queueingStrategy": queueing.queueing_strategy,
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "fairSharing": {"weight": format(team.weight.normalize(), "f")},
    }


def cohort_spec(platform: Platform) -> dict[str, Any]:
    """The cohort holds every GPU no team is guaranteed, as a shared pool the teams borrow from."""
    flavors = []
    for flavor in platform.flavors:
        slack = platform.shared_pool[flavor.name]
        flavors.append({"name": flavor.name, "resources": _resources(platform.covered_resources, slack, {}, {})})
    return {"resourceGroups": [{"coveredResources": list(platform.covered_resources), "flavors": flavors}]}


class Kueue(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Kueue", name, None, opts)
        ns = namespace(NAMESPACE, "kueue-system", child_opts(self, provider))
        self.chart = helm_chart("kueue", platform.spec.versions.kueue_chart(), NAMESPACE, chart_values(platform),
                                child_opts(self, provider, depends_on=[ns]))
        # Kueue's webhooks fail closed: every queue object waits for the release.
        after_chart = child_opts(self, provider, depends_on=[self.chart])
        for flavor in platform.flavors:
            if flavor.topology_levels:
                levels = [*flavor.topology_levels.values(), HOSTNAME]
                custom_object(f"topology-{flavor.name}", API, "Topology", metadata(topology_name(flavor)),
                              {"levels": [{"nodeLabel": label} for label in levels]}, after_chart)
            custom_object(f"flavor-{flavor.name}", API, "ResourceFlavor", metadata(flavor.name),
                          flavor_spec(flavor), after_chart)
        cohort = platform.spec.queueing.cohort
        custom_object(f"cohort-{cohort}", API, "Cohort", metadata(cohort), cohort_spec(platform), after_chart)
        for team in platform.teams:
            custom_object(f"cq-{team.name}", API, "ClusterQueue", metadata(team.queue),
                          cluster_queue_spec(platform, team), after_chart)
            for team_ns in team.namespaces:
                custom_object(f"lq-{team_ns}", API, "LocalQueue", metadata(team.queue, team_ns),
                              {"clusterQueue": team.queue},
                              child_opts(self, provider, depends_on=[self.chart, team_namespaces[team_ns]]))
        self.register_outputs({"chartVersion": platform.spec.versions.kueue, "clusterQueues": len(platform.teams)})
