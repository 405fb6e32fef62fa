"""Each team organization's datasource (docs/front-door.md, "Signing in to Grafana"): a Prometheus that can only
return the team's series, enforced by a proxy in front of Prometheus, not by the dashboards' queries. A Viewer
cannot edit a datasource but can send any query to the ones of their organization (/api/ds/query,
/api/datasources/proxy/...), so the datasource itself must refuse other teams' series.

- The proxy: prometheus-community's prom-label-proxy v0.14.0, one Deployment per team, with the team's value fixed
  in its own arguments (`-label-value`, static: StaticLabelEnforcer). Nothing of the request chooses the value: the
  proxy's other modes take it from a query parameter or a header, which a member's raw request to Grafana's
  datasource proxy could set or add to, and whether Grafana overwrites it is Grafana's behaviour, not ours to prove.
  One small pod per team (10m CPU, 32Mi) is the price; its arguments are the whole proof.
- What it enforces: `-label=cluster_queue` with the team's ClusterQueue. It parses every query (/api/v1/query,
  query_range, series, query_exemplars, federate; the label APIs with `-enable-label-apis`) and puts
  `cluster_queue="<queue>"` on every selector; every other path (targets, status, config, metadata, admin) is
  answered 404, not forwarded. `-error-on-replace`: a query asking for another queue (`cluster_queue="nlp"` through
  vision's proxy) is refused with HTTP 400 instead of being silently rewritten; the team dashboards' own matcher
  (`cluster_queue=~"<queue>"`) agrees with the enforced one and passes.
- Which label: every series the team dashboards read carries the team's ClusterQueue as `cluster_queue`: Kueue's
  ClusterQueue metrics (the metric catalog's labels) and the usage rules' admitted, busy and idle series
  (usage_rules.py: grouped by cluster_queue, or given it as a rule label). The DCGM exporter's series carry the
  holding pod's namespace as `exported_namespace` (our monitor keeps honorLabels off, so `namespace` is the
  exporter's own): the team dashboards read GPU use only through those recorded series. The per-pod idle series
  (`trainyard:gpus_idle:pod`) is recorded with the team's `cluster_queue` as a rule label for that reason.
- Who reaches it (NetworkPolicy in `monitoring`): only Grafana's pods, on the proxy's port; the proxies reach only
  Prometheus (9090) and the cluster DNS. Prometheus itself keeps no ingress policy: the API server's service
  proxy reads it for `trainyard verify`, `report usage` and `accept`, from addresses unknown at plan time. Team pods
  reach neither: every team namespace denies all egress but the flows tenancy.py names, none into `monitoring`,
  and tenants hold no rights on NetworkPolicies.
Platform admins keep the chart's unrestricted datasource in organization 1.
"""

from __future__ import annotations

import hashlib
from typing import Any

from infra.components import MONITORING
from infra.kit.objects import NETWORKING_API
from infra.platform.dashboards import DATASOURCE
from infra.platform.frontdoor import GRAFANA_POD_LABELS, PROMETHEUS_PEER
from infra.platform.network import dns_egress, tcp
from infra.spec import Platform
from infra.vocabulary import NAME_LABEL

# prometheus-community/prom-label-proxy v0.14.0 (2026-06-23): its release image (Dockerfile: USER nobody).
IMAGE = "quay.io/prometheuscommunity/prom-label-proxy:v0.14.0"
APP = "prom-label-proxy"
PORT = 8080
LABEL = "cluster_queue"
PROMETHEUS_PORT = 9090
PROMETHEUS_URL = f"http://{MONITORING.charts[0].release}-prometheus.{MONITORING.namespace}:{PROMETHEUS_PORT}"
NOBODY = 65534
INGRESS_POLICY = "allow-grafana-to-team-datasources"
EGRESS_POLICY = "allow-team-datasources-to-prometheus"
PROXY_PODS = {"matchLabels": {"app.kubernetes.io/name": APP}}
GRAFANA_PEER = {"namespaceSelector": {"matchLabels": {NAME_LABEL: MONITORING.namespace}},
                "podSelector": {"matchLabels": GRAFANA_POD_LABELS}}


def proxy_name(team: str) -> str:
    """The team's proxy (Deployment and Service): a DNS label, shortened with a digest for a long team name."""
    name = f"{APP}-{team}"
    if len(name) <= 63:
        return name
    return f"{name[:52]}-{hashlib.sha256(team.encode()).hexdigest()[:10]}"


def proxy_url(team: str) -> str:
    return f"http://{proxy_name(team)}.{MONITORING.namespace}:{PORT}"


def proxy_args(queue: str) -> list[str]:
    """The team's ClusterQueue fixed as the only value; nothing of a request can change it."""
    return [f"-insecure-listen-address=0.0.0.0:{PORT}", f"-upstream={PROMETHEUS_URL}", f"-label={LABEL}",
            f"-label-value={queue}", "-enable-label-apis", "-error-on-replace"]


def datasource(team: str) -> dict[str, Any]:
    """The team organization's only datasource: its proxy, under the uid the dashboards name, read as the chart's
    own Prometheus datasource is in organization 1 (POST queries, 30s scrape interval)."""
    return {"name": "Prometheus", "type": DATASOURCE["type"], "uid": DATASOURCE["uid"], "url": proxy_url(team),
            "access": "proxy", "isDefault": True, "jsonData": {"httpMethod": "POST", "timeInterval": "30s"}}


def _pod(queue: str) -> dict[str, Any]:
    return {
        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "automountServiceAccountToken": False,
        "containers": [{
            "name": APP, "image": IMAGE, "args": proxy_args(queue),
            "ports": [{"name": "http", "containerPort": PORT}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}}}]}


def _policies() -> list[tuple[str, str, str, str, dict[str, Any]]]:
    return [
        (f"networkpolicy-{INGRESS_POLICY}", NETWORKING_API, "NetworkPolicy", INGRESS_POLICY, {"spec": {
            "podSelector": PROXY_PODS, "policyTypes": ["Ingress"],
            "ingress": [{"from": [GRAFANA_PEER], "ports": tcp([PORT])}]}}),
        (f"networkpolicy-{EGRESS_POLICY}", NETWORKING_API, "NetworkPolicy", EGRESS_POLICY, {"spec": {
            "podSelector": PROXY_PODS, "policyTypes": ["Egress"],
            "egress": [{"to": [PROMETHEUS_PEER], "ports": tcp([PROMETHEUS_PORT])},
                       dns_egress()]}}),
    ]


def objects(platform: Platform) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """(resource name, apiVersion, kind, object name, fields) in `monitoring`: each team's proxy (Deployment,
    Service) and the two NetworkPolicies of them all; none where Grafana has no team organizations."""
    if platform.front_door is None or not platform.observability.grafana:
        return []
    found = _policies()
    for team in sorted(platform.teams, key=lambda t: t.name):
        name = proxy_name(team.name)
        labels = {**PROXY_PODS["matchLabels"], "app.kubernetes.io/instance": name}
        found += [
            (f"deployment-{name}", "apps/v1", "Deployment", name, {"spec": {
                "replicas": 1, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": _pod(team.queue)}}}),
            (f"service-{name}", "v1", "Service", name, {"spec": {
                "selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]}}),
        ]
    return found
