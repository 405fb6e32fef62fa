"""Every check `trainyard plan` and `trainyard validate` run over a captured stack, and every check `trainyard
verify` runs on the live cluster, in one catalogue (docs/checks.md is generated from it).

An entry has a stable id (kebab-case; once given, an id never changes: tests/test_check_catalogue.py keeps the
list), the phase whose output it reads, its level and a one-line doc.
- phase: "spec" reads only the validated spec; "render" the program's registrations and the rendered charts;
  "objects" the Kubernetes objects of the plan (a check reading registrations too is here); "live" the cluster.
- level: the severity of its findings; "error" for a check that gives errors and warnings (the doc says which
  findings warn).
- scope and signature: a cluster check, `(ctx: Context) -> list[Finding]`, runs once per cluster of the stack
  (CHECKS); a stack check, `(stack: StackContext) -> list[Finding]`, once over a stack of several clusters
  (STACK_CHECKS). A live check keeps the signature of the verify code that runs it (it reads a cluster client,
  not a plan): its entry names that function as "module:function" (LIVE_CHECKS).
A new check is a function in a module of infra/checks/ plus its entry here; a check without an entry fails the
catalogue's tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, Literal, TypeVar

from infra.apiserver.schema import CrdIndex
from infra.checks import (
    admission,
    backup,
    capacity,
    charts,
    ci,
    fabric,
    firewall,
    gke_network,
    hybrid,
    hybrid_data,
    identity,
    managed_prometheus,
    node_room,
    observability,
    policies,
    prerequisites,
    schema,
    team_egress,
    usage,
)
from infra.checks.context import Context, StackContext
from infra.offline.clusters import split
from infra.offline.engine import Capture
from infra.offline.plan import objects
from infra.spec import Finding, Platform

Phase = Literal["spec", "render", "objects", "live"]
Level = Literal["error", "warning"]
C = TypeVar("C", Context, StackContext)


@dataclass(frozen=True)
class Entry(Generic[C]):
    id: str
    phase: Phase
    level: Level
    doc: str
    run: Callable[[C], list[Finding]]

    @property
    def where(self) -> str:
        return f"{self.run.__module__}:{self.run.__name__}"


@dataclass(frozen=True)
class LiveEntry:
    id: str
    level: Level
    doc: str
    where: str  # "module:function" of infra/live that runs it
    phase: Phase = "live"


CHECKS: tuple[Entry[Context], ...] = (
    Entry("capacity-fits-pool", "spec", "error", "Guaranteed quotas fit the pools behind them (autoscaled pools: at "
          "their minimum node count); warns of GPUs no team queue lists", capacity.check_capacity_fits_pool),
    Entry("quota-resources-offered", "spec", "error", "Every quota names a resource its flavor's pool offers",
          capacity.check_quota_resources_offered),
    Entry("lending-limits", "spec", "error", "No ClusterQueue lends more than its nominal quota",
          capacity.check_lending_limits),
    Entry("borrowing-limits", "spec", "warning", "A borrowing limit the team chose has an effect: something in the "
          "cohort can lend it", capacity.check_borrowing_limits),
    Entry("pools-priced", "spec", "warning", "Every GPU pool has a price per GPU-hour (declared, or its cloud "
          "machine's on-demand list price, only a ceiling for reserved and Spot capacity) for the usage report's "
          "cost", usage.check_pools_priced),
    Entry("flavor-taints-tolerated", "spec", "error", "Some runtime tolerates the taints of every flavor a team has "
          "a guarantee on", capacity.check_flavor_taints_tolerated),
    Entry("runtime-resources-covered", "spec", "error", "Some ClusterQueue covers every resource a runtime's pods "
          "request; warns of the queues that do not", capacity.check_runtime_resources_covered),
    Entry("runtime-reachable", "spec", "warning", "Each team's queue lists a pool every runtime may be admitted to "
          "(taints, node selector)", capacity.check_runtime_reachable),
    Entry("fabric-reaches-pods", "spec", "error", "A pool's fabric reaches its pods or the stack declares TCP: "
          "InfiniBand and RoCE pools request their RDMA devices (fabricDevice); GKE A3 pools, whose GPUDirect NICs "
          "are not provisioned, declare fabric: none",
          fabric.check_fabric_reaches_pods),
    Entry("ci-runner-reaches-endpoint", "spec", "error", "A cloud stack's workflows run on a self-hosted runner "
          "(ci.runner) inside the networks its API endpoint admits", ci.check_ci_runner),
    Entry("prerequisites-provided", "spec", "error", "Every need of the platform has a provider: the cloud "
          "cluster, the site's declaration, or the platform's own charts", prerequisites.check_prerequisites),
    Entry("policy-pack", "render", "error", "The CrossGuard pack (policies/) over the registrations, at the stack's "
          "levels: mandatory rules give errors, advisory ones warnings", policies.check_policy_pack),
    Entry("chart-values-accepted", "render", "error", "Every chart value is one Helm would use (no value it would "
          "ignore or refuse)", charts.check_chart_values),
    Entry("chart-hooks-covered", "render", "error", "No install or upgrade Helm hook is left undone (helm.v4.Chart "
          "runs no hooks)", charts.check_chart_hooks),
    Entry("schema", "objects", "error", "Every object is valid for the pinned Kubernetes minor, custom resources "
          "against the CRDs of the pinned component versions", schema.check_schemas),
    Entry("own-admission", "objects", "error", "The platform passes its own ValidatingAdmissionPolicies and Pod "
          "Security; warns of rules not evaluable offline and of policy warnings", admission.check_admission),
    Entry("declared-once", "objects", "error", "No object is declared twice (by a chart and by us, or by two "
          "charts)", charts.check_declared_once),
    Entry("images-pinned", "objects", "error", "Every image is fully qualified and pinned (registry/repository:tag "
          "or a digest)", charts.check_images),
    Entry("driver-image-known", "spec", "error", "Where the GPU Operator installs the driver, the GPU nodes' OS "
          "(part of the driver image's tag) is known", charts.check_driver_image_known),
    Entry("crd-needs-stated", "objects", "error", "Every object of a non-built-in API group has its CRDs installed "
          "by the plan or stated as a need", prerequisites.check_needs_cover_objects),
    Entry("capacity-after-daemonsets", "objects", "error", "Guaranteed CPU and memory fit what the pool's nodes "
          "leave after the kubelet's reservation and the platform's own DaemonSets in the render",
          node_room.check_room_after_daemonsets),
    Entry("backup-schedule-coverage", "objects", "error", "Every team namespace is in a Velero Schedule",
          backup.check_schedule_coverage),
    Entry("data-volumes-retained", "objects", "error", "Dataset and checkpoint volumes are on a Retain class and "
          "retained or protected on `pulumi destroy`", backup.check_data_volumes),
    Entry("buckets-versioned", "objects", "error", "Every bucket and bucket claim keeps versions",
          backup.check_bucket_versioning),
    Entry("backup-credentials-declared", "objects", "warning", "The credentials Secret a BackupStorageLocation "
          "names is declared", backup.check_backup_credentials),
    Entry("backups-off-cluster", "objects", "warning", "Backups do not go to the cluster's own object store",
          backup.check_backups_off_cluster),
    Entry("alert-rules-valid", "objects", "error", "Our alert and recording rules parse as PromQL, read only "
          "catalog metrics this stack exports; alerts carry severity, summary, description and runbook",
          observability.check_alert_rules),
    Entry("dashboards-valid", "objects", "error", "Our Grafana dashboards are JSON whose queries parse as PromQL "
          "and read only catalog metrics this stack exports", observability.check_dashboards),
    Entry("chart-alert-rules-parse", "objects", "error", "The charts' own alert and recording rules parse as PromQL",
          observability.check_chart_alert_rules),
    Entry("chart-dashboards-parse", "objects", "error", "The charts' own dashboards are JSON whose queries parse as "
          "PromQL", observability.check_chart_dashboards),
    Entry("alert-runbooks-absolute", "spec", "error", "Alerts link their runbook by an absolute URL (the stack's "
          "observability.alerting.runbookBase)", observability.check_runbook_base),
    Entry("alert-routing", "objects", "warning", "Alerts reach a receiver other than `null`, and Grafana has its "
          "admin Secret", observability.check_alert_routing),
    Entry("managed-prometheus-identity", "objects", "error", "GKE managed Prometheus: the pinned fork, exporting as "
          "a Google account only its service account may use, holding the metric writer role only",
          managed_prometheus.check_managed_prometheus),
    Entry("team-store-egress", "objects", "error", "The rendered NetworkPolicies let each team pod out to what it "
          "must reach: its team's cloud bucket and the credentials endpoint, its in-pod volume driver's store (GCS "
          "FUSE), its initializer's hf:// source; an undeclared egress.objectStore refuses, an undeclared "
          "egress.modelHub warns", team_egress.check_team_store_egress),
    Entry("team-data-identity", "objects", "error", "Team workloads run as the team data account, which exists in "
          "every team namespace and is bound to the team bucket as the cloud needs",
          identity.check_team_data_identity),
    Entry("filestore-network", "objects", "error", "GKE: Filestore classes put their instances on the cluster's "
          "own VPC network", gke_network.check_filestore_network),
    Entry("webhook-firewall", "objects", "error", "GKE: every admission webhook's and aggregated API's server port "
          "is reachable from the control plane", firewall.check_webhook_firewall),
    Entry("ingress-class-served", "objects", "error", "Every Ingress, and every ACME http01 solver's Ingress, names "
          "an IngressClass the stack declares", prerequisites.check_ingress_class),
)

STACK_CHECKS: tuple[Entry[StackContext], ...] = (
    Entry("burst-data-declared", "spec", "error", "Every worker declares where its dispatched jobs' data and images "
          "come from", hybrid_data.check_burst_data_declared),
    Entry("burst-data-location", "spec", "error", "Datasets and checkpoints are in a bucket the worker reaches with "
          "declared credentials, never in a team volume; warns of a team with no egress to its worker bucket",
          hybrid_data.check_burst_data_location),
    Entry("multikueue-worker-kubeconfig", "objects", "warning", "The manager holds each worker's kubeconfig Secret",
          hybrid.check_worker_kubeconfig),
    Entry("multikueue-worker-rbac", "objects", "error", "The manager's account on a worker has exactly the rights "
          "MultiKueue uses: no wildcard, no built-in admin role", hybrid.check_worker_rbac),
    Entry("multikueue-worker-mirror", "objects", "error", "A dispatched job's LocalQueue and priority exist alike on "
          "the worker; warns of runtimes that exist on the manager only", hybrid.check_worker_mirror),
    Entry("burst-data-egress", "objects", "error", "The bursting team namespaces on a worker may reach the "
          "manager's object store", hybrid_data.check_burst_data_egress),
    Entry("burst-data-registries", "objects", "error", "A worker is declared able to pull every image its jobs may "
          "run, with pull Secrets on the team data accounts", hybrid_data.check_burst_data_registries),
)

LIVE_CHECKS: tuple[LiveEntry, ...] = (
    LiveEntry("live-gpu-capacity", "error", "Each pool's nodes offer the declared GPUs and fabric devices",
              "infra.live.verify:gpu_findings"),
    LiveEntry("live-operators-available", "error", "The operators' deployments are available and their CRDs "
              "served", "infra.live.verify:operator_findings"),
    LiveEntry("live-cluster-queues-active", "error", "Every team's ClusterQueue is active",
              "infra.live.verify:queue_findings"),
    LiveEntry("live-persona-access", "error", "The teams' groups have the rights of their persona and no more "
              "(SubjectAccessReviews)", "infra.live.verify:access_findings"),
    LiveEntry("live-scrape-targets-up", "error", "Prometheus scrapes every exporter of the stack",
              "infra.live.verify:target_findings"),
    LiveEntry("live-alert-series", "warning", "Prometheus holds a series for every metric an alert of the stack "
              "reads (an alert without one can never fire)", "infra.live.verify:alert_series_findings"),
    LiveEntry("live-prerequisites", "error", "The cluster provides what the stack needs (policy engine, CSI "
              "drivers, snapshots, autoscaler, CRDs) and Velero reaches its bucket",
              "infra.live.prerequisites:prerequisite_findings"),
    LiveEntry("live-multikueue-active", "error", "On the manager: each worker's MultiKueueCluster, AdmissionCheck "
              "and burst ClusterQueues are active", "infra.live.hybrid:multikueue_findings"),
    LiveEntry("live-front-door", "error", "The gateway answers on the host, sends an anonymous request to sign-in "
              "and refuses a forged identity header without a token", "infra.live.frontdoor:front_door_findings"),
    LiveEntry("live-pipelines-api", "error", "With pipelines: the Pipelines API answers through the gateway and "
              "refuses a request without a token or with a forged identity header",
              "infra.live.pipelines:pipeline_api_findings"),
    LiveEntry("live-burst-secrets", "error", "On a worker: the Secrets its burst needs and the pull Secrets on the "
              "team data accounts exist", "infra.live.hybrid:worker_data_findings"),
)


def run_checks(platform: Platform, capture: Capture, crds_dir: Path | None) -> list[Finding]:
    """Every check on every cluster of the stack; in a stack of several, each finding names its cluster."""
    findings: list[Finding] = []
    for cluster, (member, part) in split(platform, capture).items():
        found = _cluster_checks(member, part, crds_dir)
        findings += [replace(f, subject=f"{cluster}: {f.subject}") for f in found] if cluster else found
    return sorted(set(findings + run_entries(STACK_CHECKS, StackContext(platform, capture))))


def run_entries(entries: Sequence[Entry[C]], ctx: C) -> list[Finding]:
    return [finding for entry in entries for finding in entry.run(ctx)]


def _cluster_checks(platform: Platform, capture: Capture, crds_dir: Path | None) -> list[Finding]:
    installed = [obj for record, obj in objects(capture) if record.chart]
    crds = CrdIndex(crds_dir, platform.spec.versions.crd_dirs(), installed)
    return sorted(set(run_entries(CHECKS, Context(platform, capture, crds))))
