"""Observability: kube-prometheus-stack at its pinned chart (Prometheus, Alertmanager, Grafana, kube-state-metrics,
node-exporter), the ServiceMonitors of the platform's own components, the alert rules (alerts.py), the dashboards
(dashboards.py) and the Alertmanager configuration from the stack file.

Choices (facts in ../shared/reference/observability.md):
- Prometheus selects every ServiceMonitor, PodMonitor, Probe, ScrapeConfig and PrometheusRule in the cluster
  (the five `*SelectorNilUsesHelmValues: false`): no upstream monitor carries the chart's `release` label, and
  tenants have no RBAC on monitoring.coreos.com objects, so "all" means "the platform's".
- The platform's monitors are ours, not the charts': JobSet's chart fails to render before the ServiceMonitor
  API exists, Trainer 2.2 ships none, and the operator's DCGM monitor appears only if the CRD existed when it
  reconciled. Ours wait for the chart's CRDs and add the `node` label to DCGM series.
- The operator's admission webhook is off (and with it operator TLS): its certificates come from Helm hook Jobs,
  which Pulumi's Chart does not run, so the operator would wait for a Secret that never appears. What the webhook
  checked (rule syntax) `trainyard plan` checks offline with a PromQL parser and the PrometheusRule CRD.
- node-exporter needs host namespaces and host paths: it runs in its own privileged namespace, so `monitoring`
  stays at Pod Security `baseline`.
- Alertmanager's configuration is a Secret built here (receiver URLs are Pulumi secrets, never chart values).
- With observability.managedPrometheus, Prometheus also sends every sample to the cloud's managed Prometheus, as
  the workload identity bound to its service account: remote write to what the cluster layer made
  (contract.remote_write) on EKS and AKS; on GKE it runs Google's drop-in Prometheus, which exports to Managed
  Service for Prometheus itself (self-deployed collection, so ServiceMonitors, PrometheusRules, Alertmanager and
  Grafana work unchanged). Scraping, rules and alerts stay here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import GPU_OPERATOR, KUEUE, MONITORING, TRAINER, VELERO
from infra.kit.contract import RemoteWrite, WorkloadIdentity
from infra.kit.naming import named
from infra.kit.objects import child_opts, helm_chart, kube_object, metadata, namespace
from infra.platform.alerts import DCGM_JOB, rule_groups
from infra.platform.dashboards import SIDECAR_LABEL, dashboards
from infra.platform.grafana.datasources import objects as team_datasources
from infra.platform.grafana.orgs import CONFIGMAP as GRAFANA_ORGS_CONFIGMAP
from infra.platform.grafana.orgs import configmap_data as grafana_orgs_data
from infra.platform.grafana.orgs import front_door_values
from infra.platform.kfp.observability import NAMESPACE as PIPELINES_NAMESPACE
from infra.platform.kfp.observability import ksm_pod_labels, pipeline_dashboards, pipeline_rules
from infra.platform.kfp.observability import objects as pipeline_objects
from infra.platform.kfp.observability import scrape_jobs as pipeline_jobs
from infra.platform.models.observability import (
    ksm_values,
    monitoring_objects,
    serving_dashboards,
    serving_rules,
    team_objects,
)
from infra.platform.tenancy import psa_labels
from infra.platform.usage_rules import idle_alerts, usage_rules
from infra.spec import Platform
from infra.spec.observability import GOOGLE
from infra.spec.pools import POOL_LABEL
from infra.spec.versions import GMP_PROMETHEUS_IMAGE, GMP_PROMETHEUS_VERSION, KUBE_PROMETHEUS_STACK_CHART
from infra.vocabulary import RECEIVERS_ANNOTATION

API = "monitoring.coreos.com/v1"
NAMESPACE = MONITORING.namespace
NODE_NAMESPACE = f"{NAMESPACE}-node"
RELEASE = MONITORING.charts[0].release
ALERTMANAGER_SECRET, GRAFANA_SECRET = MONITORING.secrets
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"  # port http-web 9090
WEBHOOK_RECEIVER = "webhook"
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
INSECURE_TLS = {"insecureSkipVerify": True}  # the controllers serve metrics with self-signed certificates
# The chart's own ServiceMonitors and the job labels they give (jobLabel / Service name).
CHART_JOBS = MONITORING.scrape_jobs


@dataclass(frozen=True)
class Monitor:
    """A ServiceMonitor for one platform component; Prometheus names the job after the Service (`job`)."""

    name: str
    namespace: str
    job: str
    selector: dict[str, str]
    endpoint: dict[str, Any]


def monitors(platform: Platform) -> list[Monitor]:
    """Services and ports as the pinned charts render them (kueue 0.19.2, jobset 0.12.0, kubeflow-trainer 2.2.1,
    velero 12.1.0, GPU Operator v26.7.0)."""
    authenticated = {"port": "https", "scheme": "https", "path": "/metrics", "bearerTokenFile": TOKEN,
                     "tlsConfig": INSECURE_TLS}
    velero = VELERO.charts[0]
    found = [
        Monitor("kueue", KUEUE.namespace, KUEUE.scrape_jobs[0],
                {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/component": "metrics-service"}, authenticated),
        Monitor("jobset", TRAINER.namespace, TRAINER.scrape_jobs[0],
                {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/component": "controller"}, authenticated),
        # Trainer 2.2 serves metrics over TLS without authentication (no FilterProvider).
        Monitor("kubeflow-trainer", TRAINER.namespace, TRAINER.scrape_jobs[1],
                {"app.kubernetes.io/name": "kubeflow-trainer", "app.kubernetes.io/component": "manager"},
                {"port": "monitoring-port", "scheme": "https", "path": "/metrics", "tlsConfig": INSECURE_TLS}),
        Monitor(velero.chart, VELERO.namespace, VELERO.scrape_jobs[0],
                {"app.kubernetes.io/name": velero.chart, "app.kubernetes.io/instance": velero.release},
                {"port": "http-monitoring", "path": "/metrics", "interval": "30s"}),
    ]
    if platform.observability.dcgm:
        found.append(Monitor("dcgm-exporter", GPU_OPERATOR.namespace, DCGM_JOB, {"app": DCGM_JOB}, {
            "port": "gpu-metrics", "path": "/metrics", "interval": "15s",
            # `node` for joins with kube-state-metrics (the exporter itself labels `hostname`).
            "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
                             "action": "replace"}]}))
    return found


def scrape_jobs(platform: Platform) -> tuple[str, ...]:
    """The Prometheus jobs a healthy stack has targets up for (trainyard verify)."""
    return tuple(sorted({*CHART_JOBS, *(m.job for m in monitors(platform)), *pipeline_jobs(platform)}))


def chart_values(platform: Platform, remote_write: RemoteWrite | None = None,
                 identity: WorkloadIdentity | None = None) -> dict[str, Any]:
    """Every key here exists in the chart's values.yaml (test_observability checks it), except below maps the
    chart leaves empty for the user (storageSpec, externalLabels, podMetadata, serviceAccount.annotations).
    `remote_write` and `identity`: the managed Prometheus and the Prometheus service account's cloud identity."""
    facts = platform.observability
    managed = platform.spec.cluster.existing is None  # EKS/GKE/AKS: no scheduler, controller-manager, etcd to scrape
    spec: dict[str, Any] = {
        f"{kind}SelectorNilUsesHelmValues": False
        for kind in ("serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig")
    }
    spec.update({"retention": facts.retention, "externalLabels": {"cluster": platform.cluster_name}})
    if facts.storage is not None:
        claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": facts.storage}}}
        if facts.storage_class:
            claim["storageClassName"] = facts.storage_class
        spec["storageSpec"] = {"volumeClaimTemplate": {"spec": claim}}
        if facts.retention_size:
            spec["retentionSize"] = facts.retention_size
    prometheus: dict[str, Any] = {"prometheusSpec": spec}
    if remote_write is not None:
        spec["remoteWrite"] = [{"url": remote_write.url, **remote_write.auth}]
    if facts.managed_prometheus == GOOGLE:
        registry, _, reference = GMP_PROMETHEUS_IMAGE.partition("/")
        repository, _, tag = reference.rpartition(":")
        # `version`: the operator renders flags for the Prometheus the fork is built on, not for its own tag.
        spec.update({"image": {"registry": registry, "repository": repository, "tag": tag},
                     "version": GMP_PROMETHEUS_VERSION})
        spec["externalLabels"].update(facts.export_labels)
    if identity is not None and identity.annotations:
        prometheus["serviceAccount"] = {"annotations": dict(identity.annotations)}
    if identity is not None and identity.pod_labels:
        spec["podMetadata"] = {"labels": dict(identity.pod_labels)}
    values: dict[str, Any] = {
        "prometheus": prometheus,
        "alertmanager": {"alertmanagerSpec": {"useExistingSecret": True}},
        "prometheusOperator": {"admissionWebhooks": {"enabled": False}, "tls": {"enabled": False}},
        "defaultRules": {"rules": {"windows": False, **({"etcd": False, "kubeControllerManager": False,
                                                           "kubeSchedulerAlerting": False,
                                                           "kubeSchedulerRecording": False} if managed else {})}},
        "windowsMonitoring": {"enabled": False},
        # kube_node_labels{label_trainyard_io_pool}: the join from nodes to pools in rules and dashboards.
        "kube-state-metrics": {"metricLabelsAllowlist": [f"nodes=[{POOL_LABEL}]", *ksm_pod_labels(platform)],
                               **ksm_values(platform)},  # InferenceServices' registry labels, with `models`
        "prometheus-node-exporter": {"namespaceOverride": NODE_NAMESPACE},
        "grafana": {"enabled": facts.grafana, "admin": {"existingSecret": GRAFANA_SECRET}},
    }
    door = platform.front_door
    if door is not None and facts.grafana:
        # Served by the front door under its path (infra/platform/frontdoor.py): Grafana builds its links from it.
        path = next(ui.path for ui in door.uis if ui.component == "observability")
        # Sign-in from the gateway's verified token, no password, each team in its organization (grafana/sso.py,
        # grafana/orgs.py). As environment (the grafana chart's free-form `env`): its grafana.ini defaults list no
        # server.root_url.
        values["grafana"].update(front_door_values(platform))
        values["grafana"]["env"].update({"GF_SERVER_ROOT_URL": f"{door.url}{path}",
                                         "GF_SERVER_SERVE_FROM_SUB_PATH": "true"})
    if managed:
        for component in ("kubeControllerManager", "kubeScheduler", "kubeEtcd"):
            values[component] = {"enabled": False}
    return values


def alertmanager_config(platform: Platform, webhook_url: str | None) -> dict[str, Any]:
    """The stack's severities go to the webhook; everything else (and everything, without a URL) to `null`.
    Watchdog, the always-firing dead man's switch, stays on `null` until a heartbeat receiver is wired."""
    alerting = platform.observability.alerting
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    routes: list[dict[str, Any]] = [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]
    if webhook_url is not None and alerting.severities:
        receivers.append({"name": WEBHOOK_RECEIVER,
                          "webhook_configs": [{"url": webhook_url, "send_resolved": True}]})
        routes.append({"receiver": WEBHOOK_RECEIVER,
                       "matchers": [f'severity =~ "{"|".join(alerting.severities)}"']})
    return {
        "route": {"receiver": "null", "group_by": list(alerting.group_by), "group_wait": "30s",
                  "group_interval": "5m", "repeat_interval": alerting.repeat_interval, "routes": routes},
        "receivers": receivers,
        # A critical alert silences the warnings of the same alert on the same object.
        "inhibit_rules": [{"source_matchers": ['severity = "critical"'], "target_matchers": ['severity = "warning"'],
                           "equal": ["namespace", "alertname"]}],
    }


class Observability(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, webhook_url: pulumi.Input[str] | None,
                 grafana_password: pulumi.Input[str] | None, after: Sequence[pulumi.Resource] = (),
                 remote_write: RemoteWrite | None = None, identity: WorkloadIdentity | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Observability", name, None, opts)
        kubernetes = platform.spec.versions.kubernetes
        ns = namespace(NAMESPACE, NAMESPACE, child_opts(self, provider),
                       labels=psa_labels("baseline", kubernetes))
        node_ns = namespace(NODE_NAMESPACE, NODE_NAMESPACE, child_opts(self, provider),
                            labels={"pod-security.kubernetes.io/enforce": "privileged"})  # host namespaces, paths
        in_ns = child_opts(self, provider, depends_on=[ns])
        if webhook_url is None:
            config: pulumi.Input[str] = yaml.safe_dump(alertmanager_config(platform, None), sort_keys=True)
        else:
            config = pulumi.Output.secret(webhook_url).apply(
                lambda url: yaml.safe_dump(alertmanager_config(platform, url), sort_keys=True))
        # Secret values are Pulumi secrets (masked in state and previews); the builder, not pulumi-kubernetes'
        # Secret class, whose module alone takes seconds to import.
        receivers = ["null", *([WEBHOOK_RECEIVER] if webhook_url is not None else [])]
        secrets: list[pulumi.Resource] = [kube_object(
            "alertmanager-config", "v1", "Secret",
            metadata(ALERTMANAGER_SECRET, NAMESPACE, annotations={RECEIVERS_ANNOTATION: ",".join(receivers)}),
            in_ns, stringData={"alertmanager.yaml": config})]
        if grafana_password is not None and platform.observability.grafana:
            secrets.append(kube_object(
                "grafana-admin", "v1", "Secret", metadata(GRAFANA_SECRET, NAMESPACE), in_ns,
                stringData={"admin-user": "admin", "admin-password": pulumi.Output.secret(grafana_password)}))
        if platform.front_door is not None and platform.observability.grafana:  # mounted in Grafana's pod
            secrets.append(kube_object("grafana-team-orgs", "v1", "ConfigMap",
                                       metadata(GRAFANA_ORGS_CONFIGMAP, NAMESPACE), in_ns,
                                       data=grafana_orgs_data(platform)))
        self.chart = helm_chart(RELEASE, KUBE_PROMETHEUS_STACK_CHART, NAMESPACE,
                                chart_values(platform, remote_write, identity),
                                child_opts(self, provider, depends_on=[ns, node_ns, *secrets]))
        # Monitors and rules need the chart's CRDs; the monitored namespaces come from the other components.
        after_chart = child_opts(self, provider, depends_on=[self.chart, *after])
        for monitor in monitors(platform):
            kube_object(f"servicemonitor-{monitor.name}", API, "ServiceMonitor",
                        metadata(monitor.name, monitor.namespace), after_chart,
                        spec={"selector": {"matchLabels": monitor.selector},
                              "namespaceSelector": {"matchNames": [monitor.namespace]},
                              "endpoints": [monitor.endpoint]})
        for name, api, kind, object_name, spec in pipeline_objects(platform):  # PodMonitors, their NetworkPolicy
            kube_object(name, api, kind, metadata(object_name, PIPELINES_NAMESPACE), after_chart, spec=spec)
        # Serving's: the predictors' PodMonitor, the registry exporter and its Probes; policies in models namespaces.
        # Grafana's: each team organization's label-enforcing proxy and its NetworkPolicies.
        for name, api, kind, object_name, fields in [*monitoring_objects(platform), *team_datasources(platform)]:
            kube_object(name, api, kind, metadata(object_name, NAMESPACE), after_chart, **fields)
        for name, where, api, kind, object_name, spec in team_objects(platform):
            kube_object(name, api, kind, metadata(object_name, where), after_chart, spec=spec)
        groups = rule_groups(platform, NAMESPACE, [("trainyard-usage", usage_rules(platform) + idle_alerts(platform)),
                                                   ("trainyard-pipelines", pipeline_rules(platform)),
                                                   ("trainyard-serving", serving_rules(platform))])
        kube_object("rules", API, "PrometheusRule", metadata("trainyard-platform", NAMESPACE), after_chart,
                    spec={"groups": groups})
        boards = {**dashboards(platform), **pipeline_dashboards(platform), **serving_dashboards(platform)}
        for board_name, board in boards.items():
            kube_object(board_name, "v1", "ConfigMap", metadata(board_name, NAMESPACE, labels=SIDECAR_LABEL), in_ns,
                        data={f"{board_name}.json": board})
        self.register_outputs({"chart": KUBE_PROMETHEUS_STACK_CHART.version, "scrapeJobs": list(scrape_jobs(platform)),
                               "alerts": sum(1 for g in groups for r in g["rules"] if "alert" in r),
                               "dashboards": sorted(boards),
                               "managedPrometheus": platform.observability.managed_prometheus})


def observability(platform: Platform, provider: k8s.Provider, webhook_url: pulumi.Input[str] | None,
                  grafana_password: pulumi.Input[str] | None, after: Sequence[pulumi.Resource] = (),
                  remote_write: RemoteWrite | None = None,
                  identity: WorkloadIdentity | None = None) -> Observability | None:
    if not platform.observability.enabled:
        return None
    return Observability(named("observability"), platform, provider, webhook_url, grafana_password, after,
                         remote_write, identity)
