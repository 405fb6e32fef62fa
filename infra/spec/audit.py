"""The Kubernetes API audit trail (`audit:`): who changed what, who read which Secret, on every cluster kind.

- EKS: the control plane's `audit` and `authenticator` logs, into the CloudWatch Logs group EKS writes to
  (/aws/eks/<cluster>/cluster), which the stack creates first with `retentionDays` (one of CloudWatch's values).
- GKE: Admin Activity logs are always on; the stack turns on Data Access logs (DATA_READ, DATA_WRITE) for
  container.googleapis.com and routes the cluster's audit entries to a log bucket of its own (`destination`,
  default `<cluster>-audit`) kept `retentionDays` (1-3650). The _Default bucket keeps its copy for its own period.
- AKS: a diagnostic setting sends `kube-audit-admin` (every request but get/list/watch) and, with
  `allRequests`, `kube-audit` (every request) to a Log Analytics workspace: one the stack creates (`destination`,
  a name, default `<cluster>-audit`, kept `retentionDays`, 30-730) or an existing one (`destination`, its
  resource id /subscriptions/..., kept as that workspace says).
- existing (on-prem, kind): the site's API server runs with the project's policy (audit_policy(), written to
  docs/audit-policy.yaml) at `policyFile`, logging to `destination` (a path on the control-plane hosts) and
  keeping `retentionDays` of files (--audit-log-maxage); the stack declares `audit-log` under
  cluster.existing.provides and `trainyard verify` reads the flags of the kube-apiserver pods in kube-system.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from infra.spec.base import Strict
from infra.spec.clouds import CLOUDS

POLICY_FILE = "/etc/kubernetes/audit/policy.yaml"
LOG_PATH = "/var/log/kubernetes/audit/audit.log"
POLICY_DOC = "docs/audit-policy.yaml"
AKS_CATEGORIES = ("kube-audit-admin", "kube-audit")
EKS_LOG_TYPES = ("audit", "authenticator")
GKE_SERVICE = "container.googleapis.com"
# Destination forms per kind.
GCP_BUCKET = r"^[A-Za-z0-9_-]{1,100}$"
AZURE_WORKSPACE_ID = "/subscriptions/"


class AuditSpec(Strict):
    """`retentionDays` (default 365; EKS: one of CloudWatch's values, GKE 1-3650, AKS 30-730),
    `destination` (GKE: the log bucket id to create; AKS: the workspace name to create or an existing workspace's
    resource id; existing clusters: the audit log path on the control-plane hosts; not for EKS, whose log group
    name is fixed), `allRequests` (AKS: also `kube-audit`, reads included) and `policyFile` (existing clusters:
    where the API server reads the policy)."""

    retention_days: int = Field(default=365, ge=1, le=3653, alias="retentionDays")
    destination: str | None = Field(default=None, min_length=1, pattern=r"^\S+$")
    all_requests: bool = Field(default=False, alias="allRequests")
    policy_file: str | None = Field(default=None, alias="policyFile", pattern=r"^/\S+\.ya?ml$")


def check_audit(audit: AuditSpec, kind: str) -> None:
    """Kind-specific limits; a ValueError names the field under `audit`."""
    days, facts = audit.retention_days, CLOUDS[kind]
    if facts.audit_day_values and days not in facts.audit_day_values:
        raise ValueError(f"audit.retentionDays: {days} is not a {facts.audit_store} retention: use one of "
                         f"{', '.join(map(str, facts.audit_day_values))}")
    low, high = facts.audit_days
    if not low <= days <= high:
        raise ValueError(f"audit.retentionDays: {days} is outside {low}-{high} days for {facts.audit_store} "
                         f"({kind} clusters): give a value in that range")
    if kind == "eks" and audit.destination is not None:
        raise ValueError("audit.destination: EKS writes to the log group /aws/eks/<cluster>/cluster: remove it")
    if kind == "gke" and audit.destination is not None and not re.fullmatch(GCP_BUCKET, audit.destination):
        raise ValueError(f"audit.destination: '{audit.destination}' is not a log bucket id (letters, digits, "
                         "'_' and '-', at most 100)")
    if kind == "existing" and audit.destination is not None and not audit.destination.startswith("/"):
        raise ValueError(f"audit.destination: '{audit.destination}' is not an absolute path on the control-plane "
                         "hosts: give one such as " + LOG_PATH)
    if audit.all_requests and kind != "aks":
        raise ValueError("audit.allRequests: chooses AKS' kube-audit category; the other kinds log by their own "
                         "policy: remove it")
    if audit.policy_file is not None and kind != "existing":
        raise ValueError(f"audit.policyFile: the {kind} control plane keeps its own policy: remove it")


def destination(audit: AuditSpec, kind: str, cluster: str) -> str:
    """Where the audit entries land, as people and `trainyard docs` name it."""
    if kind == "eks":
        return f"/aws/eks/{cluster}/cluster"
    if kind == "existing":
        return audit.destination or LOG_PATH
    return audit.destination or f"{cluster}-audit"


def _resources(group: str, *names: str) -> dict[str, Any]:
    return {"group": group, "resources": list(names)}


def _high_volume() -> list[dict[str, Any]]:
    return [_resources("", "events", "endpoints"), _resources("coordination.k8s.io", "leases"),
            _resources("discovery.k8s.io", "endpointslices")]


# The control plane's own users (single users) and the groups of nodes and in-cluster controllers.
SYSTEM_USERS = ("system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver")
SYSTEM_GROUPS = ("system:nodes", "system:serviceaccounts")
READS = ("get", "list", "watch")


def audit_policy() -> dict[str, Any]:
    """The audit.k8s.io/v1 Policy the site's API server runs with (first matching rule wins): nothing for
    health probes and for system users' reads of high-volume objects; Secrets, ConfigMaps and TokenReviews by
    metadata only (their bodies hold credentials); request bodies for RBAC objects (who granted what);
    metadata for everything else."""
    return {
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "None", "users": list(SYSTEM_USERS), "verbs": list(READS), "resources": _high_volume()},
            {"level": "None", "userGroups": list(SYSTEM_GROUPS), "verbs": list(READS), "resources": _high_volume()},
            {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/version"]},
            {"level": "Metadata", "resources": [_resources("", "secrets", "configmaps"),
                                                _resources("authentication.k8s.io", "tokenreviews")]},
            {"level": "Request", "resources": [_resources("rbac.authorization.k8s.io", "roles", "rolebindings",
                                                          "clusterroles", "clusterrolebindings")]},
            {"level": "Metadata"},
        ],
    }
