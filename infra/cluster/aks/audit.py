"""AKS' API audit trail: a diagnostic setting on the cluster sending `kube-audit-admin` (and with
audit.allRequests `kube-audit`) to a Log Analytics workspace, the stack's own (created with its retention) or an
existing one named by its resource id (infra/spec/audit.py)."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure_native

from infra.spec import Platform
from infra.spec.audit import AKS_CATEGORIES, AZURE_WORKSPACE_ID, destination


def aks_audit(platform: Platform, group: pulumi.Input[str], location: str, cluster_id: pulumi.Input[str],
              opts: pulumi.ResourceOptions) -> None:
    audit = platform.spec.audit
    target = destination(audit, "aks", platform.cluster_name)
    workspace: pulumi.Input[str] = target
    if not target.startswith(AZURE_WORKSPACE_ID):
        workspace = azure_native.operationalinsights.Workspace(
            "audit-workspace", workspace_name=target, resource_group_name=group, location=location,
            sku={"name": "PerGB2018"}, retention_in_days=audit.retention_days, opts=opts).id
    categories = AKS_CATEGORIES if audit.all_requests else AKS_CATEGORIES[:1]
    azure_native.monitor.DiagnosticSetting(
        "audit", name="trainyard-audit", resource_uri=cluster_id, workspace_id=workspace,
        log_analytics_destination_type="Dedicated",
        logs=[{"category": category, "enabled": True} for category in categories], opts=opts)
