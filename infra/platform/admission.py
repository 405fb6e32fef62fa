"""Admission: what tenants submit is checked in the cluster by native ValidatingAdmissionPolicies (CEL),
bound to every namespace carrying the team label (restore-drill copies included: no exemptions).

- queue: TrainJobs, JobSets and Jobs name a LocalQueue of their namespace in `kueue.x-k8s.io/queue-name`
  when created, and keep it on every update. The only exemption is by who asks (request.userInfo, which the
  API server sets from the credential): the Trainer controller creating a TrainJob's JobSet, the JobSet
  controller creating its Jobs, and the job controller creating GPU Pods. An ownerReference, which any user
  may write, exempts nothing. Kueue itself manages every job of a team namespace, labelled or not
  (manageJobsWithoutQueueName, infra/platform/kueue.py). A Pod the job controller did not create may not
  tolerate a GPU pool's taint or set nodeName (either would park it on GPU nodes outside the queues).
- pod-security: no privileged container, host namespace, hostPath volume, hostPort, added capability, root
  user or pod priority class, in Pods and in every pod template: independent of the namespace's Pod Security
  label.
- registries: every image comes from one of the stack's allowed registry prefixes, at a pinned tag or digest.
- gpu-quota: GPUs only in namespaces whose team has a GPU quota.
- secrets: no ServiceAccount token Secrets (a never-expiring credential); CI identities submit TrainJobs
  that reference no Secret and run on a ClusterTrainingRuntime.
- drill-evidence: tenants cannot create, change or delete the backup marker the restore drill checks.
- pipeline-steps: no Argo or KFP run whose steps ask for GPUs (infra/platform/admission_steps.py).
- fabric-request (stacks whose pools have fabric devices): a TrainJob on a runtime pinned to such a pool
  requests the node's fabric devices (all EFA interfaces; the declared RDMA devices); without them NCCL
  silently falls back to TCP.

The queues, namespaces, registries and controller identities are written into the expressions from the
spec, so a change to teams or registries is a reviewed change to these objects.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import child_opts, kube_object, metadata
from infra.platform.admission_cel import (
    asks_gpu,
    every_container,
    every_pod_spec,
    is_set,
    lit,
    resource_rules,
    security_field,
    when,
)
from infra.platform.admission_steps import pipeline_policy
from infra.platform.models.registry_patches import registry_images
from infra.platform.models.serving_policy import (
    PREDICTOR_LABEL,
    SERVING_POLICY,
    predictor_images,
    serving_facts,
    serving_policy,
)
from infra.platform.rbac import ci_subjects
from infra.platform.trainer import JOBSET_CONTROLLER, TRAINER_CONTROLLER
from infra.spec import Platform
from infra.spec.policy import DEFAULT_REGISTRY, REPOSITORY_ENDS
from infra.spec.queues.flavors import gpu_taints
from infra.spec.runtimes import pod_specs
from infra.spec.versions import AWS_CLI_IMAGE
from infra.vocabulary import (
    BACKUP_MARKER,
    CONTAINER_FIELDS,
    EVIDENCE_POLICY,
    FABRIC_POLICY,
    GPU_QUOTA_POLICY,
    PIPELINE_POLICY,
    POD_SECURITY_POLICY,
    POOL_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    QUEUE_POLICY,
    REGISTRY_POLICY,
    SECRETS_POLICY,
    TEAM_LABEL,
    WORKLOADS,
    tolerates_cel,
)

API = "admissionregistration.k8s.io/v1"
# kube-controller-manager's job controller: its own ServiceAccount when the controller manager runs with
# --use-service-account-credentials (kubeadm, EKS, GKE, AKS), else the controller manager's user.
JOB_CONTROLLER = ("system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager")
# Who creates what on a tenant's behalf: the only requests exempt from carrying a queue label.
CREATORS: dict[str, tuple[str, ...]] = {
    "jobsets": (TRAINER_CONTROLLER,),
    "jobs": (JOBSET_CONTROLLER,),
    "pods": JOB_CONTROLLER,
}
QUEUED = ("trainjobs", "jobsets", "jobs")
# Capabilities a container may add: Pod Security `restricted` allows only this one; the runtimes add none.
ALLOWED_CAPABILITIES = ("NET_BIND_SERVICE",)
TOKEN_SECRET = "kubernetes.io/service-account-token"


def _label(var: str) -> str:
    """CEL: the queue label of `var`, or '' when it has none."""
    return (f"((has({var}.metadata.labels) && '{QUEUE_LABEL}' in {var}.metadata.labels) ? "
            f"{var}.metadata.labels['{QUEUE_LABEL}'] : '')")


def queue_policy(platform: Platform) -> dict[str, Any]:
    queues = {ns: list(team.local_queues) for team in platform.teams for ns in team.job_namespaces}
    labelled = (f"(request.namespace in variables.queues && "
                f"{_label('object')} in variables.queues[request.namespace])")
    where = "; ".join(f"{ns}: {', '.join(names)}" for ns, names in sorted(queues.items()))
    no_gpu = every_pod_spec(WORKLOADS["pods"].path, every_container(f"!{asks_gpu('c', 'resources')}"))
    kinds = {resource: WORKLOADS[resource].kind for resource in QUEUED}
    validations = [
        {"expression": when(resource, f"variables.creator || request.operation != 'CREATE' || {labelled}"),
         "message": f"a {kind} must carry the label {QUEUE_LABEL} naming the LocalQueue of its namespace ({where})",
         "reason": "Forbidden"}
        for resource, kind in kinds.items()
    ]
    validations.append({
        "expression": ("!(request.resource.resource in variables.queued) || variables.creator || "
                       f"request.operation != 'UPDATE' || {_label('object')} == {_label('oldObject')}"),
        "message": f"the label {QUEUE_LABEL} cannot be changed or removed once set: delete and resubmit the job",
        "reason": "Forbidden"})
    validations.append({
        "expression": when("pods", f"variables.creator || {no_gpu}"),
        "message": "a Pod that requests GPUs must be created by a Job that Kueue admitted: submit a TrainJob",
        "reason": "Forbidden"})
    validations.append({
        "expression": when("pods", "variables.creator || !has(object.spec.nodeName) || object.spec.nodeName == ''"),
        "message": "a Pod not created by a Kueue-admitted Job must not set nodeName, which skips the scheduler and "
                   "the nodes' NoSchedule taints: let the scheduler place it",
        "reason": "Forbidden"})
    taints = gpu_taints(platform.flavors)
    if taints:
        clear = every_pod_spec(WORKLOADS["pods"].path, "!has(s.tolerations) || s.tolerations.all(t, "
                               f"!variables.gpuTaints.exists(x, {tolerates_cel('t', 'x')}))")
        keys = ", ".join(sorted({taint["key"] for taint in taints}))
        validations.append({
            "expression": when("pods", f"variables.creator || {clear}"),
            "message": f"a Pod not created by a Kueue-admitted Job must not tolerate the GPU pools' taints ({keys}), "
                       "which would hold GPU nodes' CPU and memory outside the queues: drop the toleration, or "
                       "submit a TrainJob",
            "reason": "Forbidden"})
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [*resource_rules(QUEUED), *resource_rules(["pods"], ["CREATE"])]},
        "variables": [{"name": "queues", "expression": lit(queues)},
                      {"name": "queued", "expression": lit(list(QUEUED))},
                      {"name": "gpuTaints", "expression": lit(taints)},
                      {"name": "creators", "expression": lit({r: list(users) for r, users in CREATORS.items()})},
                      {"name": "creator", "expression": (
                          "request.resource.resource in variables.creators && "
                          "request.userInfo.username in variables.creators[request.resource.resource]"
                          + _predictor_exemption(platform))}],
        "validations": validations,
    }


def _predictor_exemption(platform: Platform) -> str:
    """CEL (appended to `creator`): a KServe predictor pod in a models namespace of a team with a serving budget is
    not Kueue's; trainyard-serving holds it to the team's serving pool and the namespace's quota to its budget."""
    served = sorted(ns for ns, facts in serving_facts(platform).items() if facts["pool"])
    if not served:
        return ""
    return (f" || (request.resource.resource == 'pods' && request.namespace in {lit(served)} && "
            f"has(object.metadata.labels) && '{PREDICTOR_LABEL}' in object.metadata.labels)")


def container_safety(complete: bool) -> str:
    """CEL over container `c` of pod spec `s`. A complete pod spec must run as non-root; a TrainJob's runtime
    patch is merged into its runtime's (which sets it), so there only an explicit root user is refused."""
    context = "c.securityContext"
    safe = [
        f"!(has({context}) && {is_set(context, 'privileged')})",
        f"!(has({context}) && has({context}.capabilities) && has({context}.capabilities.add) && "
        f"{context}.capabilities.add.exists(a, !(a in {lit(list(ALLOWED_CAPABILITIES))})))",
        "(!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
        security_field("runAsUser", "v != 0", "true"),
        security_field("runAsNonRoot", "v", "false" if complete else "true"),
    ]
    return " && ".join(safe)


def pod_safety(complete: bool) -> str:
    """CEL over pod spec `s`: no host namespaces, no hostPath volumes, no pod priority class (a tenant's
    system-node-critical pod would preempt other teams' pods on any node; teams pick a Kueue priority instead),
    every container safe."""
    host = " && ".join(f"!{is_set('s', field)}" for field in ("hostNetwork", "hostPID", "hostIPC"))
    return (f"{host} && (!has(s.volumes) || s.volumes.all(v, !has(v.hostPath))) && "
            "(!has(s.priorityClassName) || s.priorityClassName == '') && "
            f"{every_container(container_safety(complete))}")


def pod_security_policy() -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": resource_rules(list(WORKLOADS))},
        "validations": [
            {"expression": when(resource, every_pod_spec(path, pod_safety(resource != "trainjobs"))),
             "reason": "Forbidden",
             "message": f"{resource}: in team namespaces no privileged container, host namespace (hostNetwork, "
                        "hostPID, hostIPC), hostPath volume, hostPort, added capability (beyond "
                        f"{', '.join(ALLOWED_CAPABILITIES)}), root user (set runAsNonRoot: true) or "
                        f"priorityClassName (pick a Kueue priority with the label {PRIORITY_LABEL})"}
            for resource, (_, _, path) in WORKLOADS.items()
        ],
    }


def _image_ok(var: str) -> str:
    """The image, qualified as the container runtime resolves it, matches the allowed prefixes' pattern: one
    regular expression per container (a prefix loop qualified the image again for each prefix and each end)."""
    image = f"{var}.image"
    qualified = (f"({image}.matches('^([^/]*[.:][^/]*|localhost)/') ? {image} : ({image}.contains('/') ? "
                 f"'{DEFAULT_REGISTRY}/' + {image} : '{DEFAULT_REGISTRY}/library/' + {image}))")
    return f"(!has({image}) || {qualified}.matches(variables.allowedImages))"


def registry_pattern(prefixes: Sequence[str]) -> str:
    """A regular expression (RE2 and Python alike) for a qualified image under one of `prefixes`, followed by one
    of REPOSITORY_ENDS: infra.spec.policy.allowed as the API server evaluates it. Every character but a letter or a
    digit is escaped, so a prefix's dot matches only a dot."""
    if not prefixes:
        raise ValueError("no allowed registry: the stack's runtimes give at least their own")
    alternatives = "|".join(re.sub(r"([^A-Za-z0-9])", r"\\\1", prefix) for prefix in prefixes)
    return f"^(?:{alternatives})[{''.join(REPOSITORY_ENDS)}]"


def image_pinned_cel(image: str) -> str:
    """CEL: `image` names a sha256 digest, or a tag other than `latest` (infra.spec.pins.unpinned_image)."""
    return (f"({image}.contains('@') ? {image}.contains('@sha256:') : "
            f"({image}.matches('^(.*/)?[^/:]*:[^/:]+$') && !{image}.endsWith(':latest')))")


def _pinned(var: str) -> str:
    return f"(!has({var}.image) || {image_pinned_cel(f'{var}.image')})"


def _per_workload(predicate: str, trainer: str, message: str, unless: str = "") -> list[dict[str, Any]]:
    """One validation per workload kind (`predicate` over each pod spec `s`), and one for the TrainJob's
    `spec.trainer` (`trainer` over `t`), each skipped when `unless` holds."""
    checks = [(resource, every_pod_spec(path, predicate)) for resource, (_, _, path) in WORKLOADS.items()]
    checks.append(("trainjobs", f"(!has(object.spec.trainer) || [object.spec.trainer].all(t, {trainer}))"))
    return [{"expression": f"{unless} || {when(resource, check)}" if unless else when(resource, check),
             "message": message, "reason": "Forbidden"} for resource, check in checks]


def registry_policy(platform: Platform, images: Sequence[str]) -> dict[str, Any]:
    prefixes = platform.spec.policy.registries(images)  # repositories and validated prefixes: no trailing '/'
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": resource_rules(list(WORKLOADS))},
        "variables": [{"name": "allowedImages", "expression": lit(registry_pattern(prefixes))}],
        "validations": [
            *_per_workload(every_container(_image_ok("c")), _image_ok("t"),
                           f"images must come from an allowed registry: {', '.join(prefixes)}"),
            *_per_workload(every_container(_pinned("c")), _pinned("t"),
                           "images must be pinned: an exact tag (not latest) or an @sha256 digest"),
        ],
    }


def gpu_namespaces(platform: Platform) -> list[str]:
    """A team's namespaces when it has a GPU quota, and its models namespace when its serving budget has GPUs."""
    queued = {ns for team in platform.teams if any(team.totals.get(r, 0) > 0 for flavor in platform.flavors
                                                   for r in flavor.gpu_resources)
              for ns in team.job_namespaces}
    serving = {t.namespace for t in platform.models.teams if t.serving and t.serving.gpus} if platform.models else set()
    return sorted(queued | serving)


def gpu_policy(platform: Platform) -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": resource_rules(list(WORKLOADS))},
        "variables": [{"name": "gpuNamespaces", "expression": lit(gpu_namespaces(platform))}],
        "validations": _per_workload(
            every_container(f"!{asks_gpu('c', 'resources')}"), f"!{asks_gpu('t', 'resourcesPerNode')}",
            "this namespace's team has no GPU quota: request no GPUs here, or give the team a GPU quota",
            unless="request.namespace in variables.gpuNamespaces"),
    }


def _no_secret_env(var: str) -> str:
    """CEL: no entry of the env list `var` takes its value from a Secret."""
    return (f"(!has({var}) || {var}.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef)))")


def _secret_free_pod() -> str:
    """CEL over pod spec `s`: no Secret reaches the pod (volumes, projected volumes, CSI secrets, env)."""
    volumes = "(!has(s.volumes) || s.volumes.all(v, !has(v.secret) && !has(v.projected) && !has(v.csi)))"
    envs = every_container(f"{_no_secret_env('c.env')} && "
                           "(!has(c.envFrom) || c.envFrom.all(e, !has(e.secretRef)))")
    return f"{volumes} && {envs}"


def secrets_policy(ci_users: Sequence[str], ci_groups: Sequence[str]) -> dict[str, Any]:
    """Token Secrets never; and a CI identity (which may not read Secrets) cannot have a TrainJob read them for
    it: no secretRef in its initializers, no Secret in its env or patched pods, and only the platform's
    ClusterTrainingRuntimes (a namespaced runtime is the team's to write, and could mount anything)."""
    initializers = " && ".join(
        f"(!has(object.spec.initializer) || !has(object.spec.initializer.{part}) || "
        f"(!has(object.spec.initializer.{part}.secretRef) && {_no_secret_env(f'object.spec.initializer.{part}.env')}))"
        for part in ("dataset", "model"))
    trainer = f"(!has(object.spec.trainer) || {_no_secret_env('object.spec.trainer.env')})"
    runtime = "(!has(object.spec.runtimeRef.kind) || object.spec.runtimeRef.kind == 'ClusterTrainingRuntime')"
    patches = every_pod_spec(WORKLOADS["trainjobs"].path, _secret_free_pod())
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [*resource_rules(["secrets"]),
                                               *resource_rules(["trainjobs"])]},
        "variables": [
            {"name": "ci", "expression": (f"request.userInfo.username in {lit(list(ci_users))} || "
                                          f"(has(request.userInfo.groups) && request.userInfo.groups.exists(g, "
                                          f"g in {lit(list(ci_groups))}))")}],
        "validations": [
            {"expression": when("secrets", f"!has(object.type) || object.type != '{TOKEN_SECRET}'"),
             "message": "ServiceAccount token Secrets never expire: use `kubectl create token` (short-lived) "
                        "or the workload's projected token", "reason": "Forbidden"},
            {"expression": when("trainjobs", f"!variables.ci || ({initializers} && {trainer} && {runtime} && "
                                              f"{patches})"),
             "message": "a CI identity may not read Secrets, so its TrainJobs reference none (initializer "
                        "secretRef, env from a Secret, Secret/projected/CSI volumes) and run on a "
                        "ClusterTrainingRuntime", "reason": "Forbidden"},
        ],
    }


def tenant_identities(platform: Platform) -> tuple[list[str], list[str]]:
    """(usernames, groups) that act for tenants: the persona groups of every team, the CI ServiceAccounts,
    and every ServiceAccount of a team namespace (what a tenant's pod runs as)."""
    users, ci_groups = ci_subjects(platform)
    names = {g for spec in platform.spec.teams.values() for g in (*spec.groups.engineers, *spec.groups.analysts)}
    groups = {platform.spec.identity.group(name) for name in names} | set(ci_groups)
    groups |= {f"system:serviceaccounts:{ns}" for team in platform.teams for ns in team.namespaces}
    return users, sorted(groups)


def evidence_policy(platform: Platform) -> dict[str, Any]:
    """The backup marker is the restore drill's evidence: tenants may not create, change or delete it
    (their persona may edit ConfigMaps, and RBAC cannot except one name from a grant of all)."""
    users, groups = tenant_identities(platform)
    name = ("(request.operation == 'DELETE' ? oldObject.metadata.name : "
            "(has(object.metadata.name) ? object.metadata.name : ''))")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": resource_rules(["configmaps"], ["CREATE", "UPDATE", "DELETE"])},
        "variables": [{"name": "tenant", "expression": (
            f"request.userInfo.username in {lit(users)} || (has(request.userInfo.groups) && "
            f"request.userInfo.groups.exists(g, g in {lit(groups)}))")}],
        "validations": [{"expression": f"!variables.tenant || {name} != '{BACKUP_MARKER}'",
                         "message": f"{BACKUP_MARKER} is the restore drill's evidence: only the platform writes it",
                         "reason": "Forbidden"}],
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
        "matchConstraints": {"resourceRules": resource_rules(["trainjobs"], ["CREATE"])},
        "variables": [{"name": "fabricRuntimes", "expression": lit(runtimes)},
                      {"name": "runtime", "expression": "object.spec.runtimeRef.name"}],
        "validations": [{"expression": expression, "reason": "Forbidden",
                         "message": "a TrainJob on a fabric runtime requests its node's fabric devices in "
                                    f"spec.trainer.resourcesPerNode ({wanted})"}],
    }


def platform_images(platform: Platform) -> list[str]:
    """The runtimes' images, the object-storage client of the documented publish step (examples/*/publish.yaml)
    and what runs in the teams' models namespaces with `models` (the team registries' pods and the predictors):
    always admitted, at any pinned tag (they are reviewed here)."""
    models = [*registry_images(platform.models), *predictor_images()] if platform.models is not None else []
    return [c["image"] for runtime in platform.runtimes for spec in pod_specs(runtime)
            for field in CONTAINER_FIELDS for c in spec.get(field, []) if "image" in c] + [AWS_CLI_IMAGE, *models]


def policies(platform: Platform) -> dict[str, dict[str, Any]]:
    """Policy name -> ValidatingAdmissionPolicy spec."""
    users, ci_groups = ci_subjects(platform)
    return {
        QUEUE_POLICY: queue_policy(platform),
        POD_SECURITY_POLICY: pod_security_policy(),
        REGISTRY_POLICY: registry_policy(platform, platform_images(platform)),
        GPU_QUOTA_POLICY: gpu_policy(platform),
        SECRETS_POLICY: secrets_policy(users, ci_groups),
        EVIDENCE_POLICY: evidence_policy(platform),
        PIPELINE_POLICY: pipeline_policy(),
        **({FABRIC_POLICY: fabric_policy(runtimes)} if (runtimes := fabric_runtimes(platform)) else {}),
        **({SERVING_POLICY: serving_policy(platform)} if platform.models is not None else {}),
    }


def binding_spec(policy_name: str) -> dict[str, Any]:
    """Every namespace with the team label: the team namespaces and the restore drill's copies of them
    (Velero restores the label), which get no exemption."""
    return {
        "policyName": policy_name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}},
    }


class Admission(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Admission", name, None, opts)
        specs = policies(platform)
        for policy_name, spec in specs.items():
            policy = kube_object(f"vap-{policy_name}", API, "ValidatingAdmissionPolicy", metadata(policy_name),
                                 child_opts(self, provider), spec=spec)
            kube_object(f"vapb-{policy_name}", API, "ValidatingAdmissionPolicyBinding", metadata(policy_name),
                        child_opts(self, provider, depends_on=[policy]), spec=binding_spec(policy_name))
        self.register_outputs({"policies": sorted(specs)})
