"""Google's managed Prometheus reached as the Prometheus pods' own identity, over a captured GKE stack.

With observability.managedPrometheus on GKE, Prometheus runs Google's drop-in binary and exports as the Google
service account its Kubernetes service account may act as (GKE Workload Identity). The upstream rules are stated
here apart from the cluster layer that applies them: the Prometheus runs the pinned fork; its Kubernetes service
account carries the Google account's email and is the only member allowed roles/iam.workloadIdentityUser on it;
that Google account holds roles/monitoring.metricWriter on the project and no other project role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.checks.context import Context
from infra.offline.engine import Capture
from infra.spec import Finding, Platform
from infra.spec.observability import GOOGLE
from infra.spec.versions import GMP_PROMETHEUS_IMAGE

CHECK = "observability"
ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"
IMPERSONATE = ("gcp:serviceaccount/iAMMember:IAMMember", "roles/iam.workloadIdentityUser")
PROJECT_GRANT = "gcp:projects/iAMMember:IAMMember"
WRITER_ROLE = "roles/monitoring.metricWriter"


def _email(service_account_id: str) -> str:
    # projects/PROJECT/serviceAccounts/EMAIL, or the email itself
    return service_account_id.rpartition("/")[2]


def _account(objects: list[dict[str, Any]], namespace: str, name: str) -> Mapping[str, Any]:
    return next((obj for obj in objects if obj.get("kind") == "ServiceAccount"
                 and obj["metadata"].get("namespace") == namespace and obj["metadata"].get("name") == name), {})


def managed_prometheus_findings(platform: Platform, capture: Capture,
                                objects: list[dict[str, Any]]) -> list[Finding]:
    gke = platform.spec.cluster.gke
    if platform.observability.managed_prometheus != GOOGLE or gke is None:
        return []
    grants = [r.inputs for r in capture.resources if r.type == PROJECT_GRANT]
    impersonations = [r.inputs for r in capture.resources
                      if (r.type, r.inputs.get("role")) == IMPERSONATE]
    findings: list[Finding] = []
    for prometheus in (o for o in objects if o.get("kind") == "Prometheus"
                       and str(o.get("apiVersion", "")).startswith("monitoring.coreos.com/")):
        meta, spec = prometheus["metadata"], prometheus.get("spec", {})
        subject = f"Prometheus/{meta.get('namespace')}/{meta.get('name')}"
        if spec.get("image") != GMP_PROMETHEUS_IMAGE:
            findings.append(Finding(CHECK, subject, f"runs '{spec.get('image')}', which cannot export to Managed "
                                    f"Service for Prometheus: set prometheus.prometheusSpec.image to "
                                    f"{GMP_PROMETHEUS_IMAGE}"))
        namespace, name = str(meta.get("namespace")), str(spec.get("serviceAccountName") or "default")
        account = f"ServiceAccount/{namespace}/{name}"
        member = f"serviceAccount:{gke.project}.svc.id.goog[{namespace}/{name}]"
        bound = [_email(str(i.get("serviceAccountId", ""))) for i in impersonations if i.get("member") == member]
        if not bound:
            findings.append(Finding(CHECK, account, f"may act as no Google service account (no {IMPERSONATE[1]} "
                                    f"for {member}): Prometheus' exports would be refused: bind it in the cluster "
                                    "layer (infra/cluster/gke/managed_prometheus.py)"))
            continue
        email = _account(objects, namespace, name).get("metadata", {}).get("annotations", {}).get(
            ACCOUNT_ANNOTATION)
        if email not in bound:
            findings.append(Finding(CHECK, account, f"annotation {ACCOUNT_ANNOTATION} is '{email}', not the Google "
                                    f"service account it is bound to ({', '.join(sorted(bound))}): set it from the "
                                    "contract's identity"))
        for writer in sorted(set(bound)):
            others = sorted({str(i.get("member")) for i in impersonations
                             if _email(str(i.get("serviceAccountId", ""))) == writer and i.get("member") != member})
            if others:
                findings.append(Finding(CHECK, account, f"{writer} may also be used by {', '.join(others)}: only "
                                        "the Prometheus service account may act as the metric writer"))
            roles = {str(g.get("role")) for g in grants if g.get("member") == f"serviceAccount:{writer}"}
            if WRITER_ROLE not in roles:
                findings.append(Finding(CHECK, account, f"{writer} lacks {WRITER_ROLE} on project {gke.project}: "
                                        "Prometheus' exports would be refused: grant exactly that role"))
            if extra := sorted(roles - {WRITER_ROLE}):
                findings.append(Finding(CHECK, account, f"{writer} also holds {', '.join(extra)}: Prometheus "
                                        f"needs {WRITER_ROLE} only: remove the others"))
    return findings


def check_managed_prometheus(ctx: Context) -> list[Finding]:
    return managed_prometheus_findings(ctx.platform, ctx.capture, ctx.objects())
