"""Managed Service for Prometheus for a stack that asks for it (observability.managedPrometheus). No remote write:
Prometheus runs Google's fork (the platform sets the image), which exports through the Cloud Monitoring API as a
Google service account holding roles/monitoring.metricWriter only, which only the Prometheus Kubernetes service
account may impersonate (GKE Workload Identity: roles/iam.workloadIdentityUser for
<project>.svc.id.goog[monitoring/<account>])."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.kit.contract import WorkloadIdentity
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT

METRIC_WRITER = "roles/monitoring.metricWriter"  # write time series, nothing else (read needs monitoring.viewer)
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GKE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"


def google_managed_prometheus(platform: Platform, project: str, opts: pulumi.ResourceOptions) -> WorkloadIdentity:
    namespace, account = PROMETHEUS_ACCOUNT
    writer = gcp.serviceaccount.Account("prometheus", account_id=f"{platform.cluster_name}-prometheus"[:30],
                                        display_name=f"Prometheus of {platform.cluster_name} (metric writer)",
                                        opts=opts)
    gcp.projects.IAMMember("prometheus-metric-writer", project=project, role=METRIC_WRITER, member=writer.member,
                           opts=opts)
    gcp.serviceaccount.IAMMember(
        "identity-prometheus", service_account_id=writer.name, role=WORKLOAD_IDENTITY_USER,
        member=f"serviceAccount:{project}.svc.id.goog[{namespace}/{account}]", opts=opts)
    return WorkloadIdentity(annotations={GKE_ACCOUNT_ANNOTATION: writer.email})
