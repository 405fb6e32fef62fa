"""Each CrossGuard rule against hand-built registrations: a compliant baseline passes every rule, and
each violating variant is caught by that rule's name (and only that rule's)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from infra.checks.policies import Violation, run_pack
from infra.offline.engine import Capture, Registration
from policies.rules import POLICIES, POLICY_NAMES

CHART = "kubernetes:helm.sh/v4:Chart"
NS, QUOTA, LIMITS = "kubernetes:core/v1:Namespace", "kubernetes:core/v1:ResourceQuota", "kubernetes:core/v1:LimitRange"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
SC, PVC = "kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
CRB = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
RB = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CR = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
ADMINS = "oidc:platform-admins"
CONFIG = {"no-tenant-cluster-admin": {"adminGroups": [ADMINS]}, "tenant-rbac": {"adminGroups": [ADMINS]}}
SECURE_CONFIG = {"trainyard:kubeconfig": {"secure": "v1:abc"}, "trainyard:platform": {"cluster": {}}}


def reg(type_: str, name: str, inputs: dict[str, Any], *, protect: bool = False, retain: bool = False,
        custom: bool = True) -> Registration:
    return Registration(type=type_, name=name, urn=f"urn:pulumi:test::trainyard::{type_}::{name}", parent="",
                        custom=custom, remote=not custom, inputs=inputs, depends_on=(), protect=protect,
                        retain_on_delete=retain, provider="")


def obj(kind: str, name: str, namespace: str = "", **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **fields.pop("meta", {})}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta, **fields}


def pod_template(**spec: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.10.0"}],
                 "securityContext": {"runAsNonRoot": True}, **spec}}}}}]}}}}


def baseline() -> dict[str, Registration]:
    """A small platform that every rule accepts."""
    records = [
        reg(CHART, "kueue", {"chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.19.4",
                             "values": {"image": {"repository": "registry.k8s.io/kueue/kueue", "tag": "v0.19.4"}}},
            custom=False),
        reg(CHART, "kubeflow-trainer", {"chart": "oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "version": "2.2.1"},
            custom=False),
        reg(CHART, "jobset", {"chart": "oci://registry.k8s.io/jobset/charts/jobset", "version": "0.12.0"},
            custom=False),
        reg(NS, "ns-vision", obj("Namespace", "vision", meta={"labels": {
            "trainyard.io/team": "vision", "pod-security.kubernetes.io/enforce": "restricted"}})),
        reg(NS, "ns-kueue", obj("Namespace", "kueue-system")),
        reg(QUOTA, "vision-quota", obj("ResourceQuota", "team-quota", "vision", spec={"hard": {"requests.cpu": "8"}})),
        reg(LIMITS, "vision-limits", obj("LimitRange", "team-defaults", "vision", spec={"limits": []})),
        reg(NETPOL, "vision-default-deny", obj("NetworkPolicy", "default-deny", "vision",
                                               spec={"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})),
        reg(FLAVOR, "flavor-h100", obj("ResourceFlavor", "h100", spec={"nodeLabels": {"trainyard.io/pool": "h100"},
                                                                      "nodeTaints": [GPU_TAINT]})),
        reg(CQ, "cq-vision", obj("ClusterQueue", "vision", spec={"resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]})),
        reg(RUNTIME, "runtime-torch", obj("ClusterTrainingRuntime", "torch-distributed", **pod_template(
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))),
        reg(SC, "class-datasets", obj("StorageClass", "datasets", provisioner="x", reclaimPolicy="Retain")),
        reg(SC, "class-scratch", obj("StorageClass", "scratch", provisioner="x", reclaimPolicy="Delete")),
        reg(PVC, "pvc-vision-datasets", obj("PersistentVolumeClaim", "datasets", "vision",
                                            spec={"storageClassName": "datasets"}), retain=True),
        reg("eks:index:Cluster", "eks", {"version": "1.34"}, protect=True, custom=False),
        reg("aws:s3/bucket:Bucket", "bucket-backups", {"bucket": "b"}, protect=True),
        reg(CRB, "admins", obj("ClusterRoleBinding", "admins", roleRef={"kind": "ClusterRole", "name": "cluster-admin"},
                               subjects=[{"kind": "Group", "name": ADMINS}])),
        reg(RB, "vision-engineers", obj("RoleBinding", "ml-engineer", "vision",
                                        roleRef={"kind": "ClusterRole", "name": "trainyard-ml-engineer"},
                                        subjects=[{"kind": "Group", "name": "oidc:vision-eng"}])),
    ]
    return {r.name: r for r in records}


def violations(records: dict[str, Registration], config: dict[str, Any] | None = None,
               stack_config: dict[str, Any] | None = None) -> list[Violation]:
    capture = Capture("test", "trainyard", tuple(sorted(records.values(), key=lambda r: (r.type, r.name))), {})
    return run_pack(capture, CONFIG if config is None else config,
                    SECURE_CONFIG if stack_config is None else stack_config)


def edit(name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Registration]:
    records = baseline()
    inputs = copy.deepcopy(records[name].inputs)
    change(inputs)
    records[name] = reg(records[name].type, name, inputs, protect=records[name].protect,
                        retain=records[name].retain_on_delete, custom=records[name].custom)
    return records


def add(*extra: Registration) -> dict[str, Registration]:
    records = baseline()
    records.update({r.name: r for r in extra})
    return records


def without(*names: str) -> dict[str, Registration]:
    return {name: r for name, r in baseline().items() if name not in names}


def test_baseline_passes_every_rule() -> None:
    assert violations(baseline()) == []


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        target: Any = inputs
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


_TOLERATIONS = ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec",
                "tolerations")


def _tolerate(toleration: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    return _set(_TOLERATIONS, [toleration])


GPU_DEPLOYMENT = obj("Deployment", "notebook", "vision", spec={"template": {"spec": {
    "containers": [{"name": "c", "image": "pytorch/pytorch:2.10.0",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}}})

# rule -> (what is wrong, the registrations, the resource the violation names)
VIOLATING: dict[str, list[tuple[str, dict[str, Registration], str]]] = {
    "pinned-versions": [
        ("chart version range", edit("kueue", _set(("version",), "0.19")), "Chart kueue"),
        ("latest image tag", edit("kueue", _set(("values", "image", "tag"), "latest")), "Chart kueue"),
        ("untagged image", edit("runtime-torch", _set(("spec", "template", "spec", "replicatedJobs", 0, "template",
                                                       "spec", "template", "spec", "containers", 0, "image"),
                                                      "pytorch/pytorch")), "ClusterTrainingRuntime runtime-torch"),
    ],
    "no-tenant-cluster-admin": [
        ("team group bound to cluster-admin",
         edit("admins", _set(("subjects",), [{"kind": "Group", "name": "oidc:vision-eng"}])),
         "ClusterRoleBinding admins"),
        ("cluster-admin inside a team namespace",
         edit("vision-engineers", _set(("roleRef",), {"kind": "ClusterRole", "name": "cluster-admin"})),
         "RoleBinding vision-engineers"),
        ("wildcard role bound to a team ServiceAccount",
         add(reg(CR, "god", obj("ClusterRole", "god", rules=[{"apiGroups": ["batch"], "resources": ["*"],
                                                               "verbs": ["get"]}])),
             reg(CRB, "ci-god", obj("ClusterRoleBinding", "ci-god", roleRef={"kind": "ClusterRole", "name": "god"},
                                    subjects=[{"kind": "ServiceAccount", "name": "ci", "namespace": "vision"}]))),
         "ClusterRoleBinding ci-god"),
    ],
    "team-namespace-baseline": [
        ("no LimitRange", without("vision-limits"), "Namespace ns-vision"),
        ("no ResourceQuota", without("vision-quota"), "Namespace ns-vision"),
        ("deny policy lets egress through",
         edit("vision-default-deny", _set(("spec", "policyTypes"), ["Ingress"])), "Namespace ns-vision"),
    ],
    "gpu-tolerations": [
        ("runtime tolerates every taint", edit("runtime-torch", _tolerate({"operator": "Exists"})),
         "ClusterTrainingRuntime runtime-torch"),
        ("GPU runtime also tolerates the control plane",
         edit("runtime-torch", _set(_TOLERATIONS, [
             {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
             {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}])),
         "ClusterTrainingRuntime runtime-torch"),
        ("runtime tolerates another value of the GPU taint",
         edit("runtime-torch", _tolerate({"key": "nvidia.com/gpu", "operator": "Equal", "value": "h200",
                                          "effect": "NoSchedule"})), "ClusterTrainingRuntime runtime-torch"),
        ("GPU deployment tolerates spot nodes", add(reg(DEPLOYMENT, "notebook", GPU_DEPLOYMENT)),
         "Deployment notebook"),
    ],
    "data-volumes-retain": [
        ("datasets class deletes", edit("class-datasets", _set(("reclaimPolicy",), "Delete")),
         "StorageClass class-datasets"),
        ("datasets class left at the default (Delete)",
         edit("class-datasets", lambda inputs: inputs.pop("reclaimPolicy")), "StorageClass class-datasets"),
        ("volume recycles", add(reg(PV, "pv-old", obj("PersistentVolume", "old", spec={
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "datasets"}), retain=True)),
         "PersistentVolume pv-old"),
    ],
    "stateful-protected": [
        ("cluster unprotected", add(reg("eks:index:Cluster", "eks", {"version": "1.34"}, custom=False)),
         "Cluster eks"),
        ("bucket unprotected", add(reg("gcp:storage/bucket:Bucket", "bucket-gcs", {"location": "EU"})),
         "Bucket bucket-gcs"),
        ("node pool retained on delete but not protected",
         add(reg("gcp:container/nodePool:NodePool", "pool-h100", {"nodeCount": 2}, retain=True)), "NodePool pool-h100"),
        ("data volume neither protected nor retained",
         add(reg(PVC, "pvc-vision-datasets", obj("PersistentVolumeClaim", "datasets", "vision",
                                                 spec={"storageClassName": "datasets"}))),
         "PersistentVolumeClaim pvc-vision-datasets"),
    ],
    "kueue-trainer-compatible": [
        ("Kueue 0.20 with Trainer 2.2", edit("kueue", _set(("version",), "0.20.0")), "Chart kueue"),
        ("Trainer 2.3 with JobSet 0.11",
         add(reg(CHART, "kubeflow-trainer", {"chart": "kubeflow-trainer", "version": "2.3.0"}, custom=False),
             reg(CHART, "kueue", {"chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.20.0"},
                 custom=False),
             reg(CHART, "jobset", {"chart": "oci://registry.k8s.io/jobset/charts/jobset", "version": "0.11.1"},
                 custom=False)), "Chart kueue"),
        ("a Kueue minor outside the matrix", edit("kueue", _set(("version",), "0.99.0")), "Chart kueue"),
    ],
}
CM = "kubernetes:core/v1:ConfigMap"
PRIORITY = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
WPC = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
_POD = ("spec", "template", "spec", "replicatedJobs", 0, "template", "spec", "template", "spec")


def _role_for_vision(rules: list[dict[str, Any]]) -> dict[str, Registration]:
    return add(reg(CR, "risky", obj("ClusterRole", "risky", rules=rules)),
               reg(RB, "vision-risky", obj("RoleBinding", "risky", "vision",
                                           roleRef={"kind": "ClusterRole", "name": "risky"},
                                           subjects=[{"kind": "Group", "name": "oidc:vision-eng"}])))


VIOLATING.update({
    "tenant-rbac": [
        ("tenant bound to built-in admin",
         edit("vision-engineers", _set(("roleRef",), {"kind": "ClusterRole", "name": "admin"})),
         "RoleBinding vision-engineers"),
        ("tenant bound to built-in edit",
         edit("vision-engineers", _set(("roleRef",), {"kind": "ClusterRole", "name": "edit"})),
         "RoleBinding vision-engineers"),
        ("escalate", _role_for_vision([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
                                        "verbs": ["escalate"]}]), "RoleBinding vision-risky"),
        ("bind", _role_for_vision([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                                    "verbs": ["bind"]}]), "RoleBinding vision-risky"),
        ("impersonate", _role_for_vision([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]),
         "RoleBinding vision-risky"),
        ("mint tokens", _role_for_vision([{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                                           "verbs": ["create"]}]), "RoleBinding vision-risky"),
        ("cluster-wide Secret reader",
         add(reg(CR, "reader", obj("ClusterRole", "reader", rules=[{"apiGroups": [""], "resources": ["secrets"],
                                                                     "verbs": ["get", "list"]}])),
             reg(CRB, "reader-binding", obj("ClusterRoleBinding", "reader",
                                            roleRef={"kind": "ClusterRole", "name": "reader"},
                                            subjects=[{"kind": "ServiceAccount", "name": "x",
                                                       "namespace": "kueue-system"}]))),
         "ClusterRoleBinding reader-binding"),
    ],
    "tenant-network": [
        ("Ingress for tenants", add(reg("kubernetes:networking.k8s.io/v1:Ingress", "web",
                                        obj("Ingress", "web", "vision", spec={"rules": []}))), "Ingress web"),
        ("allow-all ingress", add(reg(NETPOL, "open", obj("NetworkPolicy", "open", "vision", spec={
            "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}))), "NetworkPolicy open"),
        ("egress anywhere on any port", add(reg(NETPOL, "out", obj("NetworkPolicy", "out", "kueue-system", spec={
            "podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}))),
         "NetworkPolicy out"),
    ],
    "team-pod-security": [
        ("team namespace switched to privileged",
         edit("ns-vision", _set(("metadata", "labels", "pod-security.kubernetes.io/enforce"), "privileged")),
         "Namespace ns-vision"),
        ("privileged runtime", edit("runtime-torch", _set((*_POD, "containers", 0, "securityContext"),
                                                          {"privileged": True})),
         "ClusterTrainingRuntime runtime-torch"),
        ("runtime on the host network", edit("runtime-torch", _set((*_POD, "hostNetwork"), True)),
         "ClusterTrainingRuntime runtime-torch"),
        ("runtime as root", edit("runtime-torch", _set((*_POD, "securityContext"), {"runAsUser": 0})),
         "ClusterTrainingRuntime runtime-torch"),
    ],
    "no-private-keys": [
        ("private key in a ConfigMap", add(reg(CM, "tls", obj("ConfigMap", "tls", "vision", data={
            "key.pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIE..."}))), "ConfigMap tls"),
    ],
    "queue-isolation": [
        ("ClusterQueue for every namespace", edit("cq-vision", _set(("spec", "namespaceSelector"), {})),
         "ClusterQueue cq-vision"),
        ("PriorityClass above the platform's",
         add(reg(WPC, "wpc", obj("WorkloadPriorityClass", "high", value=1000)),
             reg(PRIORITY, "vip", obj("PriorityClass", "vip", value=1000000))), "PriorityClass vip"),
        ("global default PriorityClass", add(reg(PRIORITY, "dflt", obj("PriorityClass", "dflt", value=0,
                                                                      globalDefault=True))), "PriorityClass dflt"),
    ],
})
VIOLATING.update({
    "crd-cel": [("a flavor quotas fewer resources than the group covers",
                 edit("cq-vision", _set(("spec", "resourceGroups", 0, "coveredResources"), ["nvidia.com/gpu", "cpu"])),
                 "ClusterQueue cq-vision")],
    "operator-webhooks": [
        ("a lending limit outside a cohort", edit("cq-vision", _set(
            ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "lendingLimit"), "4")),
         "ClusterQueue cq-vision"),
        ("two taints with one key and effect", edit("flavor-h100", _set(
            ("spec", "nodeTaints"), [GPU_TAINT, {**GPU_TAINT, "value": "other"}])), "ResourceFlavor flavor-h100"),
    ],
    "apiserver-not-checked": [("a JobSet minor without webhook rules", edit("jobset", _set(("version",), "0.11.0")),
                               "stack test")],
})
LEVELS = {policy.name: policy.enforcement_level.value for policy in POLICIES if policy.enforcement_level}
CASES = [(rule, why, records, where) for rule, cases in VIOLATING.items() for why, records, where in cases]


@pytest.mark.parametrize(("rule", "why", "records", "where"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_violation_is_caught_by_its_rule(rule: str, why: str, records: dict[str, Registration], where: str) -> None:
    found = violations(records)
    if rule != "apiserver-not-checked":  # a version without webhook rules is listed as well (its own case)
        found = [v for v in found if v.policy != "apiserver-not-checked"]
    assert {v.policy for v in found} == {rule}, (why, found)
    assert where in {v.resource for v in found}, (why, found)
    assert all(v.level == LEVELS[rule] for v in found)


def test_every_rule_has_a_violating_fixture() -> None:
    assert set(VIOLATING) | {"no-plaintext-secrets"} == set(POLICY_NAMES)


@pytest.mark.parametrize("stack_config", [
    {"trainyard:kubeconfig": "apiVersion: v1\nkind: Config\n"},
    {"trainyard:backupCredentials": "[default]\naws_access_key_id=AKIA"},
    {"trainyard:platform": {"storage": {"s3": {"secretAccessKey": "abc"}}}},
    {"trainyard:platform": {"note": "-----BEGIN RSA PRIVATE KEY-----\nMIIE"}},
], ids=["plaintext kubeconfig", "plaintext credentials", "secret inside structured config", "private key"])
def test_plaintext_secret_in_stack_config_is_caught(stack_config: dict[str, Any]) -> None:
    found = violations(baseline(), stack_config=stack_config)
    assert {v.policy for v in found} == {"no-plaintext-secrets"}
    assert {v.resource for v in found} == {"stack test"}


def test_secret_config_and_secret_references_pass() -> None:
    config = {**SECURE_CONFIG, "trainyard:backupCredentials": {"secure": "v1:xyz"},
              "trainyard:platform": {"storage": {"secretName": "velero-credentials", "tokenTtl": "1h"},
                                     "teams": {"a": {"namespaceQuota": {"secrets": 10}}}}}
    assert violations(baseline(), stack_config=config) == []


def test_cluster_admin_for_a_group_not_declared_admin_is_a_violation() -> None:
    found = violations(baseline(), config={})
    assert [(v.policy, v.resource) for v in found] == [("no-tenant-cluster-admin", "ClusterRoleBinding admins")]


@pytest.mark.parametrize(("subject", "tenant"), [
    ({"kind": "Group", "name": "system:authenticated"}, True),
    ({"kind": "Group", "name": "system:serviceaccounts:vision"}, True),
    ({"kind": "User", "name": "alice@example.com"}, True),
    ({"kind": "Group", "name": "system:masters"}, False),
    ({"kind": "ServiceAccount", "name": "velero", "namespace": "velero"}, False),
])
def test_who_counts_as_a_tenant(subject: dict[str, str], tenant: bool) -> None:
    found = violations(edit("admins", _set(("subjects",), [subject])))
    assert bool(found) == tenant, found


def test_platform_service_account_may_hold_a_wildcard_role() -> None:
    records = add(reg(CRB, "operator", obj("ClusterRoleBinding", "operator",
                                           roleRef={"kind": "ClusterRole", "name": "cluster-admin"},
                                           subjects=[{"kind": "ServiceAccount", "name": "op",
                                                      "namespace": "kueue-system"}])))
    assert violations(records) == []


def test_workloads_without_gpus_may_tolerate_other_taints() -> None:
    cpu_only = copy.deepcopy(GPU_DEPLOYMENT)
    cpu_only["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert violations(add(reg(DEPLOYMENT, "notebook", cpu_only))) == []


def test_a_flavor_without_gpu_quota_is_not_a_gpu_pool() -> None:
    gpu_job = copy.deepcopy(GPU_DEPLOYMENT)
    gpu_job["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert violations(add(reg(DEPLOYMENT, "notebook", gpu_job))) == []
    records = edit("cq-vision", _set(("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
                                     "0"))
    records["notebook"] = reg(DEPLOYMENT, "notebook", gpu_job)
    found = violations(records)
    assert [(v.policy, v.resource) for v in found] == [("gpu-tolerations", "Deployment notebook")]
    assert "GPU taints: none" in found[0].message


def test_a_cpu_runtime_may_tolerate_its_own_pool() -> None:
    records = edit("runtime-torch", _tolerate({"key": "dedicated", "value": "cpu-batch", "effect": "NoSchedule"}))
    assert violations(records) == []


def test_scratch_class_that_no_data_volume_uses_may_delete() -> None:
    assert violations(without("pvc-vision-datasets")) == []
    claim_default = edit("pvc-vision-datasets", lambda inputs: inputs["spec"].pop("storageClassName"))
    claim_default["class-scratch"] = reg(SC, "class-scratch", obj(
        "StorageClass", "scratch", provisioner="x", reclaimPolicy="Delete",
        meta={"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}))
    assert [v.resource for v in violations(claim_default)] == ["StorageClass class-scratch"]
