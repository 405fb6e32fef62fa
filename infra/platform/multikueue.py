"""MultiKueue (Kueue 0.19, kueue.x-k8s.io/v1beta2): the manager's burst path and each worker's access for it.

On the manager, per worker: the kubeconfig Secret, a MultiKueueCluster, a MultiKueueConfig and an
AdmissionCheck; the worker's flavors (empty: no pod runs on the manager for them), its cohort with the same
shared pool, and per bursting team a ClusterQueue with the worker's exact queue spec plus the check, and a
LocalQueue named after the worker in each team namespace. A MultiKueue check applies to a whole ClusterQueue
(not per flavor) and the manager cannot be its own worker, so the burst path has queues of its own, beside the
on-prem ones, in a cohort of its own.

On a worker: the ServiceAccount the manager acts as, its long-lived token Secret, and a ClusterRole with what
the manager's MultiKueue client does there (Kueue v0.19.2 test/util/multikueue.go MultiKueueRulesForManager:
Workloads and their status, each integrated job kind and its status) - the upstream setup script leaves out
trainjobs. Namespaces, queues, runtimes and volumes come from the worker's own platform.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import KUEUE, KUEUE_JOB_KINDS, MULTIKUEUE_ACCOUNT, MULTIKUEUE_WRITE, kubeconfig_secret
from infra.kit.objects import RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata
from infra.platform.kueue import API, FRAMEWORKS, cluster_queue_spec, cohort_spec
from infra.platform.kueue import NAMESPACE as KUEUE_NAMESPACE
from infra.spec import Platform
from infra.spec.hybrid.model import Hybrid, burst_cohort, burst_queue

CONTROLLER = "kueue.x-k8s.io/multikueue"
KUEUE_GROUP = KUEUE.crds[0].group
ACCOUNT = MULTIKUEUE_ACCOUNT
TOKEN_SECRET = f"{ACCOUNT}-token"
WRITE = MULTIKUEUE_WRITE
# Kueue integration name -> (API group, resource) of the job kind MultiKueue creates on the worker.
JOB_KINDS = KUEUE_JOB_KINDS


def cohort(platform: Platform, worker: str) -> str:
    return burst_cohort(platform.spec.queueing.cohort, worker)


def burst_cluster_queue(worker: Platform, team: str, manager: Platform, worker_name: str) -> dict[str, Any]:
    """The worker's ClusterQueue for the team, as the manager's burst queue: same flavors, quotas, borrowing,
    preemption and fair-sharing weight, in the burst cohort, behind the worker's admission check."""
    facts = next(t for t in worker.teams if t.name == team)
    spec = cluster_queue_spec(worker, facts, worker.queueing.queue(team))
    return {**spec, "cohortName": cohort(manager, worker_name),
            "admissionChecksStrategy": {"admissionChecks": [{"name": worker_name}]}}


def worker_rules() -> list[dict[str, Any]]:
    """What the manager needs on a worker, for the job kinds Kueue integrates here (FRAMEWORKS)."""
    rules = [{"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": WRITE},
             {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]}]
    for framework in FRAMEWORKS:
        group, resource = JOB_KINDS[framework]
        rules += [{"apiGroups": [group], "resources": [resource], "verbs": WRITE},
                  {"apiGroups": [group], "resources": [f"{resource}/status"], "verbs": ["get"]}]
    return rules


class MultiKueue(pulumi.ComponentResource):
    """The manager's side."""

    def __init__(self, name: str, platform: Platform, hybrid: Hybrid, provider: k8s.Provider,
                 kubeconfigs: Mapping[str, pulumi.Output[str] | None], kueue: pulumi.Resource,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:MultiKueue", name, None, opts)
        after = child_opts(self, provider, depends_on=[kueue])
        for worker_name in hybrid.workers:
            worker = hybrid.clusters[worker_name]
            kubeconfig = kubeconfigs.get(worker_name)
            if kubeconfig is not None:
                kube_object(f"kubeconfig-{worker_name}", "v1", "Secret",
                            metadata(kubeconfig_secret(worker_name), KUEUE_NAMESPACE), after, type="Opaque",
                            stringData={"kubeconfig": pulumi.Output.secret(kubeconfig)})
            kube_object(f"cluster-{worker_name}", API, "MultiKueueCluster", metadata(worker_name), after,
                        spec={"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                               "location": kubeconfig_secret(worker_name)}}})
            kube_object(f"config-{worker_name}", API, "MultiKueueConfig", metadata(worker_name), after,
                        spec={"clusters": [worker_name]})
            kube_object(f"check-{worker_name}", API, "AdmissionCheck", metadata(worker_name), after,
                        spec={"controllerName": CONTROLLER,
                              "parameters": {"apiGroup": KUEUE_GROUP, "kind": "MultiKueueConfig",
                                             "name": worker_name}})
            for flavor in worker.flavors:
                kube_object(f"flavor-{flavor.name}", API, "ResourceFlavor", metadata(flavor.name), after, spec={})
            burst_cohort = cohort(platform, worker_name)
            kube_object(f"cohort-{burst_cohort}", API, "Cohort", metadata(burst_cohort), after,
                        spec=cohort_spec(worker))
            for team in hybrid.bursting(worker_name):
                queue = burst_queue(team, worker_name)
                kube_object(f"cq-{queue}", API, "ClusterQueue", metadata(queue), after,
                            spec=burst_cluster_queue(worker, team, platform, worker_name))
                # Not into the team's models namespace: it holds the registry and serving, and workers have none.
                for team_ns in [ns for ns in platform.spec.namespaces(team)
                                if platform.models is None or platform.models.by_namespace(ns) is None]:
                    kube_object(f"lq-{team_ns}-{worker_name}", API, "LocalQueue", metadata(worker_name, team_ns),
                                child_opts(self, provider, depends_on=[kueue, team_namespaces[team_ns]]),
                                spec={"clusterQueue": queue})
        self.register_outputs({"workers": list(hybrid.workers)})


class MultiKueueWorker(pulumi.ComponentResource):
    """A worker's side: the manager's identity and rights there."""

    def __init__(self, name: str, provider: k8s.Provider, after: Sequence[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:MultiKueueWorker", name, None, opts)
        in_ns = child_opts(self, provider, depends_on=after)
        account = kube_object("account", "v1", "ServiceAccount", metadata(ACCOUNT, KUEUE_NAMESPACE), in_ns,
                              automountServiceAccountToken=False)
        # A legacy token Secret: it does not expire (managed control planes cap TokenRequest lifetimes); rotate
        # it by deleting the Secret and running `pulumi up` again (docs/hybrid.md).
        kube_object("token", "v1", "Secret", metadata(TOKEN_SECRET, KUEUE_NAMESPACE,
                                                      annotations={"kubernetes.io/service-account.name": ACCOUNT}),
                    child_opts(self, provider, depends_on=[account]), type="kubernetes.io/service-account-token")
        role = kube_object("role", RBAC_API, "ClusterRole", metadata(ACCOUNT), child_opts(self, provider),
                           rules=worker_rules())
        kube_object("binding", RBAC_API, "ClusterRoleBinding", metadata(ACCOUNT),
                    child_opts(self, provider, depends_on=[role, account]),
                    roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": ACCOUNT},
                    subjects=[{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": KUEUE_NAMESPACE}])
        self.register_outputs({"serviceAccount": f"{KUEUE_NAMESPACE}/{ACCOUNT}", "tokenSecret": TOKEN_SECRET})
