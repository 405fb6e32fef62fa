"""Team data reached as the team data account, over a captured stack.

Every training pod reads a team's volumes and bucket as the `datasets` ServiceAccount of its namespace. So every
team namespace must have that account, every workload that reads team data must run as it, and where the team
bucket is cloud object storage the cluster must bind the account to the bucket by its cloud's mechanism, with
what that mechanism needs on the account and on the pods. A pod running as another account would reach the
bucket with no identity at all (and a GCS FUSE volume would not mount).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from infra import vocabulary
from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.clouds import CLOUD_STORAGE, CLOUDS, IdentityMechanism
from infra.spec.storage.model import TEAM_DATA_ACCOUNT

CHECK = "identity"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def workload_findings(objects: Iterable[Mapping[str, Any]], team_namespaces: Iterable[str],
                      pod_labels: Mapping[str, str]) -> list[Finding]:
    """Every runtime, and every workload in a team namespace, runs its pods as the team data account with
    `pod_labels`. A TrainJob runs as its runtime's account unless a runtime patch names another one."""
    teams = set(team_namespaces)
    findings: list[Finding] = []
    for obj in objects:
        kind = str(obj.get("kind"))
        if kind not in RUNTIME_KINDS and obj.get("metadata", {}).get("namespace") not in teams:
            continue
        for template in vocabulary.pod_templates(kind, obj):
            account = template.get("spec", {}).get("serviceAccountName")
            if kind == "TrainJob" and account is None:  # a patch adds labels at most: the runtime's hold
                continue
            if account != TEAM_DATA_ACCOUNT:
                findings.append(Finding(CHECK, _name(obj), f"a pod template runs as '{account or 'default'}', so "
                                        "it reads team data without the team bucket's identity: set "
                                        f"serviceAccountName: {TEAM_DATA_ACCOUNT}"))
            labels = template.get("metadata", {}).get("labels", {})
            missing = {k: v for k, v in pod_labels.items() if labels.get(k) != v}
            if missing and kind != "TrainJob":
                wanted = ", ".join(f"{k}: \"{v}\"" for k, v in missing.items())
                findings.append(Finding(CHECK, _name(obj), f"a pod template lacks the label(s) {wanted} that the "
                                        "cluster's workload identity needs on its pods: add them to "
                                        "spec.template.metadata.labels"))
    return findings


def account_findings(ctx: Context, mechanism: IdentityMechanism | None, namespaces: Iterable[str]) -> list[Finding]:
    """The team data account in every team namespace; on cloud storage bound to the bucket, as its cloud needs."""
    accounts = {obj["metadata"].get("namespace"): obj for obj in ctx.objects()
                if obj.get("kind") == "ServiceAccount" and obj["metadata"].get("name") == TEAM_DATA_ACCOUNT}
    bound = set() if mechanism is None else {mechanism.account(record.inputs) for record in ctx.capture.resources
                                             if record.type == mechanism.binding}
    findings: list[Finding] = []
    for namespace in sorted(namespaces):
        subject = f"ServiceAccount {namespace}/{TEAM_DATA_ACCOUNT}"
        account = accounts.get(namespace)
        if account is None:
            findings.append(Finding(CHECK, subject, "missing: the runtimes' pods run as it and cannot start in "
                                    "this team namespace: infra/platform/storage.py makes it for every team "
                                    "namespace"))
            continue
        if mechanism is None:
            continue
        if f"{namespace}/{TEAM_DATA_ACCOUNT}" not in bound:
            findings.append(Finding(CHECK, subject, f"not bound to the team bucket (no {mechanism.binding} names "
                                    "it): its pods would reach the bucket with no identity: the cluster layer "
                                    "binds every storage.bucket_users() account"))
        annotations = account["metadata"].get("annotations") or {}
        for key in mechanism.account_annotations:
            if not annotations.get(key):
                findings.append(Finding(CHECK, subject, f"lacks the annotation {key} that the cluster's "
                                        "workload identity reads: set it from the contract's identity"))
    return findings


def check_team_data_identity(ctx: Context) -> list[Finding]:
    platform = ctx.platform
    namespaces = [ns for team in platform.teams for ns in team.namespaces]
    cloud = platform.storage.profile in CLOUD_STORAGE and bool(platform.storage.buckets)
    mechanism = CLOUDS[platform.spec.cluster.kind].workload_identity if cloud else None
    # What a vendored kustomization renders into a team namespace is the platform's own server (a team's Model
    # Registry: infra/platform/models), which reads no team data: it keeps upstream's account, without the bucket's.
    team_made = [obj for record, obj in ctx.records() if not record.chart]
    return [*account_findings(ctx, mechanism, namespaces),
            *workload_findings(team_made, namespaces, mechanism.pod_labels if mechanism else {})]
