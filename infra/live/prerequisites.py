"""`trainyard verify`: the stack's needs (infra/spec/prerequisites.py) checked on the live cluster.

What the API shows is checked: a NetworkPolicy engine's DaemonSet running, each needed CSI driver registered
(a CSIDriver object), the snapshot CRDs served and their controller available, the cluster autoscaler and the
Spot termination handler running where the cluster runs them in-cluster, every needed API group served.
Login (group claims) and workload identity are configured outside the API: the access matrix and the backup
location's phase (Available: Velero reached its bucket, with workload identity in the clouds) show them at work.
The audit trail of an existing cluster: the flags of the kube-apiserver pods in kube-system (kubeadm's static pods,
mirrored into the API with label component=kube-apiserver; kind's too). A control plane that runs no such pod
(k3s, RKE2's embedded server, a hosted one) is not readable through the API: docs/access.md says how to check it
by hand. A cloud control plane's audit logs are the cluster layer's own settings, seen in the plan.
"""

from __future__ import annotations

from typing import Any, Protocol

from infra.spec import Finding, Platform
from infra.spec.audit import LOG_PATH, POLICY_FILE
from infra.spec.clouds import CLOUDS
from infra.spec.prerequisites import SNAPSHOT_GROUP

# DaemonSet name -> the NetworkPolicy engine it is (for `aws-node`, only with its policy agent container).
POLICY_ENGINES = {
    "aws-node": "Amazon VPC CNI network policy agent", "anetd": "GKE Dataplane V2", "cilium": "Cilium",
    "calico-node": "Calico", "antrea-agent": "Antrea", "kube-router": "kube-router", "canal": "Canal",
    "kindnet": "kindnet (kind >= 0.24)", "azure-npm": "Azure network policy manager",
}
AWS_POLICY_AGENT = "aws-network-policy-agent"
# Each kind's snapshot controller and autoscaler run as pods we can see unless its control plane runs them
# (CloudFacts.snapshot_controller_in_cluster, autoscaler_in_cluster).
AUTOSCALERS = ("cluster-autoscaler", "karpenter")
TERMINATION_HANDLER = "aws-node-termination-handler"


class PrerequisiteReader(Protocol):
    def daemonsets(self) -> list[dict[str, Any]]: ...
    def deployments(self, namespace: str) -> list[dict[str, Any]]: ...
    def csi_drivers(self) -> set[str]: ...
    def crd_groups(self) -> set[str]: ...
    def backup_locations(self) -> list[dict[str, Any]]: ...
    def api_server_pods(self) -> list[dict[str, Any]]: ...


def _ready(workload: dict[str, Any]) -> bool:
    status = workload.get("status", {}) or {}
    if "desiredNumberScheduled" in status:  # a DaemonSet
        return int(status.get("desiredNumberScheduled") or 0) > 0 and \
            status.get("numberReady") == status.get("desiredNumberScheduled")
    return int(status.get("availableReplicas") or 0) >= int(workload.get("spec", {}).get("replicas", 1) or 1) > 0


def policy_engines(daemonsets: list[dict[str, Any]]) -> list[str]:
    """The NetworkPolicy engines whose DaemonSet runs on every node it should."""
    found = []
    for ds in daemonsets:
        name = ds["metadata"]["name"]
        if name not in POLICY_ENGINES or not _ready(ds):
            continue
        containers = {c.get("name") for c in ds.get("spec", {}).get("template", {}).get("spec", {})
                      .get("containers", [])}
        if name == "aws-node" and AWS_POLICY_AGENT not in containers:
            continue
        found.append(POLICY_ENGINES[name])
    return found


def _system_workload(cluster: PrerequisiteReader, names: tuple[str, ...]) -> bool:
    workloads = [*cluster.deployments("kube-system"),
                 *(ds for ds in cluster.daemonsets() if ds["metadata"].get("namespace") == "kube-system")]
    return any(any(n in w["metadata"]["name"] for n in names) and _ready(w) for w in workloads)


def _flags(pod: dict[str, Any]) -> dict[str, str]:
    """--name=value flags of a pod's kube-apiserver container (command and args)."""
    flags = {}
    for container in pod.get("spec", {}).get("containers", []):
        for word in [*(container.get("command") or []), *(container.get("args") or [])]:
            name, _, value = str(word).partition("=")
            if name.startswith("--"):
                flags[name[2:]] = value
    return flags


def audit_problems(platform: Platform, pods: list[dict[str, Any]]) -> list[str]:
    """What the readable kube-apiserver pods lack of the stack's audit settings (none readable: nothing)."""
    audit = platform.spec.audit
    policy, path = audit.policy_file or POLICY_FILE, audit.destination or LOG_PATH
    problems = []
    for pod in pods:
        name, flags = pod["metadata"]["name"], _flags(pod)
        if flags.get("audit-policy-file") != policy:
            problems.append(f"{name} runs without --audit-policy-file={policy}: no audit trail")
        elif flags.get("audit-log-path") != path and "audit-webhook-config-file" not in flags:
            problems.append(f"{name} writes its audit log to {flags.get('audit-log-path') or 'nowhere'}, "
                            f"not {path} (audit.destination)")
        elif "audit-log-path" in flags and int(flags.get("audit-log-maxage") or 0) < audit.retention_days:
            problems.append(f"{name} keeps audit files {flags.get('audit-log-maxage') or 'without an age limit'} "
                            f"days (--audit-log-maxage), the stack declares {audit.retention_days}")
    return problems


def prerequisite_findings(platform: Platform, cluster: PrerequisiteReader) -> list[Finding]:
    prerequisites, kind = platform.prerequisites, platform.spec.cluster.kind
    needed = {need.capability: need for need in prerequisites.needs}
    findings: list[Finding] = []

    def missing(capability: str, what: str) -> None:
        findings.append(Finding("verify", f"prerequisite {capability}",
                                f"{what} (needed by {needed[capability].who})"))

    if "network-policy" in needed and not policy_engines(cluster.daemonsets()):
        missing("network-policy", "no NetworkPolicy engine runs (known DaemonSets: "
                f"{', '.join(sorted(POLICY_ENGINES))}): team default-deny policies are not enforced")
    drivers = cluster.csi_drivers()
    for capability in sorted(c for c in needed if c.startswith("csi:")):
        if capability[4:] not in drivers:
            missing(capability, f"CSIDriver {capability[4:]} is not registered: its volumes stay Pending")
    groups = cluster.crd_groups()
    if "volume-snapshots" in needed:
        if SNAPSHOT_GROUP not in groups:
            missing("volume-snapshots", f"the {SNAPSHOT_GROUP} CRDs are not served")
        elif CLOUDS[kind].snapshot_controller_in_cluster and not _system_workload(cluster, ("snapshot-controller",)):
            missing("volume-snapshots", "no snapshot-controller is available in kube-system")
    if "autoscaler" in needed and CLOUDS[kind].autoscaler_in_cluster and not _system_workload(cluster, AUTOSCALERS):
        missing("autoscaler", "no cluster-autoscaler or Karpenter is available in kube-system: the pool never grows")
    if "spot-interruption" in needed and kind == "eks" and not _system_workload(cluster, (TERMINATION_HANDLER,)):
        missing("spot-interruption", f"{TERMINATION_HANDLER} is not running in kube-system")
    for capability in sorted(c for c in needed if c.startswith("crd:")):
        if capability[4:] not in groups:
            missing(capability, f"no CRD of API group {capability[4:]} is served")
    if "audit-log" in needed and kind == "existing":
        for problem in audit_problems(platform, cluster.api_server_pods()):
            missing("audit-log", problem)
    for location in cluster.backup_locations():
        phase = location.get("status", {}).get("phase", "unknown")
        if phase != "Available":
            findings.append(Finding("verify", f"BackupStorageLocation {location['metadata']['name']}",
                                    f"phase {phase}: Velero cannot reach bucket {platform.backup.bucket} (credentials, "
                                    "workload identity or endpoint)"))
    return findings
