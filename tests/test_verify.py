"""`trainyard verify` against a fake live cluster: healthy passes, each kind of drift is reported."""

from __future__ import annotations

import copy
from typing import Any

from infra.live.verify import expectations, verify
from infra.platform.observability import scrape_jobs
from infra.spec.audit import LOG_PATH, POLICY_FILE
from infra.spec.clouds.aws import EFA_RESOURCE
from infra.spec.metrics import PIPELINE_CATALOG, series_names
from tests.conftest import platform_of


class FakeCluster:
    """A live cluster as the stack declares it, with the RBAC answers the personas should get."""

    def __init__(self, stack: str) -> None:
        self.platform = platform_of(stack)
        self.node_list: list[dict[str, Any]] = []
        for flavor in self.platform.flavors:
            pool = self.platform.pool(flavor.pool)
            per_node = {r: str(int(flavor.capacity[r]) // max(pool.node_count, 1)) for r in flavor.gpu_resources}
            if pool.fabric_request:  # the fabric's device plugin at work
                per_node[pool.fabric_request[0]] = str(pool.fabric_request[1])
            for node in pool.nodes or [f"{flavor.pool}-{i}" for i in range(pool.node_count)]:
                self.node_list.append({"metadata": {"name": node, "labels": dict(flavor.node_labels)},
                                       "status": {"allocatable": per_node}})
        self.ready = {"kueue-system": [self._deployment("kueue-controller-manager")],
                      "kubeflow-system": [self._deployment("kubeflow-trainer-controller-manager"),
                                          self._deployment("jobset-controller-manager")]}
        self.groups = {"kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io", "velero.io"}
        self.queues: list[dict[str, Any]] = [
            {"metadata": {"name": t.queue}, "status": {"conditions": [{"type": "Active", "status": "True"}]}}
            for t in self.platform.teams]
        self.answers = {(tuple(e.groups), e.verb, e.resource, e.namespace): e.allowed
                        for e in expectations(self.platform)}
        self.targets: list[dict[str, Any]] = [{"labels": {"job": job}, "health": "up"}
                                              for job in scrape_jobs(self.platform)]
        # What the site or the cloud installed: a policy engine, the CSI drivers, snapshots, autoscaler.
        needed = {need.capability for need in self.platform.prerequisites.needs}
        self.drivers = {c.removeprefix("csi:") for c in needed if c.startswith("csi:")}
        self.groups |= {c.removeprefix("crd:") for c in needed if c.startswith("crd:")} | {
            "snapshot.storage.k8s.io"}
        self.ready["kube-system"] = [self._deployment("snapshot-controller"), self._deployment("cluster-autoscaler")]
        engine = ("aws-node", "aws-network-policy-agent") if self.platform.spec.cluster.eks else ("calico-node", "x")
        self.daemonset_list = [self._daemonset(*engine), self._daemonset("aws-node-termination-handler", "handler")]
        self.locations = [{"metadata": {"name": "default"}, "status": {"phase": "Available"}}]
        # Every series of the metric catalog for this stack's components: every exporter scraped, every event seen.
        self.series = set(self.platform.observability.catalog())
        if self.platform.pipelines is not None:  # its exporters are scraped where the stack runs Pipelines
            self.series |= {name for metric in PIPELINE_CATALOG for name in series_names(metric)}
        audit = self.platform.spec.audit
        self.api_server_args = ["kube-apiserver", f"--audit-policy-file={audit.policy_file or POLICY_FILE}",
                                f"--audit-log-path={audit.destination or LOG_PATH}",
                                f"--audit-log-maxage={audit.retention_days}"]

    def api_server_pods(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "kube-apiserver-cp-1"},
                 "spec": {"containers": [{"name": "kube-apiserver", "command": self.api_server_args}]}}]

    def backup_locations(self) -> list[dict[str, Any]]:
        return self.locations

    @staticmethod
    def _daemonset(name: str, container: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "kube-system"},
                "spec": {"template": {"spec": {"containers": [{"name": container}]}}},
                "status": {"desiredNumberScheduled": 3, "numberReady": 3}}

    def daemonsets(self) -> list[dict[str, Any]]:
        return self.daemonset_list

    def csi_drivers(self) -> set[str]:
        return self.drivers

    @staticmethod
    def _deployment(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"replicas": 1}, "status": {"availableReplicas": 1}}

    def nodes(self) -> list[dict[str, Any]]:
        return self.node_list

    def deployments(self, namespace: str) -> list[dict[str, Any]]:
        return self.ready.get(namespace, [])

    def crd_groups(self) -> set[str]:
        return self.groups

    def cluster_queues(self) -> list[dict[str, Any]]:
        return self.queues

    def allowed(self, groups: list[str], verb: str, group: str, resource: str, namespace: str) -> bool:
        return self.answers[(tuple(groups), verb, resource, namespace)]

    def scrape_targets(self) -> list[dict[str, Any]]:
        return self.targets

    def metric_names(self) -> set[str]:
        return self.series


def test_a_cluster_as_declared_verifies_clean() -> None:
    cluster = FakeCluster("onprem-lab")
    assert verify(cluster.platform, cluster) == []


def test_missing_gpus_are_reported_per_pool() -> None:
    cluster = FakeCluster("onprem-lab")
    h100 = [n for n in cluster.node_list if n["metadata"]["labels"].get("trainyard.io/pool") == "h100"]
    # a node whose GPU device plugin is down (its RDMA devices are still there)
    h100[0]["status"]["allocatable"] = {k: v for k, v in h100[0]["status"]["allocatable"].items()
                                        if k != "nvidia.com/gpu"}
    findings = verify(cluster.platform, cluster)
    assert [f.subject for f in findings] == ["pool h100"]
    assert "24 allocatable" in findings[0].message and "32 declared" in findings[0].message


def test_unready_operator_inactive_queue_and_wrong_rbac_are_reported() -> None:
    cluster = FakeCluster("onprem-lab")
    cluster.ready["kueue-system"][0]["status"]["availableReplicas"] = 0
    cluster.queues[0]["status"]["conditions"][0] = {"type": "Active", "status": "False", "reason": "FlavorNotFound"}
    key = next(k for k, allowed in cluster.answers.items() if not allowed)
    cluster.answers = copy.copy(cluster.answers)
    cluster.answers[key] = True  # an analyst who can create TrainJobs
    subjects = {f.subject.split()[0] for f in verify(cluster.platform, cluster)}
    assert {"deployment", "ClusterQueue"} <= subjects
    assert subjects & {"analyst", "ml-engineer"}


def test_efa_nodes_without_their_interfaces_are_reported_by_name() -> None:
    cluster = FakeCluster("aws-prod")
    assert verify(cluster.platform, cluster) == []
    h100 = [n for n in cluster.node_list if n["metadata"]["labels"].get("trainyard.io/pool") == "h100"]
    h100[1]["status"]["allocatable"] = {k: v for k, v in h100[1]["status"]["allocatable"].items() if k != EFA_RESOURCE}
    findings = verify(cluster.platform, cluster)
    assert [f.subject for f in findings] == [f"node {h100[1]['metadata']['name']}"]
    assert findings[0].message.startswith(f"{EFA_RESOURCE}: 0 allocatable, 32 expected (pool h100, p5.48xlarge)")


def test_scrape_targets_missing_or_down_are_reported_by_job() -> None:
    cluster = FakeCluster("onprem-lab")
    jobs = scrape_jobs(cluster.platform)
    assert "nvidia-dcgm-exporter" in jobs and "kueue-controller-manager-metrics-service" in jobs
    cluster.targets = [t for t in cluster.targets if t["labels"]["job"] != "nvidia-dcgm-exporter"]
    cluster.targets.append({"labels": {"job": "velero"}, "health": "down", "lastError": "connection refused"})
    lines = sorted(f.subject + ": " + f.message for f in verify(cluster.platform, cluster))
    assert lines == ["scrape job nvidia-dcgm-exporter: no target: the ServiceMonitor selects nothing",
                     "scrape job velero: 1/2 target(s) down: connection refused"]


def test_unreachable_prometheus_is_one_finding() -> None:
    cluster = FakeCluster("local")

    def unreachable() -> list[dict[str, Any]]:
        raise ConnectionError("503 Service Unavailable")

    cluster.scrape_targets = unreachable  # type: ignore[method-assign]
    cluster.metric_names = unreachable  # type: ignore[assignment,method-assign]
    assert [f.message for f in verify(cluster.platform, cluster)] == [
        "cannot read Prometheus targets (ConnectionError): is the monitoring stack up?"]


def test_a_metric_an_alert_reads_without_a_series_is_a_warning_naming_the_alerts() -> None:
    cluster = FakeCluster("onprem-lab")
    cluster.series -= {"DCGM_FI_DEV_XID_ERRORS", "velero_backup_last_successful_timestamp"}
    found = verify(cluster.platform, cluster)
    assert [(f.subject, f.severity) for f in found] == [("metric DCGM_FI_DEV_XID_ERRORS", "warning"),
                                                        ("metric velero_backup_last_successful_timestamp", "warning")]
    assert found[0].message.startswith("no series in Prometheus: GPUXidCritical can never fire")
    assert found[1].message.startswith("no series in Prometheus: VeleroNoRecentBackup can never fire")
    cluster.series.add("DCGM_FI_DEV_XID_ERRORS")  # a series the dashboards read only is not asked for
    cluster.series.add("velero_backup_last_successful_timestamp")
    cluster.series.discard("DCGM_FI_DEV_GPU_UTIL")
    assert verify(cluster.platform, cluster) == []
def _subjects(cluster: FakeCluster) -> list[str]:
    return [f.subject for f in verify(cluster.platform, cluster)]


def test_no_policy_engine_is_reported_and_a_vpc_cni_without_its_agent_does_not_count() -> None:
    cluster = FakeCluster("aws-prod")
    cluster.daemonset_list[0]["spec"]["template"]["spec"]["containers"] = [{"name": "aws-node"}]
    assert _subjects(cluster) == ["prerequisite network-policy"]
    cluster = FakeCluster("onprem-lab")
    cluster.daemonset_list[0]["status"]["numberReady"] = 2  # one node without its engine
    assert _subjects(cluster) == ["prerequisite network-policy"]


def test_unregistered_csi_driver_missing_snapshot_crds_and_site_crds_are_reported() -> None:
    cluster = FakeCluster("onprem-lab")
    cluster.drivers.discard("rook-ceph.rbd.csi.ceph.com")
    cluster.groups -= {"snapshot.storage.k8s.io", "objectbucket.io"}
    assert _subjects(cluster) == ["prerequisite csi:rook-ceph.rbd.csi.ceph.com", "prerequisite volume-snapshots",
                                  "prerequisite crd:objectbucket.io"]


def test_eks_without_autoscaler_snapshot_controller_or_termination_handler_is_reported() -> None:
    cluster = FakeCluster("aws-prod")
    cluster.ready["kube-system"] = []
    cluster.daemonset_list = cluster.daemonset_list[:1]
    assert _subjects(cluster) == ["prerequisite volume-snapshots", "prerequisite autoscaler",
                                  "prerequisite spot-interruption"]


def test_gke_runs_snapshots_and_autoscaling_in_its_control_plane() -> None:
    cluster = FakeCluster("gcp-prod")
    cluster.ready["kube-system"] = []
    cluster.daemonset_list = [FakeCluster._daemonset("anetd", "cilium-agent")]
    assert verify(cluster.platform, cluster) == []


def test_a_backup_location_velero_cannot_reach_is_reported() -> None:
    cluster = FakeCluster("azure-prod")
    cluster.locations[0]["status"]["phase"] = "Unavailable"
    findings = verify(cluster.platform, cluster)
    assert [f.subject for f in findings] == ["BackupStorageLocation default"]
    assert "phase Unavailable" in findings[0].message


def test_an_api_server_without_the_audit_policy_is_reported() -> None:
    cluster = FakeCluster("onprem-lab")
    cluster.api_server_args = ["kube-apiserver", "--authorization-mode=Node,RBAC"]
    [finding] = verify(cluster.platform, cluster)
    assert finding.subject == "prerequisite audit-log"
    assert finding.message.startswith(f"kube-apiserver-cp-1 runs without --audit-policy-file={POLICY_FILE}")


def test_audit_files_kept_shorter_than_declared_are_reported() -> None:
    cluster = FakeCluster("onprem-lab")  # declares 180 days
    cluster.api_server_args[-1] = "--audit-log-maxage=180"
    assert verify(cluster.platform, cluster) == []  # at the limit
    cluster.api_server_args[-1] = "--audit-log-maxage=179"
    [finding] = verify(cluster.platform, cluster)
    assert "keeps audit files 179 days" in finding.message and "declares 180" in finding.message
    cluster.api_server_args[2] = "--audit-log-path=/tmp/audit.log"
    [finding] = verify(cluster.platform, cluster)
    assert "writes its audit log to /tmp/audit.log" in finding.message


def test_an_unreadable_control_plane_is_not_a_finding_and_clouds_are_not_read() -> None:
    cluster = FakeCluster("onprem-lab")
    cluster.api_server_pods = lambda: []  # type: ignore[method-assign]  # k3s, RKE2: no kube-apiserver pod
    assert verify(cluster.platform, cluster) == []
    cloud = FakeCluster("aws-prod")
    cloud.api_server_args = []
    assert verify(cloud.platform, cloud) == []
