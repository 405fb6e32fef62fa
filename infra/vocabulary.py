"""The words every layer shares: label and annotation names, what counts as a GPU request, where pod specs
sit in each workload kind, how a toleration matches a taint, and the names of the policies.

At the bottom of the import graph: this module imports nothing of ours, so infra/spec, infra/platform,
the admission generator, the policy pack and the offline checks can all use it without importing each
other. Each idea is written once here; the CEL of the admission policies is generated from the same
definitions (infra/platform/admission.py), and tests hold the two to agreement.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

# --- labels and annotations -----------------------------------------------------------------------------

TEAM_LABEL = "trainyard.io/team"  # on team namespaces (and what Trainyard makes in them)
PERSONA_LABEL = "trainyard.io/persona"  # on persona roles and bindings
POOL_LABEL = "trainyard.io/pool"  # node label naming a pool
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue label (the annotation was removed in 0.15)
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # a job's Kueue WorkloadPriorityClass
NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
PSA_PREFIX = "pod-security.kubernetes.io"
PSA_REASON = "trainyard.io/pod-security-reason"  # annotation: why a team namespace runs `baseline`
DRILL_LABEL = "trainyard.io/drill"  # on the restore drill's Restores
BACKUP_MARKER = "trainyard-backup-marker"  # the ConfigMap in each team namespace that a restore drill checks
VOLUME_LABEL = "trainyard.io/volume"  # datasets | checkpoints: a data volume that must be retained
BUCKET_LABEL = "trainyard.io/bucket"  # on a bucket claim and on the job that turns its versioning on
BUCKET_NAMESPACE_LABEL = "trainyard.io/bucket-namespace"  # on that job: the claim's namespace
RECEIVERS_ANNOTATION = "trainyard.io/receivers"  # Alertmanager's receivers' names, readable where the config is secret

# --- the GPU predicate ----------------------------------------------------------------------------------

# Every resource the NVIDIA device plugin advertises lives under this prefix: whole GPUs (nvidia.com/gpu,
# time-sliced or not) and MIG slices (nvidia.com/mig-1g.10gb, ...). A request for any of them, non-zero,
# is a GPU request; the admission CEL (gpu_request_cel) says the same.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCE_PREFIX = "nvidia.com/"


def is_gpu_resource(name: str) -> bool:
    return name.startswith(GPU_RESOURCE_PREFIX)


def asks_gpu(amounts: Any) -> bool:
    """Whether a requests/limits mapping asks for a GPU (a zero amount, as number or string, does not)."""
    return isinstance(amounts, Mapping) and any(
        is_gpu_resource(str(name)) and str(amounts[name]) != "0" for name in amounts)


def gpu_request_cel(amounts: str) -> str:
    """CEL: the map `amounts` asks for a GPU (the same predicate as asks_gpu)."""
    return f"{amounts}.exists(k, k.startsWith('{GPU_RESOURCE_PREFIX}') && string({amounts}[k]) != '0')"


# --- where pod specs sit --------------------------------------------------------------------------------

CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")


class Workload(NamedTuple):
    kind: str
    group: str
    path: tuple[str, ...]  # where its pod specs are; "*" walks a list


_RUNTIME_PATH = ("spec", "template", "spec", "replicatedJobs", "*", "template", "spec", "template", "spec")
# What tenants submit, by resource (plural): what admission checks.
WORKLOADS: dict[str, Workload] = {
    "pods": Workload("Pod", "", ("spec",)),
    "jobs": Workload("Job", "batch", ("spec", "template", "spec")),
    "jobsets": Workload("JobSet", "jobset.x-k8s.io",
                        ("spec", "replicatedJobs", "*", "template", "spec", "template", "spec")),
    "trainingruntimes": Workload("TrainingRuntime", "trainer.kubeflow.org", _RUNTIME_PATH),
    "trainjobs": Workload("TrainJob", "trainer.kubeflow.org",
                          ("spec", "runtimePatches", "*", "trainingRuntimeSpec", "template", "spec", "replicatedJobs",
                           "*", "template", "spec", "template", "spec")),
}
# Kind -> pod spec path: the workloads, the cluster's runtimes and the controllers a platform change may add.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    **{workload.kind: workload.path for workload in WORKLOADS.values()},
    "ClusterTrainingRuntime": _RUNTIME_PATH,
    **{kind: ("spec", "template", "spec") for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")},
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _walk(value: Any, path: Sequence[str]) -> Iterator[Mapping[str, Any]]:
    if not path:
        if isinstance(value, Mapping):
            yield value
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            for item in value:
                yield from _walk(item, rest)
    elif isinstance(value, Mapping) and head in value:
        yield from _walk(value[head], rest)


def pod_specs(kind: str, obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every pod spec inside an object of `kind` (none for kinds that hold none)."""
    return list(_walk(obj, POD_SPEC_PATHS[kind])) if kind in POD_SPEC_PATHS else []


def pod_templates(kind: str, obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every pod template ({metadata, spec}; a Pod is its own) inside an object of `kind`."""
    return list(_walk(obj, POD_SPEC_PATHS[kind][:-1])) if kind in POD_SPEC_PATHS else []


def containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every container of a pod spec, of every kind (init, regular, ephemeral)."""
    found: list[Mapping[str, Any]] = []
    for field in CONTAINER_FIELDS:
        value = spec.get(field)
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            found += [c for c in value if isinstance(c, Mapping)]
    return found


def requests_gpu(spec: Mapping[str, Any]) -> bool:
    """Whether any container of a pod spec asks for a GPU, in requests or limits."""
    return any(asks_gpu((c.get("resources") or {}).get(part)) for c in containers(spec)
               for part in ("requests", "limits") if isinstance(c.get("resources"), Mapping))


# --- tolerations ----------------------------------------------------------------------------------------

def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: whether one toleration tolerates one taint."""
    if toleration.get("effect") not in (None, "", taint.get("effect")):
        return False
    if toleration.get("operator") == "Exists":
        return toleration.get("key") in (None, "", taint.get("key"))
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value")
                                                                                          or "")


def tolerates_cel(toleration: str, taint: str) -> str:
    """`tolerates` in CEL, for admission policies: `toleration` a pod's toleration, `taint` one whose `value` is
    always present ('' when the taint has none)."""
    t = toleration
    effect = f"(!has({t}.effect) || {t}.effect == '' || {t}.effect == {taint}.effect)"
    exists = f"(!has({t}.key) || {t}.key == '' || {t}.key == {taint}.key)"
    equal = f"(has({t}.key) && {t}.key == {taint}.key && (has({t}.value) ? {t}.value : '') == {taint}.value)"
    return f"({effect} && ((has({t}.operator) && {t}.operator == 'Exists') ? {exists} : {equal}))"


# --- policy names ---------------------------------------------------------------------------------------

# The CrossGuard pack's rules (policies/rules.py registers exactly these; a test holds them equal), so that
# the spec can check `policy.levels` without importing the pack.
PACK_RULES = (
    "pinned-versions", "no-tenant-cluster-admin", "team-namespace-baseline", "gpu-tolerations",
    "data-volumes-retain", "stateful-protected", "no-plaintext-secrets", "kueue-trainer-compatible",
    "tenant-rbac", "tenant-network", "team-pod-security", "no-private-keys", "queue-isolation",
    "crd-cel", "operator-webhooks", "apiserver-not-checked",
)
# The in-cluster ValidatingAdmissionPolicies (infra/platform/admission.py).
QUEUE_POLICY = "trainyard-queue-required"
POD_SECURITY_POLICY = "trainyard-pod-security"
REGISTRY_POLICY = "trainyard-allowed-registries"
GPU_QUOTA_POLICY = "trainyard-gpu-quota"
FABRIC_POLICY = "trainyard-fabric-request"
SECRETS_POLICY = "trainyard-no-token-secrets"
EVIDENCE_POLICY = "trainyard-drill-evidence"
PIPELINE_POLICY = "trainyard-pipeline-steps"
