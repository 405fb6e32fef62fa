"""`trainyard verify STACK`: after `pulumi up`, read the live cluster and compare it with the stack.

Checks: GPU allocatable per pool vs declared capacity, fabric devices on every node of a pool with them, operator
deployments available, CRDs served, ClusterQueues active, Prometheus scraping every platform exporter and holding
a series for every metric an alert reads (a warning), the persona access matrix (SubjectAccessReviews for the
teams' groups), the cluster prerequisites the stack needs (infra/live/prerequisites.py) and the front door over
HTTPS (infra/live/frontdoor.py), and with pipelines their API behind it (infra/live/pipelines.py). Exit 0 when
everything holds, 1 otherwise.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from infra.checks.observability import metric_names
from infra.components import KUEUE, MONITORING, TRAINER, VELERO, operator_namespaces
from infra.live.frontdoor import HttpsWeb, front_door_findings
from infra.live.hybrid import multikueue_findings, worker_data_findings
from infra.live.pipelines import pipeline_api_findings
from infra.live.prerequisites import prerequisite_findings
from infra.platform.alerts import rule_groups
from infra.platform.kfp.observability import pipeline_rules
from infra.platform.observability import PROMETHEUS_SERVICE, scrape_jobs
from infra.spec import Finding, Platform, SpecError
from infra.spec.base import parse_quantity
from infra.spec.pools import POOL_LABEL

OPERATOR_NAMESPACES = operator_namespaces()
MONITORING_NAMESPACE = MONITORING.namespace
CRD_GROUPS = tuple(crds.group for component in (KUEUE, TRAINER) for crds in component.crds)


class LiveCluster(Protocol):
    """What verify reads; the kubernetes client implements it, tests use a fake."""

    def nodes(self) -> list[dict[str, Any]]: ...
    def deployments(self, namespace: str) -> list[dict[str, Any]]: ...
    def crd_groups(self) -> set[str]: ...
    def cluster_queues(self) -> list[dict[str, Any]]: ...
    def allowed(self, groups: list[str], verb: str, group: str, resource: str, namespace: str) -> bool: ...
    def scrape_targets(self) -> list[dict[str, Any]]: ...
    def metric_names(self) -> set[str]: ...
    def daemonsets(self) -> list[dict[str, Any]]: ...
    def csi_drivers(self) -> set[str]: ...
    def backup_locations(self) -> list[dict[str, Any]]: ...
    def api_server_pods(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Expectation:
    persona: str
    groups: list[str]
    verb: str
    group: str
    resource: str
    namespace: str
    allowed: bool


def _allocatable(node: dict[str, Any], resource: str) -> Decimal:
    return parse_quantity(node["status"].get("allocatable", {}).get(resource, "0"))


def gpu_findings(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    findings = []
    nodes = cluster.nodes()
    for flavor in platform.flavors:
        members = [n for n in nodes if n["metadata"].get("labels", {}).get(POOL_LABEL) == flavor.pool]
        for resource in flavor.gpu_resources:
            live = sum((_allocatable(n, resource) for n in members), Decimal(0))
            if live < flavor.capacity[resource]:
                findings.append(Finding("verify", f"pool {flavor.pool}", f"{resource}: {live} allocatable on "
                                        f"{len(members)} node(s), {flavor.capacity[resource]} declared"))
        findings += _fabric_findings(platform, flavor.pool, members)
    return findings


def _fabric_findings(platform: Platform, pool_name: str, members: list[dict[str, Any]]) -> list[Finding]:
    """Every node of a pool with fabric devices advertises what its training pods request (the device plugin
    runs, and the catalog's EFA count or the stack's declared count is right)."""
    pool = platform.pool(pool_name)
    if pool.fabric_request is None:
        return []
    resource, count = pool.fabric_request
    where = f"pool {pool_name}" + (f", {pool.instance_type}" if pool.instance_type else "")
    return [Finding("verify", f"node {n['metadata']['name']}",
                    f"{resource}: {_allocatable(n, resource)} allocatable, {count} expected ({where}): "
                    "training pods requesting them stay pending")
            for n in members if _allocatable(n, resource) < count]


def operator_findings(cluster: LiveCluster) -> list[Finding]:
    findings = []
    for namespace in OPERATOR_NAMESPACES:
        deployments = cluster.deployments(namespace)
        if not deployments:
            findings.append(Finding("verify", f"namespace {namespace}", "no deployments: the operator is missing"))
        for deployment in deployments:
            wanted = deployment["spec"].get("replicas", 1)
            available = deployment.get("status", {}).get("availableReplicas", 0) or 0
            if available < wanted:
                findings.append(Finding("verify", f"deployment {namespace}/{deployment['metadata']['name']}",
                                        f"{available}/{wanted} replicas available"))
    served = cluster.crd_groups()
    findings += [Finding("verify", f"api group {group}", "no CRD of this group is served")
                 for group in CRD_GROUPS if group not in served]
    return findings


def queue_findings(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    live = {q["metadata"]["name"]: q for q in cluster.cluster_queues()}
    findings = []
    for team in platform.teams:
        queue = live.get(team.queue)
        conditions = {c["type"]: c for c in (queue or {}).get("status", {}).get("conditions", [])}
        active = conditions.get("Active", {})
        if active.get("status") != "True":
            reason = active.get("reason", "missing") if queue else "not found"
            findings.append(Finding("verify", f"ClusterQueue {team.queue}", f"not active ({reason})"))
    return findings


def target_findings(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    """Prometheus has an up target for every exporter the stack deploys (its active targets, by job)."""
    if not platform.observability.enabled:
        return []
    try:
        targets = cluster.scrape_targets()
    except Exception as error:  # any API or proxy error means the same: Prometheus cannot be seen
        return [Finding("verify", f"service {MONITORING_NAMESPACE}/{PROMETHEUS_SERVICE}",
                        f"cannot read Prometheus targets ({type(error).__name__}): is the monitoring stack up?")]
    findings = []
    for job in scrape_jobs(platform):
        of_job = [t for t in targets if t.get("labels", {}).get("job") == job]
        down = [t for t in of_job if t.get("health") != "up"]
        if not of_job:
            findings.append(Finding("verify", f"scrape job {job}", "no target: the ServiceMonitor selects nothing"))
        elif down:
            findings.append(Finding("verify", f"scrape job {job}", f"{len(down)}/{len(of_job)} target(s) down: "
                                    f"{down[0].get('lastError') or down[0].get('health')}"))
    return findings


def alert_series_findings(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    """Warnings for each metric an alert of the stack reads that has no series in the in-cluster Prometheus: that
    alert can never fire (its exporter is not scraped here, or, for a counter of rare events, none happened yet)."""
    if not platform.observability.enabled:
        return []
    try:
        present = cluster.metric_names()
    except Exception:  # an unreachable Prometheus is reported once, by target_findings
        return []
    groups = rule_groups(platform, MONITORING_NAMESPACE, [("trainyard-pipelines", pipeline_rules(platform))])
    recorded = {rule["record"] for group in groups for rule in group["rules"] if "record" in rule}
    readers: dict[str, set[str]] = {}
    for group in groups:
        for rule in group["rules"]:
            for metric in metric_names(rule["expr"]) - recorded if "alert" in rule else ():
                readers.setdefault(metric, set()).add(rule["alert"])
    return [Finding("verify", f"metric {metric}", f"no series in Prometheus: {', '.join(sorted(alerts))} can never "
                    "fire; is its exporter scraped by this Prometheus (a counter of rare events appears with its "
                    "first event)?", "warning")
            for metric, alerts in sorted(readers.items()) if metric not in present]


def expectations(platform: Platform) -> list[Expectation]:
    """Engineers submit TrainJobs in their namespaces and not in another team's; analysts only read."""
    prefix = platform.spec.identity.group_prefix
    result = []
    teams = platform.teams
    for index, team in enumerate(teams):
        groups = platform.spec.teams[team.name].groups
        namespace = team.namespaces[0]
        other = teams[(index + 1) % len(teams)].namespaces[0] if len(teams) > 1 else None
        personas = (("ml-engineer", groups.engineers, True), ("analyst", groups.analysts, False))
        for persona, names, can_create in personas:
            if not names:
                continue
            members = [prefix + name for name in names]
            result.append(Expectation(persona, members, "create", "trainer.kubeflow.org", "trainjobs", namespace,
                                      can_create))
            result.append(Expectation(persona, members, "list", "trainer.kubeflow.org", "trainjobs", namespace, True))
            if other:
                result.append(Expectation(persona, members, "create", "trainer.kubeflow.org", "trainjobs", other,
                                          False))
    return result


def access_findings(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    findings = []
    for want in expectations(platform):
        got = cluster.allowed(want.groups, want.verb, want.group, want.resource, want.namespace)
        if got != want.allowed:
            findings.append(Finding("verify", f"{want.persona} {','.join(want.groups)}",
                                    f"can {'' if got else 'not '}{want.verb} {want.resource} in {want.namespace}"))
    return findings


def verify(platform: Platform, cluster: LiveCluster) -> list[Finding]:
    return [*gpu_findings(platform, cluster), *operator_findings(cluster), *queue_findings(platform, cluster),
            *access_findings(platform, cluster), *target_findings(platform, cluster),
            *alert_series_findings(platform, cluster),
            *prerequisite_findings(platform, cluster)]


class KubernetesCluster:
    """LiveCluster over the official kubernetes client (kubeconfig context)."""

    def __init__(self, context: str | None) -> None:
        from kubernetes import client, config

        # The file is named here: the client reads $KUBECONFIG only once, when it is first imported.
        config.load_kube_config(config_file=kubeconfig_files(), context=context)
        self._api = client.ApiClient()
        self._core, self._apps = client.CoreV1Api(self._api), client.AppsV1Api(self._api)
        self._ext, self._custom = client.ApiextensionsV1Api(self._api), client.CustomObjectsApi(self._api)
        self._authz = client.AuthorizationV1Api(self._api)
        self._client = client

    def _plain(self, items: Any) -> list[dict[str, Any]]:
        return [self._api.sanitize_for_serialization(item) for item in items]

    def nodes(self) -> list[dict[str, Any]]:
        return self._plain(self._core.list_node().items)

    def deployments(self, namespace: str) -> list[dict[str, Any]]:
        return self._plain(self._apps.list_namespaced_deployment(namespace).items)

    def crd_groups(self) -> set[str]:
        return {crd.spec.group for crd in self._ext.list_custom_resource_definition().items}

    def daemonsets(self) -> list[dict[str, Any]]:
        return self._plain(self._apps.list_daemon_set_for_all_namespaces().items)

    def csi_drivers(self) -> set[str]:
        drivers = self._client.StorageV1Api(self._api).list_csi_driver().items
        return {str(driver.metadata.name) for driver in drivers if driver.metadata is not None}

    def backup_locations(self) -> list[dict[str, Any]]:
        listing = self._custom.list_namespaced_custom_object(VELERO.crds[0].group, "v1", VELERO.namespace,
                                                             "backupstoragelocations")
        items: list[dict[str, Any]] = listing.get("items", []) if isinstance(listing, dict) else []
        return items

    def cluster_queues(self) -> list[dict[str, Any]]:
        return self.kueue_objects("clusterqueues")

    def api_server_pods(self) -> list[dict[str, Any]]:
        pods = self._core.list_namespaced_pod("kube-system", label_selector="component=kube-apiserver")
        return self._plain(pods.items)

    def kueue_objects(self, plural: str) -> list[dict[str, Any]]:
        listing = self._custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural)
        items: list[dict[str, Any]] = listing.get("items", []) if isinstance(listing, dict) else []
        return items

    def _read(self, read: Any, namespace: str, name: str) -> Any:
        """The object, or None when the API answers 404."""
        from kubernetes.client.exceptions import ApiException

        try:
            return read(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def secret_exists(self, namespace: str, name: str) -> bool:
        return self._read(self._core.read_namespaced_secret, namespace, name) is not None

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        account = self._read(self._core.read_namespaced_service_account, namespace, name)
        return None if account is None else dict(self._api.sanitize_for_serialization(account))

    def allowed(self, groups: list[str], verb: str, group: str, resource: str, namespace: str) -> bool:
        review = self._client.V1SubjectAccessReview(spec=self._client.V1SubjectAccessReviewSpec(
            user="trainyard-verify", groups=groups,
            resource_attributes=self._client.V1ResourceAttributes(verb=verb, group=group, resource=resource,
                                                                   namespace=namespace)))
        status = self._authz.create_subject_access_review(review).status
        return bool(status and status.allowed)

    def _prometheus(self, path: str) -> Any:
        """Prometheus' HTTP API through the API server's service proxy (no port-forward needed)."""
        response = self._core.connect_get_namespaced_service_proxy_with_path(
            f"{PROMETHEUS_SERVICE}:http-web", MONITORING_NAMESPACE, path, _preload_content=False)
        return json.loads(response.data)["data"]  # type: ignore[attr-defined]

    def scrape_targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self._prometheus("api/v1/targets")["activeTargets"]
        return targets

    def metric_names(self) -> set[str]:
        """The names of every series Prometheus holds."""
        return set(self._prometheus("api/v1/label/__name__/values"))


def kubeconfig_files() -> str:
    """The kubeconfig file(s) the client reads: $KUBECONFIG, else ~/.kube/config."""
    from kubernetes.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION

    return os.environ.get("KUBECONFIG") or os.path.expanduser(KUBE_CONFIG_DEFAULT_LOCATION)


def _why(error: Exception) -> str:
    """One line for a connection failure (urllib3's MaxRetryError carries the socket error as its reason)."""
    reason = getattr(error, "reason", None) or error
    if hasattr(error, "status") and getattr(error, "status", None):
        reason = f"HTTP {error.status} {getattr(error, 'reason', '')}".strip()  # type: ignore[attr-defined]
    return " ".join(str(reason).split())[:200]


def connect_and_verify(platform: Platform, context: str | None) -> list[Finding]:
    """verify() against the cluster of `context`; a cluster that cannot be reached is bad input (exit 2) naming
    the kubeconfig, the context and why."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException
    from urllib3.exceptions import HTTPError

    where = f"kubeconfig {kubeconfig_files()}, context {context or '(its current context)'}"
    try:
        live = KubernetesCluster(context)
        return [*verify(platform, live), *multikueue_findings(platform, live), *worker_data_findings(platform, live),
                *front_door_findings(platform, HttpsWeb()), *pipeline_api_findings(platform, HttpsWeb())]
    except (ConfigException, HTTPError, ApiException, OSError) as error:
        raise SpecError(where, f"cannot connect to the cluster: {_why(error)}; point KUBECONFIG or --context at the "
                               "stack's cluster (a read-only verifier's kubeconfig is enough)") from None
