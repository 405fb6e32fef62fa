"""Trainyard's CrossGuard rules. `__main__.py` serves them to the Pulumi CLI; `trainyard validate` runs
them over the offline engine's registrations (infra/checks/policies.py).

Every rule judges what the program registers, never the stack file's intent: a rule that needs to know
which namespaces belong to teams reads the Namespaces' team label, not the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from infra.spec.pins import EXACT_VERSION, unpinned_image
from infra.spec.versions import DEFAULT_JOBSET, Versions, verdicts
from infra.vocabulary import PACK_RULES, TEAM_LABEL
from policies import apiserver_rules, stackconfig
from policies.kube import (
    CHART_TYPES,
    chart_versions,
    get,
    images,
    items,
    kind_of,
    meta,
    objects,
    team_namespaces,
    tenant_subjects,
)
from policies.tenancy_rules import no_private_keys, queue_isolation, team_pod_security, tenant_network, tenant_rbac
from policies.tolerations import gpu_tolerations

PACK_NAME = "trainyard"
PACK_LEVEL = EnforcementLevel.ADVISORY  # what a rule without its own level gets; every rule sets one

# Clusters, node pools, buckets and file systems: `protect` is required (a replacement or destroy fails).
PROTECTED_TYPES = frozenset({
    "eks:index:Cluster", "eks:index:ManagedNodeGroup", "eks:index:NodeGroup",
    "aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup",
    "gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool",
    "azure-native:containerservice:ManagedCluster", "azure-native:containerservice:AgentPool",
    "aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2", "gcp:storage/bucket:Bucket",
    "azure-native:storage:StorageAccount", "azure-native:storage:BlobContainer",
    "aws:efs/fileSystem:FileSystem", "aws:fsx/lustreFileSystem:LustreFileSystem", "gcp:filestore/instance:Instance",
})
# CRDs and data volumes: `protect`, or `retainOnDelete` (the object stays in the cluster when Pulumi lets go).
RETAINED_TYPES = frozenset({
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
    "kubernetes:core/v1:PersistentVolume",
    "kubernetes:core/v1:PersistentVolumeClaim",
})
WILDCARD_ROLE = ("ClusterRole", "cluster-admin")


# --- pinned-versions -------------------------------------------------------------------------------------

def _pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type in CHART_TYPES:
        version = str(args.props.get("version") or "")
        if not EXACT_VERSION.fullmatch(version):
            report(f"chart version '{version}' is not exact: pin a released chart version", None)
    if kind_of(args.resource_type) == "CustomResourceDefinition":
        return  # a CRD deploys nothing; its schema is most of a stack's bytes
    for image in sorted(set(images(args.props))):
        if unpinned_image(image):
            report(f"image '{image}' is not pinned: use an exact tag (not latest) or a sha256 digest", None)


# --- no-tenant-cluster-admin ------------------------------------------------------------------------------

def _wildcard(rules: Any) -> bool:
    return any("*" in [str(v) for v in items(get(rule, field))]
               for rule in items(rules) for field in ("verbs", "resources", "apiGroups"))


def _role_key(kind: str, name: str, namespace: str) -> tuple[str, str]:
    return (kind, name) if kind == "ClusterRole" else (kind, f"{namespace}/{name}")


def _tenant_admin(args: StackValidationArgs, report: ReportViolation) -> None:
    admins = {str(g) for g in items(args.get_config().get("adminGroups"))}
    tenant_namespaces = team_namespaces(args.resources)
    wildcard = {WILDCARD_ROLE}
    for kind in ("Role", "ClusterRole"):
        for role in objects(args.resources, kind):
            namespace, name, _ = meta(role.props)
            if _wildcard(role.props.get("rules")):
                wildcard.add(_role_key(kind, name, namespace))
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in objects(args.resources, kind):
            namespace, name, _ = meta(binding.props)
            ref = get(binding.props, "roleRef")
            key = _role_key(str(get(ref, "kind") or ""), str(get(ref, "name") or ""), namespace)
            if key not in wildcard:
                continue
            if kind == "RoleBinding" and namespace in tenant_namespaces:
                report(f"RoleBinding {namespace}/{name} grants {key[1]} inside team namespace {namespace}",
                       binding.urn)
                continue
            tenants = tenant_subjects(binding.props.get("subjects"), namespace, tenant_namespaces, admins)
            if tenants:
                report(f"{kind} {name} grants {key[1]} (every verb on every resource) to {', '.join(tenants)}: "
                       "bind tenants to the persona roles instead", binding.urn)


# --- team-namespace-baseline ------------------------------------------------------------------------------

def _default_deny(policy: Mapping[str, Any]) -> bool:
    spec = get(policy, "spec")
    selector = get(spec, "podSelector")
    selects_all = selector is not None and not get(selector, "matchLabels") and not items(
        get(selector, "matchExpressions"))
    types = {str(t) for t in items(get(spec, "policyTypes"))}
    return selects_all and {"Ingress", "Egress"} <= types and not items(get(spec, "ingress")) \
        and not items(get(spec, "egress"))


def _team_baseline(args: StackValidationArgs, report: ReportViolation) -> None:
    present: dict[str, set[str]] = {}
    for kind in ("ResourceQuota", "LimitRange"):
        for obj in objects(args.resources, kind):
            present.setdefault(meta(obj.props)[0], set()).add(kind)
    for policy in objects(args.resources, "NetworkPolicy"):
        if _default_deny(policy.props):
            present.setdefault(meta(policy.props)[0], set()).add("default-deny NetworkPolicy")
    for ns in objects(args.resources, "Namespace"):
        _, name, labels = meta(ns.props)
        if TEAM_LABEL not in labels:
            continue
        missing = [want for want in ("ResourceQuota", "LimitRange", "default-deny NetworkPolicy")
                   if want not in present.get(name, set())]
        if missing:
            report(f"team namespace {name} has no {', no '.join(missing)}", ns.urn)


# --- data-volumes-retain ----------------------------------------------------------------------------------

DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def _data_volumes_retain(args: StackValidationArgs, report: ReportViolation) -> None:
    classes = {meta(c.props)[1]: c for c in objects(args.resources, "StorageClass")}
    default = [name for name, c in classes.items()
               if str(get(c.props, "metadata", "annotations", DEFAULT_CLASS)) == "true"]
    used: dict[str, str] = {}
    for kind in ("PersistentVolumeClaim", "PersistentVolume"):
        for volume in objects(args.resources, kind):
            namespace, name, _ = meta(volume.props)
            wanted = get(volume.props, "spec", "storageClassName")
            klass = str(wanted) if wanted is not None else (default[0] if default and kind.endswith("Claim") else "")
            if klass:
                used.setdefault(klass, f"{kind} {'/'.join(filter(None, (namespace, name)))}")
            policy = get(volume.props, "spec", "persistentVolumeReclaimPolicy")
            if kind == "PersistentVolume" and policy not in (None, "Retain"):
                report(f"PersistentVolume {name} has reclaim policy {policy}: data volumes use Retain", volume.urn)
    for klass, user in sorted(used.items()):
        if klass in classes and get(classes[klass].props, "reclaimPolicy") != "Retain":
            policy = get(classes[klass].props, "reclaimPolicy") or "Delete (the default)"
            report(f"StorageClass {klass} reclaims with {policy} but backs data volume {user}: use Retain",
                   classes[klass].urn)


# --- stateful-protected -----------------------------------------------------------------------------------

def _protected(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.opts.protect or args.resource_type not in PROTECTED_TYPES | RETAINED_TYPES:
        return
    if args.resource_type in PROTECTED_TYPES:
        report(f"{args.resource_type} {args.name} is not protected: a replacement or `pulumi destroy` would "
               "delete it; set protect=True", None)
        return
    # The engine does not send retainOnDelete to analyzers; the offline runner does (see policy_runner).
    retained = getattr(args.opts, "retain_on_delete", None)
    if retained is None:
        args.not_applicable("not protected, and the engine does not tell policies about retainOnDelete")
    if not retained:
        report(f"{args.resource_type} {args.name} can be deleted by `pulumi destroy`: set retain_on_delete=True "
               "(or protect=True)", None)


# --- no-plaintext-secrets ---------------------------------------------------------------------------------

def _no_plaintext_secrets(args: StackValidationArgs, report: ReportViolation) -> None:
    config = stackconfig.current()
    if config is None:
        return
    for problem in stackconfig.plaintext_secrets(config):
        report(problem, None)


# --- kueue-trainer-compatible -----------------------------------------------------------------------------

def _compatible(args: StackValidationArgs, report: ReportViolation) -> None:
    charts = chart_versions(args.resources)
    if "kueue" not in charts or "kubeflow-trainer" not in charts:
        return
    kueue, trainer = charts["kueue"][0], charts["kubeflow-trainer"][0]
    jobset = charts["jobset"][0] if "jobset" in charts else DEFAULT_JOBSET
    try:
        # The one compatibility matrix (infra.spec.versions), applied to what is actually installed.
        installed: dict[str, Any] = {"kueue": kueue, "trainer": trainer, "jobset": jobset}
        checks = verdicts(Versions.model_construct(**installed))
    except (KeyError, ValueError):
        report(f"kueue {kueue} / trainer {trainer} / jobset {jobset}: a minor version is not in the "
               "compatibility matrix (infra/spec/versions.py): pin versions it lists", charts["kueue"][1].urn)
        return
    for verdict in checks:
        if not verdict.ok and ("jobset" in charts or "jobset" not in verdict.pair):
            report(f"{verdict.pair} are incompatible: {verdict.reason}", charts["kueue"][1].urn)


# --- the pack ---------------------------------------------------------------------------------------------

def _resource(name: str, description: str, validate: Callable[[ResourceValidationArgs, ReportViolation], None],
              severity: Severity) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(name=name, description=description, validate=validate,
                                    enforcement_level=EnforcementLevel.MANDATORY, severity=severity)


def _stack(name: str, description: str, validate: Callable[[StackValidationArgs, ReportViolation], None],
           severity: Severity, config_schema: PolicyConfigSchema | None = None,
           level: EnforcementLevel = EnforcementLevel.MANDATORY) -> StackValidationPolicy:
    return StackValidationPolicy(name=name, description=description, validate=validate, enforcement_level=level,
                                 severity=severity, config_schema=config_schema)


ADMIN_GROUPS_SCHEMA = PolicyConfigSchema(properties={
    "adminGroups": {"type": "array", "items": {"type": "string"},
                    "description": "Groups (as the API server sees them) that may hold cluster-admin."},
})

POLICIES: list[Policy] = [
    _resource("pinned-versions", "Charts and images are pinned: exact chart versions, no untagged or latest image.",
              _pinned, Severity.HIGH),
    _stack("no-tenant-cluster-admin", "No tenant is bound to cluster-admin or to a role with '*'.",
           _tenant_admin, Severity.CRITICAL, ADMIN_GROUPS_SCHEMA),
    _stack("team-namespace-baseline", "Every team namespace has a ResourceQuota, a LimitRange and a default-deny "
           "NetworkPolicy.", _team_baseline, Severity.HIGH),
    _stack("gpu-tolerations", "GPU workloads tolerate only the taints of the GPU pools they are meant for.",
           gpu_tolerations, Severity.MEDIUM),
    _stack("data-volumes-retain", "Data volumes and the StorageClasses behind them reclaim with Retain.",
           _data_volumes_retain, Severity.HIGH),
    _resource("stateful-protected", "CRDs, clusters, node pools, buckets and data volumes are protected.",
              _protected, Severity.HIGH),
    _stack("no-plaintext-secrets", "No secret sits in plaintext in the stack config.", _no_plaintext_secrets,
           Severity.CRITICAL),
    _stack("kueue-trainer-compatible", "The installed Kueue, Kubeflow Trainer and JobSet versions are compatible.",
           _compatible, Severity.HIGH),
    _stack("tenant-rbac", "No tenant holds admin/edit or a role that escalates, binds, impersonates or mints "
           "tokens; nobody reads Secrets cluster-wide.", tenant_rbac, Severity.CRITICAL, ADMIN_GROUPS_SCHEMA),
    _stack("tenant-network", "No Ingress in team namespaces; no NetworkPolicy open to every peer on every port.",
           tenant_network, Severity.HIGH),
    _stack("team-pod-security", "Team namespaces enforce restricted (or baseline) Pod Security; training runtimes "
           "run unprivileged, off the host, as non-root.", team_pod_security, Severity.CRITICAL),
    _stack("no-private-keys", "No private key in a ConfigMap.", no_private_keys, Severity.CRITICAL),
    _stack("queue-isolation", "Every ClusterQueue names its namespaces; no PriorityClass outranks the platform's "
           "priorities.", queue_isolation, Severity.HIGH),
    _stack("crd-cel", "Custom resources pass their CRDs' CEL rules (x-kubernetes-validations) as the API server "
           "evaluates them.", apiserver_rules.crd_cel, Severity.HIGH),
    _stack("operator-webhooks", "Objects pass the validating webhooks of the installed Kueue, Trainer and JobSet.",
           apiserver_rules.operator_webhooks, Severity.HIGH),
    _stack("apiserver-not-checked", "Lists what crd-cel and operator-webhooks could not judge: a CEL rule the "
           "offline evaluator lacks, a version without webhook rules, values unknown during preview.",
           apiserver_rules.not_checked, Severity.LOW, level=EnforcementLevel.ADVISORY),
]
POLICY_NAMES = frozenset(policy.name for policy in POLICIES)
assert frozenset(PACK_RULES) == POLICY_NAMES, "infra/vocabulary.py PACK_RULES must name the pack's rules"
