"""What a curious tenant tries, against a stack's admission policies as their bindings apply them.

Each attack is an object a tenant (or their CI) sends, with the request's operation, user and old object;
it is admitted when no policy whose rules and binding match it denies it (CEL evaluated by tests/cel.py).
`python -m benchmarks.tenant_attacks` prints, per stack, how many attacks of each class are admitted.
"""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from decimal import Decimal
from typing import Any, NamedTuple

from infra.platform import admission, tenancy
from infra.spec import Platform
from infra.spec.base import parse_quantity
from infra.spec.queues.flavors import gpu_taints
from tests.cel import denials

QUEUE = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"  # replaced per stack by an image its registries admit


class Attack(NamedTuple):
    kind: str  # class of attack
    name: str
    obj: dict[str, Any] | None
    resource: str
    namespace: str
    operation: str = "CREATE"
    user: dict[str, Any] | None = None
    old: dict[str, Any] | None = None


def _pod_spec(**container: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"securityContext": {"runAsNonRoot": True},
                            "containers": [{"name": "c", "image": IMAGE, **container}]}
    return spec


def _pod(ns: str, spec: dict[str, Any], owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": ns}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _job(ns: str, labels: dict[str, str], owners: list[dict[str, Any]] | None = None,
         suspend: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": ns, "labels": labels}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "suspend": suspend, "template": {"spec": _pod_spec(resources={"limits": {"nvidia.com/gpu": 8}})}}}


def _trainjob(ns: str, queue: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": ns, "labels": {QUEUE: queue} if queue else {}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"image": IMAGE, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}, **spec}}


def _owner(kind: str, api: str) -> list[dict[str, Any]]:
    return [{"apiVersion": api, "kind": kind, "name": "x", "uid": "u", "controller": True}]


def attacks(platform: Platform) -> list[Attack]:
    """Every attack in the stack's first team namespace, with images from the stack's own runtimes (so that
    only the attack, not the registry, can be what a policy refuses)."""
    global IMAGE
    IMAGE = next(c["image"] for runtime in platform.runtimes for job in runtime["spec"]["template"]["spec"][
        "replicatedJobs"] for c in job["template"]["spec"]["template"]["spec"]["containers"])
    repository = IMAGE.rsplit(":", 1)[0]
    team = platform.teams[0]
    ns, queue = team.namespaces[0], team.queue
    other = next((t.queue for t in platform.teams if t.queue != queue), "nobody")
    drill = platform.backup.drill_namespaces.get(ns)
    gpu = {"resources": {"limits": {"nvidia.com/gpu": 1}}}
    ci = {"username": f"system:serviceaccount:{ns}:trainyard-ci", "groups": ["system:serviceaccounts",
                                                                                f"system:serviceaccounts:{ns}"]}
    labelled = _job(ns, {QUEUE: queue})
    groups = platform.spec.teams[team.name].groups.engineers
    engineer = {"username": "alice", "groups": [platform.spec.identity.group(g) for g in groups[:1]]
                + ["system:authenticated"]}
    found = [
        Attack("queue", "unlabelled Job", _job(ns, {}), "jobs", ns, user=engineer),
        Attack("queue", "another team's queue", _job(ns, {QUEUE: other}), "jobs", ns, user=engineer),
        Attack("queue", "Job claiming a JobSet owner", _job(ns, {}, _owner("JobSet", "jobset.x-k8s.io/v1alpha2")),
               "jobs", ns, user=engineer),
        Attack("queue", "JobSet claiming a TrainJob owner",
               {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
                   "name": "js", "namespace": ns, "ownerReferences": _owner("TrainJob", "trainer.kubeflow.org/v1")},
                "spec": {"replicatedJobs": []}}, "jobsets", ns, user=engineer),
        Attack("queue", "GPU Pod claiming a Job owner", _pod(ns, _pod_spec(**gpu), _owner("Job", "batch/v1")),
               "pods", ns, user=engineer),
        Attack("queue", "queued Job loses its label, unsuspended", _job(ns, {}, suspend=False), "jobs", ns,
               "UPDATE", engineer, labelled),
        Attack("queue", "TrainJob switches to another team's queue", _trainjob(ns, other), "trainjobs", ns,
               "UPDATE", engineer, _trainjob(ns, queue)),
    ]
    for name, spec in (("hostNetwork", {"hostNetwork": True}), ("hostPID", {"hostPID": True}),
                       ("hostIPC", {"hostIPC": True}),
                       ("capability NET_ADMIN", {"containers": [{"name": "c", "image": IMAGE, "securityContext": {
                           "capabilities": {"add": ["NET_ADMIN"]}}}]}),
                       ("capability SYS_ADMIN", {"containers": [{"name": "c", "image": IMAGE, "securityContext": {
                           "capabilities": {"add": ["SYS_ADMIN"]}}}]}),
                       ("hostPort", {"containers": [{"name": "c", "image": IMAGE, "ports": [
                           {"containerPort": 22, "hostPort": 2222}]}]}),
                       ("runAsUser 0", {"securityContext": {"runAsUser": 0}}),
                       # scheduler preemption of any other team's pods, and Kueue priority above every job's
                       ("priority system-node-critical", {"priorityClassName": "system-node-critical"}),
                       ("root by default", {"securityContext": {}})):
        found.append(Attack("pod", name, _pod(ns, {**_pod_spec(), **spec}), "pods", ns, user=engineer))
    found.append(Attack("pod", "Pod placed on a node by name", _pod(ns, {**_pod_spec(), "nodeName": "gpu-node-1"}),
                        "pods", ns, user=engineer))
    taints = gpu_taints(platform.flavors)
    if taints:  # a CPU Pod parked on the GPU nodes, outside the queues
        taint = taints[0]
        for name, toleration in (("Pod tolerates the GPU taint", {"key": taint["key"], "operator": "Exists"}),
                                 ("Pod tolerates every taint", {"operator": "Exists"})):
            found.append(Attack("pod", name, _pod(ns, {**_pod_spec(), "tolerations": [toleration]}), "pods", ns,
                                user=engineer))
    for name, image in (("latest tag", f"{repository}:latest"), ("untagged", repository)):
        found.append(Attack("image", name, _pod(ns, _pod_spec(image=image)), "pods", ns, user=engineer))
        found.append(Attack("image", f"TrainJob {name}", _trainjob(ns, queue, trainer={"image": image}),
                            "trainjobs", ns, user=engineer))
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "forever", "namespace": ns,
                          "annotations": {"kubernetes.io/service-account.name": "default"}}}
    secret_env = {"trainer": {"image": IMAGE, "env": [{"name": "T", "valueFrom": {
        "secretKeyRef": {"name": "s", "key": "k"}}}]}}
    found += [
        Attack("identity", "ServiceAccount token Secret", token, "secrets", ns, user=engineer),
        Attack("identity", "CI TrainJob reads a Secret through env", _trainjob(ns, queue, **secret_env),
               "trainjobs", ns, user=ci),
        Attack("identity", "CI TrainJob with an initializer secretRef",
               _trainjob(ns, queue, initializer={"model": {"storageUri": "hf://x", "secretRef": {"name": "s"}}}),
               "trainjobs", ns, user=ci),
    ]
    # Kueue admitted a Job (or one got past it): its pods come from the job controller, and only the namespace
    # ResourceQuota stands between them and every GPU of the cluster, or of the pools several teams share.
    for name, gpus in (("Pod asks for every GPU of the cluster", _gpus(platform, shared_only=False)),
                       ("Pod asks for every GPU of the shared pools", _gpus(platform, shared_only=True))):
        if gpus and len(platform.teams) > 1:  # a stack of one team may give it every GPU
            found.append(quota_attack(ns, name, gpus))
    if drill:
        marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trainyard-backup-marker",
                                                                        "namespace": ns}, "data": {"namespace": ns}}
        found += [
            Attack("drill", "unqueued GPU Job in the drill namespace", _job(drill, {}), "jobs", drill,
                   user=engineer),
            Attack("drill", "privileged Pod in the drill namespace", _pod(drill, {**_pod_spec(
                securityContext={"privileged": True}), "hostNetwork": True}), "pods", drill, user=engineer),
            Attack("drill", "engineer rewrites the drill's marker", marker, "configmaps", ns, "UPDATE", engineer,
                   copy.deepcopy(marker)),
        ]
    return found


def quota_attack(ns: str, name: str, gpus: int) -> Attack:
    controller = {"username": admission.JOB_CONTROLLER[0], "groups": ["system:serviceaccounts"]}
    return Attack("quota", name, _pod(ns, _pod_spec(resources={"limits": {GPU: gpus}}), _owner("Job", "batch/v1")),
                  "pods", ns, user=controller)


def _gpus(platform: Platform, shared_only: bool) -> int:
    """nvidia.com/gpu of every pool (at its largest), or of the pools more than one team queue lists."""
    total = 0
    for flavor in platform.flavors:
        listed = sum(any(e.flavor == flavor.name for e in q.flavors) for q in platform.queueing.queues)
        if GPU in flavor.capacity and (listed > 1 or not shared_only):
            total += int(flavor.max_capacity.get(GPU, flavor.capacity[GPU]))
    return total


def _within_quota(platform: Platform, attack: Attack) -> bool:
    """The API server's ResourceQuota check for a new Pod in an empty namespace: its GPU requests (defaulted from
    limits) against the namespace's requests.nvidia.com/gpu."""
    team = next(t for t in platform.teams if attack.namespace in t.namespaces)
    ceiling = parse_quantity(tenancy.quota_hard(platform, team, attack.namespace)[f"requests.{GPU}"])
    assert attack.obj is not None
    asked = sum(int(c["resources"]["limits"].get(GPU, 0)) for c in attack.obj["spec"]["containers"])
    return Decimal(asked) <= ceiling


def _binds(platform: Platform, policy_name: str, namespace: str) -> bool:
    """Whether the stack's binding of the policy selects the namespace (a team or drill namespace)."""
    binding = admission.binding_spec(*([policy_name, list(platform.backup.drill_namespaces.values())]
                                       if len(inspect.signature(admission.binding_spec).parameters) > 1
                                       else [policy_name]))
    for term in binding["matchResources"]["namespaceSelector"]["matchExpressions"]:
        if term["operator"] == "NotIn" and namespace in term["values"]:
            return False
    return True


def admitted(platform: Platform, attack: Attack) -> bool:
    if attack.kind == "quota" and not _within_quota(platform, attack):
        return False
    for name, policy in admission.policies(platform).items():
        rules = policy["matchConstraints"]["resourceRules"]
        if not any(attack.resource in r["resources"] and attack.operation in r["operations"] for r in rules):
            continue
        if not _binds(platform, name, attack.namespace):
            continue
        kwargs: dict[str, Any] = {}
        if "user" in inspect.signature(denials).parameters:
            kwargs = {"user": attack.user or {}, "old": attack.old}
        if denials(policy, attack.obj, attack.resource, attack.namespace, attack.operation, **kwargs):
            return False
    return True


def main() -> None:
    from pathlib import Path

    from infra.spec import load_file
    from infra.spec.input.load import stack_names

    root = Path(__file__).resolve().parents[1]
    for stack in stack_names(root):
        platform = load_file(root / "stacks" / f"Pulumi.{stack}.yaml")
        tried = attacks(platform)
        through = Counter(a.kind for a in tried if admitted(platform, a))
        classes = Counter(a.kind for a in tried)
        print(f"{stack}: {len(tried)} attacks, {sum(through.values())} admitted; " + ", ".join(
            f"{kind} {through[kind]}/{count}" for kind, count in sorted(classes.items())))


if __name__ == "__main__":
    main()
