"""Admission: what tenants submit is checked in the cluster by native ValidatingAdmissionPolicies (CEL),
bound to the team namespaces only.

- queue: a TrainJob names a LocalQueue of its namespace in `kueue.x-k8s.io/queue-name`; JobSets and Jobs
  do too unless the TrainJob (JobSet) above them controls them; a Pod asking for GPUs is controlled by a
  Job. Nothing reaches a GPU without Kueue admitting it.
- pod-security: no privileged container, no hostPath volume, in Pods and in every pod template.
- registries: every image comes from one of the stack's allowed registry prefixes.
- gpu-quota: GPUs only in namespaces whose team has a GPU quota.
- fabric-request (stacks whose pools have fabric devices): a TrainJob on a runtime pinned to such a pool
  requests the node's fabric devices (all EFA interfaces; the declared RDMA devices); without them NCCL
  silently falls back to TCP.

The queues, namespaces and registries are written into the expressions from the spec, so a change to
teams or registries is a reviewed change to these objects.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Platform
from infra.spec.policy import DEFAULT_REGISTRY, REPOSITORY_ENDS
from infra.spec.pools import GPU_RESOURCE, POOL_LABEL
from infra.spec.runtimes import pod_specs
from infra.spec.versions import AWS_CLI_IMAGE

from .objects import child_opts, kube_object, metadata
from .tenancy import TEAM_LABEL

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
API = "admissionregistration.k8s.io/v1"
MIG_PREFIX = "nvidia.com/mig-"  # MIG "mixed" strategy resources (nvidia.com/mig-1g.10gb, ...)
CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")

class Workload(NamedTuple):
    kind: str
    group: str
    path: tuple[str, ...]  # where its pod specs are; "*" walks a list


# What tenants submit, by resource (plural). The CrossGuard rules read pod specs along the same paths.
WORKLOADS: dict[str, Workload] = {
    "pods": Workload("Pod", "", ("spec",)),
    "jobs": Workload("Job", "batch", ("spec", "template", "spec")),
    "jobsets": Workload("JobSet", "jobset.x-k8s.io",
                        ("spec", "replicatedJobs", "*", "template", "spec", "template", "spec")),
    "trainingruntimes": Workload("TrainingRuntime", "trainer.kubeflow.org",
                                 ("spec", "template", "spec", "replicatedJobs", "*", "template", "spec", "template",
                                  "spec")),
    "trainjobs": Workload("TrainJob", "trainer.kubeflow.org",
                          ("spec", "runtimePatches", "*", "trainingRuntimeSpec", "template", "spec", "replicatedJobs",
                           "*", "template", "spec", "template", "spec")),
}
# Pod and runtime specs change after creation; the others' pod templates are immutable.
MUTABLE = frozenset({"pods", "trainingruntimes"})


def _lit(value: Any) -> str:
    """A CEL literal (JSON strings, lists and maps are CEL)."""
    return json.dumps(value, sort_keys=True)


def _guard(var: str, fields: Sequence[str]) -> str:
    return " && ".join(f"has({var}.{'.'.join(fields[:i])})" for i in range(1, len(fields) + 1)) or "true"


def every_pod_spec(path: Sequence[str], predicate: str, var: str = "object", depth: int = 0) -> str:
    """CEL: `predicate` (over `s`) holds for every pod spec found along `path`; missing parts hold."""
    if "*" in path:
        star = list(path).index("*")
        head, rest = path[:star], path[star + 1:]
        item = f"x{depth}"
        inner = every_pod_spec(rest, predicate, item, depth + 1)
        return f"({_guard(var, head)} ? {var}.{'.'.join(head)}.all({item}, {inner}) : true)"
    return f"({_guard(var, path)} ? [{var}.{'.'.join(path)}].all(s, {predicate}) : true)"


def every_container(predicate: str) -> str:
    """CEL over pod spec `s`: `predicate` (over `c`) holds for every container of every kind."""
    return " && ".join(f"(!has(s.{field}) || s.{field}.all(c, {predicate}))" for field in CONTAINER_FIELDS)


def _asks_gpu(var: str, field: str) -> str:
    amounts = [f"(has({var}.{field}.{part}) && {var}.{field}.{part}.exists(k, k in variables.gpuResources || "
               f"k.startsWith('{MIG_PREFIX}')))" for part in ("requests", "limits")]
    return f"(has({var}.{field}) && ({' || '.join(amounts)}))"


def _rules(resources: Sequence[str], operations: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    return [{"apiGroups": [WORKLOADS[r].group], "apiVersions": ["*"], "resources": [r],
             "operations": (operations or {}).get(r, ["CREATE", "UPDATE"] if r in MUTABLE else ["CREATE"])}
            for r in resources]


def _when(resource: str, expression: str) -> str:
    return f"request.resource.resource != '{resource}' || {expression}"


def _owned_by(kind: str, group: str) -> str:
    return (f"(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
            f"o.kind == '{kind}' && o.apiVersion.startsWith('{group}/') && has(o.controller) && o.controller))")


def queue_policy(platform: Platform) -> dict[str, Any]:
    queues = {ns: [team.queue] for team in platform.teams for ns in team.job_namespaces}
    labelled = (f"(has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels && "
                f"request.namespace in variables.queues && "
                f"object.metadata.labels['{QUEUE_LABEL}'] in variables.queues[request.namespace])")
    where = "; ".join(f"{ns}: {', '.join(names)}" for ns, names in sorted(queues.items()))
    no_gpu = every_pod_spec(WORKLOADS["pods"].path, every_container(f"!{_asks_gpu('c', 'resources')}"))
    message = f"must carry the label {QUEUE_LABEL} naming the LocalQueue of its namespace ({where})"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": _rules(["trainjobs", "jobsets", "jobs", "pods"],
                                                     {"trainjobs": ["CREATE", "UPDATE"], "pods": ["CREATE"]})},
        "variables": [{"name": "queues", "expression": _lit(queues)},
                      {"name": "gpuResources", "expression": _lit(gpu_resources(platform))}],
        "validations": [
            {"expression": _when("trainjobs", labelled), "message": f"a TrainJob {message}", "reason": "Forbidden"},
            {"expression": _when("jobsets", f"{_owned_by('TrainJob', 'trainer.kubeflow.org')} || {labelled}"),
             "message": f"a JobSet not created by a TrainJob {message}", "reason": "Forbidden"},
            {"expression": _when("jobs", f"{_owned_by('JobSet', 'jobset.x-k8s.io')} || {labelled}"),
             "message": f"a Job not created by a JobSet {message}", "reason": "Forbidden"},
            {"expression": _when("pods", f"{_owned_by('Job', 'batch')} || {no_gpu}"),
             "message": "a Pod that requests GPUs must belong to a Job that Kueue admitted: submit a TrainJob",
             "reason": "Forbidden"},
        ],
    }


def pod_security_policy() -> dict[str, Any]:
    unprivileged = "!has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged"
    safe = f"{every_container(unprivileged)} && (!has(s.volumes) || s.volumes.all(v, !has(v.hostPath)))"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": _rules(list(WORKLOADS))},
        "validations": [
            {"expression": _when(resource, every_pod_spec(path, safe)), "reason": "Forbidden",
             "message": f"{resource}: privileged containers and hostPath volumes are not allowed in team namespaces"}
            for resource, (_, _, path) in WORKLOADS.items()
        ],
    }


def _image_ok(var: str) -> str:
    image = f"{var}.image"
    qualified = (f"({image}.matches('^([^/]*[.:][^/]*|localhost)/') ? {image} : ({image}.contains('/') ? "
                 f"'{DEFAULT_REGISTRY}/' + {image} : '{DEFAULT_REGISTRY}/library/' + {image}))")
    under = " || ".join(f"{qualified}.startsWith(p + '{end}')" for end in REPOSITORY_ENDS)
    return f"(!has({image}) || variables.registries.exists(p, {under}))"


def _per_workload(predicate: str, trainer: str, message: str, unless: str = "") -> list[dict[str, Any]]:
    """One validation per workload kind (`predicate` over each pod spec `s`), and one for the TrainJob's
    `spec.trainer` (`trainer` over `t`), each skipped when `unless` holds."""
    checks = [(resource, every_pod_spec(path, predicate)) for resource, (_, _, path) in WORKLOADS.items()]
    checks.append(("trainjobs", f"(!has(object.spec.trainer) || [object.spec.trainer].all(t, {trainer}))"))
    return [{"expression": f"{unless} || {_when(resource, check)}" if unless else _when(resource, check),
             "message": message, "reason": "Forbidden"} for resource, check in checks]


def registry_policy(platform: Platform, images: Sequence[str]) -> dict[str, Any]:
    prefixes = [p.rstrip("/") for p in platform.spec.policy.registries(images)]
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": _rules(list(WORKLOADS))},
        "variables": [{"name": "registries", "expression": _lit(prefixes)}],
        "validations": _per_workload(every_container(_image_ok("c")), _image_ok("t"),
                                     f"images must come from an allowed registry: {', '.join(prefixes)}"),
    }


def gpu_resources(platform: Platform) -> list[str]:
    return sorted({r for flavor in platform.flavors for r in flavor.gpu_resources} | {GPU_RESOURCE})


def gpu_namespaces(platform: Platform) -> list[str]:
    names = gpu_resources(platform)
    return sorted(ns for team in platform.teams if any(team.totals.get(r, 0) > 0 for r in names)
                  for ns in team.job_namespaces)


def gpu_policy(platform: Platform) -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": _rules(list(WORKLOADS))},
        "variables": [{"name": "gpuNamespaces", "expression": _lit(gpu_namespaces(platform))},
                      {"name": "gpuResources", "expression": _lit(gpu_resources(platform))}],
        "validations": _per_workload(
            every_container(f"!{_asks_gpu('c', 'resources')}"), f"!{_asks_gpu('t', 'resourcesPerNode')}",
            "this namespace's team has no GPU quota: request no GPUs here, or give the team a GPU quota",
            unless="request.namespace in variables.gpuNamespaces"),
    }


def fabric_runtimes(platform: Platform) -> dict[str, dict[str, Any]]:
    """Runtime name -> {resource, count}: what a pod of a runtime pinned to a pool with fabric devices requests."""
    requests = {name: pool.fabric_request for name, pool in platform.spec.pools.items() if pool.fabric_request}
    found: dict[str, dict[str, Any]] = {}
    for runtime in platform.runtimes:
        for spec in pod_specs(runtime):
            request = requests.get(spec.get("nodeSelector", {}).get(POOL_LABEL))
            if request:
                found[runtime["metadata"]["name"]] = {"resource": request[0], "count": request[1]}
    return found


def fabric_policy(runtimes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Trainer 2.2 replaces a runtime's container resources with the TrainJob's `resourcesPerNode`, so the
    fabric request cannot live in the runtime: the TrainJob states it (as a number or a string)."""
    want = "variables.fabricRuntimes[variables.runtime]"

    def states(part: str) -> str:
        field = f"t.resourcesPerNode.{part}"
        return (f"(has({field}) && {want}.resource in {field} && "
                f"string({field}[{want}.resource]) == string({want}.count))")
    cluster_runtime = ("!has(object.spec.runtimeRef.kind) || "
                       "object.spec.runtimeRef.kind == 'ClusterTrainingRuntime'")
    expression = (f"!(variables.runtime in variables.fabricRuntimes) || !({cluster_runtime}) || "
                  f"(has(object.spec.trainer) && has(object.spec.trainer.resourcesPerNode) && "
                  f"[object.spec.trainer].all(t, {states('limits')} || {states('requests')}))")
    wanted = ", ".join(f"{name}: {r['resource']}={r['count']}" for name, r in sorted(runtimes.items()))
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": _rules(["trainjobs"])},
        "variables": [{"name": "fabricRuntimes", "expression": _lit(runtimes)},
                      {"name": "runtime", "expression": "object.spec.runtimeRef.name"}],
        "validations": [{"expression": expression, "reason": "Forbidden",
                         "message": "a TrainJob on a fabric runtime requests its node's fabric devices in "
                                    f"spec.trainer.resourcesPerNode ({wanted})"}],
    }


def policies(platform: Platform) -> dict[str, dict[str, Any]]:
    """Policy name -> ValidatingAdmissionPolicy spec."""
    # The runtimes' images, and the platform's own jobs that run in team namespaces (bucket versioning).
    images = [c["image"] for runtime in platform.runtimes for spec in pod_specs(runtime)
              for field in CONTAINER_FIELDS for c in spec.get(field, []) if "image" in c] + [AWS_CLI_IMAGE]
    return {
        "trainyard-queue-required": queue_policy(platform),
        "trainyard-pod-security": pod_security_policy(),
        "trainyard-allowed-registries": registry_policy(platform, images),
        "trainyard-gpu-quota": gpu_policy(platform),
        **({"trainyard-fabric-request": fabric_policy(runtimes)} if (runtimes := fabric_runtimes(platform)) else {}),
    }


def binding_spec(policy_name: str, exempt: Sequence[str]) -> dict[str, Any]:
    """Team namespaces, except the restore drill's scratch copies: Velero restores a team's labels into
    them, and the drill must restore whatever the team had (a TrainJob admitted long ago included)."""
    selector: list[dict[str, Any]] = [{"key": TEAM_LABEL, "operator": "Exists"}]
    if exempt:
        selector.append({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": sorted(exempt)})
    return {
        "policyName": policy_name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": selector}},
    }


class Admission(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Admission", name, None, opts)
        specs = policies(platform)
        drills = list(platform.backup.drill_namespaces.values())
        for policy_name, spec in specs.items():
            policy = kube_object(f"vap-{policy_name}", API, "ValidatingAdmissionPolicy", metadata(policy_name),
                                 child_opts(self, provider), spec=spec)
            kube_object(f"vapb-{policy_name}", API, "ValidatingAdmissionPolicyBinding", metadata(policy_name),
                        child_opts(self, provider, depends_on=[policy]), spec=binding_spec(policy_name, drills))
        self.register_outputs({"policies": sorted(specs)})
