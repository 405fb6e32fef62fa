"""The platform's components, each in one place: its namespace, the API groups of its CRDs (and the directory of
upstream CRDs that holds them), the ports its webhooks and metrics listen on, the Secrets it owns, the Prometheus
jobs that scrape it, the capabilities it needs from the cluster (infra/spec/prerequisites.py's vocabulary) and
where its objects come from (a pinned chart of infra/spec/versions.py, a kustomization inside a vendored archive,
or Trainyard's own objects).

Pulumi-free and free of the spec: infra/spec (reserved namespaces, the CRD groups the platform provides), the
cluster layer (firewall ports), the platform's builders, the checks and live verify all read these facts here, so
each is spelled once. To add a component: one entry below (and in COMPONENTS), one builder module in
infra/platform, one line in infra/platform/__init__.py build_platform, its tests (docs/architecture.md says how).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.vocabulary import NAME_LABEL, WORKLOADS


@dataclass(frozen=True)
class Helm:
    """A chart of infra/spec/versions.py: `pin` names the Versions field a stack pins it with ('' = the one
    platform-wide pin of the table); `release` is the Helm release (the Pulumi Chart resource's name)."""

    release: str
    chart: str
    pin: str = ""


@dataclass(frozen=True)
class Kustomize:
    """A kustomization inside a vendored archive (e.g. Kubeflow Platform's manifests): the archive's file name,
    its sha256 ('sha256:<hex>') and the kustomization's directory inside it."""

    archive: str
    digest: str
    path: str


@dataclass(frozen=True)
class Own:
    """Objects Trainyard builds itself, in the component's builder module."""


Source = Helm | Kustomize | Own


@dataclass(frozen=True)
class Crds:
    """An API group the component's CRDs define; `directory`: its `<directory>/v<minor>` under --crds
    (infra/spec/versions.py Versions.crd_dirs), '' when no copy of them is kept there."""

    group: str
    directory: str = ""


@dataclass(frozen=True)
class Component:
    name: str
    builder: str  # its module under infra/platform (dotted inside a sub-package: kfp.pipelines)
    sources: tuple[Source, ...]
    namespace: str = ""  # '' when it has none of its own (cluster-scoped objects, team or Kubernetes namespaces)
    crds: tuple[Crds, ...] = ()
    webhook_ports: tuple[int, ...] = ()  # where its webhook servers listen (the API server must reach them)
    api_ports: tuple[int, ...] = ()  # where its aggregated APIs (APIServices) listen: the API server proxies to them
    metrics_ports: tuple[int, ...] = ()
    secrets: tuple[str, ...] = ()  # Secrets it owns in its namespace
    scrape_jobs: tuple[str, ...] = ()  # Prometheus `job` labels of its targets
    needs: tuple[str, ...] = ()  # capabilities it may need from the cluster (derive_needs says when)
    # What its DaemonSets request on each node they run on (resource, quantity): kept from every pool's
    # allocatable; the check capacity-after-daemonsets holds it to the render.
    node_requests: tuple[tuple[str, str], ...] = ()

    @property
    def charts(self) -> tuple[Helm, ...]:
        return tuple(source for source in self.sources if isinstance(source, Helm))


OWN = (Own(),)

# Kueue: controller ports in kueue 0.19.2's Deployment (webhook 9443, metrics 8443; visibility API 8082).
KUEUE = Component(
    "kueue", "kueue", (Helm("kueue", "kueue", "kueue"),), "kueue-system",
    crds=(Crds("kueue.x-k8s.io", "kueue"),), webhook_ports=(9443,), metrics_ports=(8443,),
    # the visibility API (APIService v1beta1/v1beta2.visibility.kueue.x-k8s.io; kueue 0.19.2's Service
    # kueue-visibility-server: port 443 -> targetPort 8082)
    api_ports=(8082,),
    scrape_jobs=("kueue-controller-manager-metrics-service",))
# JobSet and Kubeflow Trainer: both charts' Deployments serve webhooks on 9443 and metrics on 8443.
TRAINER = Component(
    "trainer", "trainer", (Helm("jobset", "jobset", "jobset"), Helm("kubeflow-trainer", "kubeflow-trainer", "trainer")),
    "kubeflow-system", crds=(Crds("trainer.kubeflow.org", "trainer"), Crds("jobset.x-k8s.io", "jobset")),
    webhook_ports=(9443,), metrics_ports=(8443,),
    scrape_jobs=("jobset-metrics-service", "kubeflow-trainer-controller-manager"))
VELERO = Component(
    "backup", "backup", (Helm("velero", "velero"),), "velero", crds=(Crds("velero.io", "velero"),),
    metrics_ports=(8085,), secrets=("velero-credentials",), scrape_jobs=("velero",),
    needs=("volume-snapshots", "workload-identity"))
# NVIDIA GPU Operator: the DCGM exporter (9400) and the operator (8080) serve metrics.
GPU_OPERATOR = Component(
    "gpu", "gpu", (Helm("gpu-operator", "gpu-operator"),), "gpu-operator", crds=(Crds("nvidia.com"),),
    metrics_ports=(9400, 8080), scrape_jobs=("nvidia-dcgm-exporter",),
    # node-feature-discovery's worker (the chart's default requests at v26.7.0); its operands request nothing.
    node_requests=(("cpu", "5m"), ("memory", "64Mi")))
# The EFA device plugin runs in kube-system (Kubernetes' namespace, not ours).
FABRIC = Component("fabric", "fabric", (Helm("efa-device-plugin", "aws-efa-k8s-device-plugin"),))
# kube-prometheus-stack: prometheus-operator's CRDs ship inside the chart (read from the archive).
_PROMETHEUS_RELEASE = "kube-prometheus-stack"
MONITORING = Component(
    "observability", "observability", (Helm(_PROMETHEUS_RELEASE, "kube-prometheus-stack"),), "monitoring",
    crds=(Crds("monitoring.coreos.com", "monitoring"),),
    # The operator's default for useExistingSecret (alertmanager-<Alertmanager name>), and Grafana's admin.
    secrets=(f"alertmanager-{_PROMETHEUS_RELEASE}-alertmanager", "grafana-admin"),
    scrape_jobs=("apiserver", "kubelet", "kube-state-metrics", "node-exporter"),
    needs=("workload-identity",))
TENANCY = Component("tenancy", "tenancy", OWN, needs=("network-policy",))
STORAGE = Component("storage", "storage", OWN, needs=("volume-snapshots", "crd:objectbucket.io", "workload-identity"))
ACCESS = Component("access", "rbac", OWN, needs=("group-claims",))
ADMISSION = Component("admission", "admission", OWN)



# The vendored Kubeflow Platform release (infra/spec/versions.py KUBEFLOW_MANIFESTS, which tests hold this to; the
# catalogue may not import the spec).
KUBEFLOW_ARCHIVE = ("kubeflow-manifests-26.03-localized.tar.gz",
                    "sha256:6ba41f312637d798b0fd670ca9ea691ab884fa02d659d8b7503c50631bd2b5d4")


def _kubeflow(path: str) -> Kustomize:
    """A folder of the vendored Kubeflow Platform release (docs/manifests.md)."""
    return Kustomize(*KUBEFLOW_ARCHIVE, path)


# The front door (infra/platform/frontdoor.py, docs/front-door.md), four components of the vendored Kubeflow Platform
# 26.03, each in its own namespace. cert-manager 1.19.4: webhook on 10250, controller metrics on 9402.
CERT_MANAGER = Component(
    "cert-manager", "frontdoor", (_kubeflow("common/cert-manager/base"),), "cert-manager",
    crds=(Crds("cert-manager.io"), Crds("acme.cert-manager.io")), webhook_ports=(10250,), metrics_ports=(9402,),
    needs=("acme-http01", "workload-identity"))
# Istio 1.28/1.29: istiod's injector and validation webhooks on 15017 (Service port 443), its metrics and the
# gateway's Envoy stats on 15014 and 15020. The gateway is the one web-facing Service of the stack.
ISTIO = Component(
    "istio", "frontdoor", (_kubeflow("common/istio/istio-crds/base"), _kubeflow("common/istio/istio-namespace/base"),
                           _kubeflow("common/istio/istio-install/overlays/oauth2-proxy"),
                           _kubeflow("common/istio/kubeflow-istio-resources/base")), "istio-system",
    crds=(Crds("networking.istio.io"), Crds("security.istio.io"), Crds("telemetry.istio.io"),
          Crds("extensions.istio.io")), webhook_ports=(15017,), metrics_ports=(15014, 15020),
    needs=("load-balancer", "dns", "service-account-issuer"),
    # istio-cni-node's requests (istio-install 1.28), on the untainted nodes it runs on once Pipelines' sidecars
    # keep it (infra/platform/frontdoor_patches.py istio_install_patches).
    node_requests=(("cpu", "100m"), ("memory", "100Mi")))
# oauth2-proxy 7.14.3: the OIDC client the gateway asks about every browser request (port 4180, metrics 44180).
OAUTH2_PROXY = Component(
    "oauth2-proxy", "frontdoor", (_kubeflow("common/oauth2-proxy/overlays/m2m-dex-only"),), "oauth2-proxy",
    metrics_ports=(44180,), secrets=("oauth2-proxy-credentials",))
# Dex 2.45.0: signs people in from LDAP, static users, or brokers Google (only for those providers).
DEX = Component(
    "dex", "frontdoor", (_kubeflow("common/dex/overlays/oauth2-proxy"),), "auth", crds=(Crds("dex.coreos.com"),),
    secrets=("dex-oidc-client", "dex-passwords"))
FRONT_DOOR = (CERT_MANAGER, ISTIO, OAUTH2_PROXY, DEX)
# The identity headers the gateway writes from a verified token (RequestAuthentication outputClaimToHeaders) and
# every UI reads; what live verify and accept send forged to see them refused.
USERID_HEADER = "kubeflow-userid"
GROUPS_HEADER = "kubeflow-groups"
# The gateway's pods and their identity (the upstream istio-install chart's labels and ServiceAccount).
GATEWAY_POD_LABELS = {"app": "istio-ingressgateway", "istio": "ingressgateway"}
GATEWAY_ACCOUNT = "istio-ingressgateway-service-account"
# The gateway's pods as a NetworkPolicy peer: what a UI behind the front door admits, and nothing else.
GATEWAY_PEER = {"namespaceSelector": {"matchLabels": {NAME_LABEL: ISTIO.namespace}},
                "podSelector": {"matchLabels": dict(GATEWAY_POD_LABELS)}}
# The one taint Istio's CNI agent tolerates here (infra/platform/frontdoor_patches.py): it stays off GPU pools.
MESH_AGENT_TOLERATION = "CriticalAddonsOnly"

# Kubeflow Pipelines 2.16.0 multi-user (infra/platform/kfp/pipelines.py, docs/pipelines.md) with Argo Workflows v3.7.3:
# no webhook (the v1 cache server's, on 8443, is not installed: infra/platform/kfp/patches.py); metrics of the
# API server (8888, /metrics) and Argo's controller (9090).
# Its CRDs: argoproj.io (8) and kubeflow.org (scheduledworkflows, viewers); metacontroller.k8s.io (3) only on
# stacks without team buckets, where the upstream per-namespace sync it runs stays (infra/platform/kfp/teams.py).
PIPELINES = Component(
    "pipelines", "kfp.pipelines",
    (_kubeflow("applications/pipeline/upstream/env/cert-manager/platform-agnostic-multi-user"),
     _kubeflow("common/kubeflow-namespace/base/kubeflow")), "kubeflow",
    crds=(Crds("argoproj.io"), Crds("kubeflow.org"), Crds("metacontroller.k8s.io")), metrics_ports=(8888, 9090),
    secrets=("mysql-secret", "mlpipeline-minio-artifact"))

# Kubeflow Model Registry 0.3.7 (infra/platform/models/registry.py, docs/models.md): one server and MySQL per team,
# rendered into the team's models namespace (`<team>-models`, the team's own: namespace '' here). Ports: REST 8080
# (the gateway and the team's namespaces), MySQL 3306 (its server only); no webhook, aggregated API or metrics port.
MODEL_REGISTRY = Component(
    "model-registry", "models.registry", (_kubeflow("applications/model-registry/upstream/overlays/db"),),
    secrets=("model-registry-db-secrets",))

# KServe 0.16.0 in Standard mode (infra/platform/models/serving.py, docs/models.md): the vendored folder renders into
# `kubeflow`, Pipelines' namespace (PIPELINES.namespace; one owner per namespace). The controller's webhooks on 9443
# (Service port 443), its metrics behind kube-rbac-proxy on 8443; its webhook certificates come from cert-manager,
# which the front door installs.
KSERVE = Component(
    "kserve", "models.serving", (_kubeflow("applications/kserve/kserve"),),
    crds=(Crds("serving.kserve.io"), Crds("inference.networking.x-k8s.io")), webhook_ports=(9443,),
    metrics_ports=(8443,), secrets=("kserve-webhook-server-secret",))  # its webhook's certificate (cert-manager's)

COMPONENTS = (KUEUE, TRAINER, VELERO, GPU_OPERATOR, FABRIC, MONITORING, TENANCY, STORAGE, ACCESS, ADMISSION,
              *FRONT_DOOR, PIPELINES, MODEL_REGISTRY, KSERVE)


def crd_directories() -> dict[str, str]:
    """API group -> the directory under --crds of the component whose CRDs define it (those kept there)."""
    return {crds.group: crds.directory for component in COMPONENTS for crds in component.crds if crds.directory}


def crd_groups() -> tuple[str, ...]:
    """Every API group whose CRDs the platform's components install."""
    return tuple(crds.group for component in COMPONENTS for crds in component.crds)


def namespaces() -> frozenset[str]:
    """The namespaces the platform's components install into."""
    return frozenset(component.namespace for component in COMPONENTS if component.namespace)


def operator_namespaces() -> tuple[str, ...]:
    """Where the queueing and training operators run (what live verify checks first)."""
    return KUEUE.namespace, TRAINER.namespace


# --- Kueue's facts that the multi-cluster checks and review read -----------------------------------------

# The job kinds Kueue integrates (its manager configuration's frameworks): integration name -> (API group, resource).
KUEUE_JOB_KINDS = {f"{WORKLOADS[r].group}/{WORKLOADS[r].kind.lower()}": (WORKLOADS[r].group, r)
                   for r in ("jobs", "jobsets", "trainjobs")}
KUEUE_FRAMEWORKS = list(KUEUE_JOB_KINDS)
MULTIKUEUE_ACCOUNT = "trainyard-multikueue"  # on each worker: who the manager's Kueue is
# What the manager's MultiKueue client does on a worker with Workloads and each integrated job kind.
MULTIKUEUE_WRITE = ["create", "update", "patch", "delete", "get", "list", "watch"]


def kubeconfig_secret(worker: str) -> str:
    """The Secret in the manager's Kueue namespace holding the worker's kubeconfig (its key must be `kubeconfig`)."""
    return f"multikueue-{worker}"
