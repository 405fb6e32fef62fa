"""Kueue: the pinned chart and its manager configuration, WorkloadPriorityClasses, one Topology per environment,
one ResourceFlavor per pool, the cohort with its shared pool, a ClusterQueue per team and a LocalQueue in every
team namespace. Every number and order comes from Platform.queueing (infra/spec/queues/queueing.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import KUEUE, KUEUE_FRAMEWORKS
from infra.kit.objects import child_opts, helm_chart, kube_object, metadata, namespace, psa_labels
from infra.platform.network import ANYWHERE, Flow, guard_namespace, metrics, webhooks
from infra.spec import Flavor, Platform, TeamFacts
from infra.spec.base import format_amount
from infra.spec.queues.queueing import TeamQueue, topology_name
from infra.vocabulary import TEAM_LABEL

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = KUEUE.namespace
FRAMEWORKS = KUEUE_FRAMEWORKS
ADMITTING_EFFECTS = ("NoSchedule", "NoExecute")  # Kueue ignores PreferNoSchedule flavor taints
# The controller's ports (infra/components.py): webhooks, the visibility API, metrics.
FLOWS = [*(webhooks(port, "Kueue's webhooks") for port in KUEUE.webhook_ports),
         Flow("visibility", "Ingress", ANYWHERE, KUEUE.api_ports, "the API server proxies Kueue's visibility API"),
         metrics(*KUEUE.metrics_ports)]


def manager_config(platform: Platform) -> dict[str, Any]:
    """The Configuration (config.kueue.x-k8s.io/v1beta2) the chart renders into kueue-manager-config."""
    queueing = platform.spec.queueing
    ready = queueing.wait_for_pods_ready
    requeuing: dict[str, Any] = {"timestamp": "Eviction", "backoffBaseSeconds": ready.backoff_base_seconds,
                                 "backoffMaxSeconds": ready.backoff_max_seconds}
    if ready.backoff_limit_count is not None:
        requeuing["backoffLimitCount"] = ready.backoff_limit_count
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": f":{KUEUE.metrics_ports[0]}", "enableClusterQueueResources": True},
        "webhook": {"port": KUEUE.webhook_ports[0]},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": FRAMEWORKS},
        # Kueue suspends and queues every job of these kinds in a team namespace, with or without a queue
        # label (one without a LocalQueue never starts): the queue is not a label a tenant may leave off.
        # Elsewhere (platform namespaces) only labelled jobs are Kueue's.
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
        # All-or-nothing starts: a job whose pods are not all ready in time releases its quota.
        "waitForPodsReady": {
            "timeout": ready.timeout,
            "recoveryTimeout": ready.recovery_timeout,
            "blockAdmission": ready.block_admission,
            "requeuingStrategy": requeuing,
        },
    }
    member = platform.member
    if member is not None and member.role == "manager":
        # The origin labels what this manager creates on workers (its garbage collector deletes only those).
        config["multiKueue"] = {"gcInterval": "1m", "origin": member.origin,
                                "workerLostTimeout": member.worker_lost_timeout}
    if queueing.fair_sharing:
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    if platform.queueing.exclude_resource_prefixes:
        config["resources"] = {"excludeResourcePrefixes": list(platform.queueing.exclude_resource_prefixes)}
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
    """The pool's taints become nodeTaints, not injected tolerations: Kueue then admits a job to the pool only
    if the job tolerates them, so CPU-only work never takes a GPU pool's quota (the runtimes carry the
    tolerations; Trainyard's capacity check finds a quota nobody's runtime can use)."""
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)}
    taints = [dict(t) for t in flavor.taints if t["effect"] in ADMITTING_EFFECTS]
    if taints:
        spec["nodeTaints"] = taints
    if flavor.topology_levels:
        spec["topologyName"] = topology_name(flavor.topology_levels)
    return spec


def _resources(covered: Sequence[str], quota: Mapping[str, Decimal],
               borrowing: Mapping[str, Decimal | None], lending: Mapping[str, Decimal | None]) -> list[dict[str, Any]]:
    resources = []
    for resource in covered:
        entry: dict[str, Any] = {"name": resource,
                                 "nominalQuota": format_amount(resource, quota.get(resource, Decimal(0)))}
        if borrowing.get(resource) is not None:
            entry["borrowingLimit"] = format_amount(resource, borrowing[resource] or Decimal(0))
        if lending.get(resource) is not None:
            entry["lendingLimit"] = format_amount(resource, lending[resource] or Decimal(0))
        resources.append(entry)
    return resources


def cluster_queue_spec(platform: Platform, team: TeamFacts, queue: TeamQueue) -> dict[str, Any]:
    queueing = platform.spec.queueing
    fungibility = queueing.flavor_fungibility
    return {
        "cohortName": queueing.cohort,
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In",
             "values": list(team.job_namespaces)}]},
        "queueingStrategy": queueing.queueing_strategy,
        # One group: a job's cpu, memory and GPUs are charged to the same pool, tried in queue.flavors order.
        "resourceGroups": [{"coveredResources": list(queue.covered), "flavors": [
            {"name": entry.flavor, "resources": _resources(queue.covered, entry.nominal, entry.borrowing,
                                                           entry.lending)}
            for entry in queue.flavors
        ]}],
        "flavorFungibility": {"whenCanBorrow": fungibility.when_can_borrow,
                              "whenCanPreempt": fungibility.when_can_preempt},
        "preemption": dict(queue.preemption),
        "fairSharing": {"weight": format(team.weight.normalize(), "f")},
    }


def cohort_spec(platform: Platform) -> dict[str, Any]:
    """The cohort holds every GPU (and core) no team is guaranteed, as a shared pool that any team queue
    listing the pool may borrow: nothing idle is stranded outside every guarantee."""
    covered = list(platform.covered_resources)
    flavors = [{"name": name, "resources": _resources(covered, platform.queueing.shared_pool[name], {}, {})}
               for name in platform.queueing.flavor_order]
    return {"resourceGroups": [{"coveredResources": covered, "flavors": flavors}]}


class Kueue(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Kueue", name, None, opts)
        # The chart's pods meet Pod Security `restricted` (non-root, no capabilities, RuntimeDefault seccomp).
        ns = namespace(NAMESPACE, NAMESPACE, child_opts(self, provider),
                       labels=psa_labels("restricted", platform.spec.versions.kubernetes))
        guard_namespace(self, provider, NAMESPACE, ns, FLOWS)
        self.chart = helm_chart("kueue", platform.spec.versions.kueue_chart(), NAMESPACE, chart_values(platform),
                                child_opts(self, provider, depends_on=[ns]))
        # Kueue's webhooks fail closed: every queue object waits for the release.
        after_chart = child_opts(self, provider, depends_on=[self.chart])
        facts = platform.queueing
        for priority_name, priority in facts.priorities.items():
            fields = {"value": priority.value, **({"description": priority.description} if priority.description
                                                  else {})}
            kube_object(f"priority-{priority_name}", API, "WorkloadPriorityClass", metadata(priority_name),
                        after_chart, **fields)
        for topology in facts.topologies:
            kube_object(f"topology-{topology.name}", API, "Topology", metadata(topology.name), after_chart,
                        spec={"levels": [{"nodeLabel": label} for label in topology.levels]})
        for flavor in platform.flavors:
            kube_object(f"flavor-{flavor.name}", API, "ResourceFlavor", metadata(flavor.name), after_chart,
                        spec=flavor_spec(flavor))
        cohort = platform.spec.queueing.cohort
        kube_object(f"cohort-{cohort}", API, "Cohort", metadata(cohort), after_chart, spec=cohort_spec(platform))
        for team in platform.teams:
            kube_object(f"cq-{team.name}", API, "ClusterQueue", metadata(team.queue), after_chart,
                        spec=cluster_queue_spec(platform, team, facts.queue(team.name)))
            for team_ns in team.namespaces:
                kube_object(f"lq-{team_ns}", API, "LocalQueue", metadata(team.local_queues[0], team_ns),
                            child_opts(self, provider, depends_on=[self.chart, team_namespaces[team_ns]]),
                            spec={"clusterQueue": team.queue})
        self.register_outputs({"chartVersion": platform.spec.versions.kueue, "clusterQueues": len(platform.teams),
                               "priorities": sorted(facts.priorities)})
