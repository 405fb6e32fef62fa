"""GKE's API audit trail: Data Access logs (DATA_READ, DATA_WRITE) for the Kubernetes API on top of the Admin
Activity logs GKE always writes, and a log bucket of the stack's retention that a sink fills with this cluster's
audit entries (infra/spec/audit.py). The project's IAM audit config for container.googleapis.com is
authoritative for that service: a project that already sets one imports it into the stack first."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.spec import Platform
from infra.spec.audit import GKE_SERVICE, destination

# Audit entries (cloudaudit.googleapis.com/activity and /data_access) of this cluster's Kubernetes API.
FILTER = ('resource.type="k8s_cluster" AND resource.labels.cluster_name="{cluster}" AND '
          'logName:"cloudaudit.googleapis.com"')


def gke_audit(platform: Platform, project: str, opts: pulumi.ResourceOptions) -> None:
    audit = platform.spec.audit
    bucket_id = destination(audit, "gke", platform.cluster_name)
    gcp.projects.IAMAuditConfig(
        "audit-kubernetes-data-access", project=project, service=GKE_SERVICE,
        audit_log_configs=[{"log_type": "DATA_READ"}, {"log_type": "DATA_WRITE"}], opts=opts)
    bucket = gcp.logging.ProjectBucketConfig(
        "audit-bucket", project=project, location="global", bucket_id=bucket_id,
        retention_days=audit.retention_days, opts=opts)
    # A sink into a log bucket of its own project needs no grant to its writer identity.
    gcp.logging.ProjectSink(
        "audit-sink", name=bucket_id, project=project,
        destination=f"logging.googleapis.com/projects/{project}/locations/global/buckets/{bucket_id}",
        filter=FILTER.format(cluster=platform.cluster_name), unique_writer_identity=True,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[bucket])))
