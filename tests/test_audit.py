"""The API audit trail on every cluster kind: EKS control-plane logs with a retention, GKE Data Access logs into
a log bucket, AKS' diagnostic setting to Log Analytics, the policy file on-prem and local stacks run with (checked
by evaluating it as the API server does: first matching rule), the site prerequisite, and bad input."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.docs.audit import audit_policy_file
from infra.spec import validate
from infra.spec.audit import audit_policy
from tests.conftest import ROOT, capture_of, platform_of, raw_platform
from tests.test_cloud_common import of_type, refused, variant

Edit = Any


def _inputs(stack: str, type_: str) -> list[dict[str, Any]]:
    return [r.inputs for r in of_type(capture_of(stack), type_).values()]


# --- clouds ------------------------------------------------------------------------------------------------------

def test_eks_logs_audit_and_authenticator_into_a_group_of_the_declared_retention() -> None:
    [cluster] = _inputs("aws-prod", "eks:index:Cluster")
    assert cluster["enabledClusterLogTypes"] == ["audit", "authenticator"]
    [group] = _inputs("aws-prod", "aws:cloudwatch/logGroup:LogGroup")
    assert group == {"name": f"/aws/eks/{platform_of('aws-prod').cluster_name}/cluster", "retentionInDays": 365}


def test_gke_turns_on_data_access_logs_and_keeps_them_in_a_bucket() -> None:
    platform = platform_of("gcp-prod")
    [config] = _inputs("gcp-prod", "gcp:projects/iAMAuditConfig:IAMAuditConfig")
    assert config["service"] == "container.googleapis.com"
    assert config["auditLogConfigs"] == [{"logType": "DATA_READ"}, {"logType": "DATA_WRITE"}]
    [bucket] = _inputs("gcp-prod", "gcp:logging/projectBucketConfig:ProjectBucketConfig")
    assert bucket["retentionDays"] == 400 and bucket["bucketId"] == f"{platform.cluster_name}-audit"
    [sink] = _inputs("gcp-prod", "gcp:logging/projectSink:ProjectSink")
    assert sink["destination"].endswith(f"/locations/global/buckets/{platform.cluster_name}-audit")
    assert f'resource.labels.cluster_name="{platform.cluster_name}"' in sink["filter"]


def test_aks_sends_kube_audit_admin_to_its_workspace_and_kube_audit_on_request() -> None:
    [workspace] = _inputs("azure-prod", "azure-native:operationalinsights:Workspace")
    assert workspace["retentionInDays"] == 90
    [setting] = _inputs("azure-prod", "azure-native:monitor:DiagnosticSetting")
    assert [log["category"] for log in setting["logs"]] == ["kube-audit-admin"]

    def everything(raw: dict[str, Any]) -> None:
        raw["audit"] = {"allRequests": True, "destination": "/subscriptions/0000/resourceGroups/g/providers/"
                                                              "Microsoft.OperationalInsights/workspaces/central"}

    _, capture = variant("azure-prod", everything)
    assert not of_type(capture, "azure-native:operationalinsights:Workspace")  # an existing workspace
    [setting] = [r.inputs for r in of_type(capture, "azure-native:monitor:DiagnosticSetting").values()]
    assert [log["category"] for log in setting["logs"]] == ["kube-audit-admin", "kube-audit"]
    assert setting["workspaceId"].endswith("/workspaces/central")


# --- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("stack", "audit", "message"), [
    ("aws-prod", {"retentionDays": 100}, "audit.retentionDays: 100 is not a CloudWatch Logs retention"),
    ("aws-prod", {"destination": "/my/group"}, "audit.destination: EKS writes to the log group"),
    ("gcp-prod", {"retentionDays": 3651}, "audit.retentionDays: 3651 is outside 1-3650 days for a Cloud Logging"),
    ("gcp-prod", {"destination": "a.b"}, "audit.destination: 'a.b' is not a log bucket id"),
    ("azure-prod", {"retentionDays": 29}, "audit.retentionDays: 29 is outside 30-730 days"),
    ("azure-prod", {"retentionDays": 731}, "audit.retentionDays: 731 is outside 30-730 days"),
    ("onprem-lab", {"allRequests": True}, "audit.allRequests: chooses AKS' kube-audit category"),
    ("onprem-lab", {"destination": "audit.log"}, "audit.destination: 'audit.log' is not an absolute path"),
    ("onprem-lab", {"policyFile": "/etc/policy"}, "audit.policyFile"),
    ("aws-prod", {"policyFile": "/etc/kubernetes/p.yaml"}, "audit.policyFile: the eks control plane keeps its own"),
    ("onprem-lab", {"retentionDays": 0}, "audit.retentionDays"),
    ("onprem-lab", {"keep": 1}, "audit.keep"),
])
def test_bad_audit_settings_exit_2_naming_the_field(stack: str, audit: dict[str, Any], message: str,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["audit"] = audit

    line = refused(stack, edit, tmp_path, capsys)
    assert f"trainyard:platform.{message}" in line, line


@pytest.mark.parametrize(("stack", "days"), [("aws-prod", 3653), ("gcp-prod", 3650), ("gcp-prod", 1),
                                             ("azure-prod", 30), ("azure-prod", 730), ("onprem-lab", 1)])
def test_retention_at_each_kinds_limits_passes(stack: str, days: int) -> None:
    """Validation is the guard (one past each limit: test_bad_audit_settings_exit_2_naming_the_field); the cluster
    code passes the number through to the log group, bucket or workspace (the tests above, on the stacks)."""
    raw = raw_platform(stack)
    raw["audit"] = {"retentionDays": days}
    assert validate(raw, stack).spec.audit.retention_days == days


def test_an_existing_cluster_must_declare_its_audit_trail(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from infra.commands import main
    from tests.conftest import raw_platform, write_stack

    raw = raw_platform("onprem-lab")
    raw["cluster"]["existing"]["provides"].remove("audit-log")
    assert main(["plan", str(write_stack(tmp_path, raw, "onprem-lab"))]) == 1
    out = capsys.readouterr().out
    assert "audit-log: needed by access review" in out and "--audit-policy-file (docs/audit-policy.yaml)" in out
    for stack in ("aws-prod", "gcp-prod", "azure-prod"):
        assert platform_of(stack).prerequisites.provided["audit-log"].by == "cluster"


# --- the policy, evaluated ------------------------------------------------------------------------------------------

def level(policy: dict[str, Any], user: str, groups: list[str], verb: str, group: str = "",
          resource: str = "", path: str = "") -> str:
    """The level the API server gives a request: the first rule whose every stated condition matches."""
    for rule in policy["rules"]:
        if "users" in rule and user not in rule["users"]:
            continue
        if "userGroups" in rule and not set(groups) & set(rule["userGroups"]):
            continue
        if "verbs" in rule and verb not in rule["verbs"]:
            continue
        if "resources" in rule and not any(r["group"] == group and resource in r["resources"]
                                           for r in rule["resources"]):
            continue
        if "nonResourceURLs" in rule and not any(fnmatch.fnmatch(path, u) for u in rule["nonResourceURLs"]):
            continue
        if ("resources" in rule and path) or ("nonResourceURLs" in rule and not path):
            continue
        return str(rule["level"])
    return "None"


ALICE = ("oidc:alice", ["oidc:vision-eng", "system:authenticated"])
NODE = ("system:node:gpu-a01", ["system:nodes", "system:authenticated"])
CONTROLLER = ("system:serviceaccount:kueue-system:kueue", ["system:serviceaccounts", "system:authenticated"])


@pytest.mark.parametrize(("who", "verb", "group", "resource", "path", "expected"), [
    (ALICE, "get", "", "secrets", "", "Metadata"),  # who read which Secret, never its data
    (ALICE, "update", "", "configmaps", "", "Metadata"),
    (CONTROLLER, "create", "authentication.k8s.io", "tokenreviews", "", "Metadata"),
    (ALICE, "create", "rbac.authorization.k8s.io", "rolebindings", "", "Request"),  # who granted what
    (ALICE, "delete", "rbac.authorization.k8s.io", "clusterroles", "", "Request"),
    (NODE, "watch", "coordination.k8s.io", "leases", "", "None"),  # high-volume system reads
    (CONTROLLER, "list", "", "endpoints", "", "None"),
    (("system:kube-scheduler", []), "watch", "", "events", "", "None"),
    (CONTROLLER, "update", "coordination.k8s.io", "leases", "", "Metadata"),  # a system write is kept
    (ALICE, "list", "", "events", "", "Metadata"),  # a person's read is kept
    (ALICE, "create", "trainer.kubeflow.org", "trainjobs", "", "Metadata"),
    (NODE, "get", "", "", "/readyz", "None"),
    (ALICE, "get", "", "", "/metrics", "Metadata"),
])
def test_the_policy_levels(who: tuple[str, list[str]], verb: str, group: str, resource: str, path: str,
                           expected: str) -> None:
    assert level(audit_policy(), who[0], who[1], verb, group, resource, path) == expected


def test_the_committed_policy_file_is_the_generated_one_and_parses() -> None:
    text = (ROOT / "docs" / "audit-policy.yaml").read_text(encoding="utf-8")
    assert text == audit_policy_file()
    assert yaml.safe_load(text) == audit_policy() and "&id" not in text  # plain YAML, no anchors
    kind = yaml.safe_load((ROOT / "docs" / "kind-trainyard.yaml").read_text(encoding="utf-8"))
    control_plane = kind["nodes"][0]
    assert control_plane["extraMounts"][0]["hostPath"] == "docs/audit-policy.yaml"
    patch = yaml.safe_load(control_plane["kubeadmConfigPatches"][0])
    assert patch["apiServer"]["extraArgs"]["audit-policy-file"] == control_plane["extraMounts"][0]["containerPath"]
    assert patch["apiServer"]["extraArgs"]["audit-log-maxage"] == str(platform_of("local").spec.audit.retention_days)
