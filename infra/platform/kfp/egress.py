"""Egress of Kubeflow Pipelines' pods in `kubeflow` (the vendored NetworkPolicies isolate ingress only): each pod
reaches what it calls and nothing else. KServe's pods, which share the namespace, are not selected (serving owns
them).

Every Pipelines pod carries `application-crd-id: kubeflow-pipelines` (the vendored install's common label).
`pipelines-egress` selects them all: their egress is denied but for DNS, and for the pods with an Istio sidecar,
istiod's xDS and certificate port. Then one policy per pod kind, `pipelines-egress-<app>`, allows what that pod
calls. Who calls what (KFP 2.16.0, Argo v3.7.3, the rendered Deployments):

- the API server (`ml-pipeline`): the Kubernetes API (it creates Workflows, asks SubjectAccessReviews), MySQL
  (DBCONFIG_*: mlpipeline), SeaweedFS' S3 (OBJECTSTORECONFIG_HOST seaweedfs.kubeflow:9000, pod port 8333: the
  pipeline definitions);
- ML Metadata's server: MySQL (--mysql_config_host: metadb);
- ML Metadata's Envoy: ML Metadata's server (gRPC 8080, for the UI's /ml_metadata);
- the UI: the API server (8888), the visualization server (8888), ML Metadata's Envoy (9090), SeaweedFS' S3 (8333,
  MINIO_HOST: artifacts kept there), the Kubernetes API (pod logs, Workflows, viewers);
- the persistence agent: the Kubernetes API (it watches Workflows), the API server (gRPC 8887 and HTTP 8888:
  ReportWorkflow and run reads; backend/src/agent/persistence/main.go);
- the scheduled-workflow controller: the Kubernetes API, the API server (gRPC 8887: it creates the recurring runs);
- the metadata writer: the Kubernetes API (it watches run pods), ML Metadata's server (8080;
  backend/metadata_writer/src/metadata_helpers.py);
- the viewer controller and Argo's workflow controller: the Kubernetes API only (Argo's executor, which writes the
  artifacts, runs in the team namespaces);
- SeaweedFS: itself (`weed server` runs master, volume, filer, S3 and IAM servers that call each other at the pod's
  address);
- on SeaweedFS-artifact stacks, upstream's per-namespace sync: metacontroller calls the Kubernetes API and the
  profile controller's hook (8080); the profile controller calls SeaweedFS' IAM (8111, the per-namespace keys) and S3
  (8333, the bucket's lifecycle);
- MySQL and the visualization server call nothing.
Nothing here calls a team bucket: the launcher in the team namespace writes the artifacts, and the UI cannot read them
there (docs/pipelines.md, "Observed gaps"). The Kubernetes API's addresses are not known at plan time: that flow is
narrowed to its ports (infra/platform/network.py API_SERVER). Replies need no rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.components import ISTIO
from infra.platform.kfp.patches import API_PORTS, METADATA_PORT, SEAWEEDFS_PORT
from infra.platform.network import api_server_egress, dns_egress, tcp
from infra.spec.pipelines.model import PipelinesFacts
from infra.vocabulary import NAME_LABEL

APP_LABEL = "application-crd-id"
PIPELINES_PODS = {APP_LABEL: "kubeflow-pipelines"}
INJECT = "sidecar.istio.io/inject"
ISTIOD = {"namespaceSelector": {"matchLabels": {NAME_LABEL: ISTIO.namespace}},
          "podSelector": {"matchLabels": {"app": "istiod"}}}
XDS_PORT = 15012  # istiod's xDS and CA (tls-xds), what every sidecar calls
MYSQL_PORT, ENVOY_PORT, UI_BACKEND_PORT, HOOK_PORT, IAM_PORT = 3306, 9090, 8888, 8080, 8111


def _pods(**labels: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": labels}}


MYSQL, SEAWEEDFS, API = _pods(app="mysql"), _pods(app="seaweedfs"), _pods(app="ml-pipeline")
METADATA, ENVOY = _pods(component="metadata-grpc-server"), _pods(component="metadata-envoy")
VISUALIZATION, HOOK = _pods(app="ml-pipeline-visualizationserver"), _pods(app="kubeflow-pipelines-profile-controller")
KUBE_API = "kubernetes-api"


@dataclass(frozen=True)
class Calls:
    """What one kind of Pipelines pod calls: (peer, ports) pairs, a peer being a pod selector in `kubeflow` or
    KUBE_API; no ports means every port (SeaweedFS to itself)."""

    labels: tuple[tuple[str, str], ...]
    calls: tuple[tuple[Any, tuple[int, ...]], ...]


def _calls(facts: PipelinesFacts) -> dict[str, Calls]:
    """Policy suffix -> the pods and what they call (the module docstring says why)."""
    found = {
        "ml-pipeline": Calls((("app", "ml-pipeline"),), (
            (KUBE_API, ()), (MYSQL, (MYSQL_PORT,)), (SEAWEEDFS, (SEAWEEDFS_PORT,)))),
        "metadata-grpc": Calls((("component", "metadata-grpc-server"),), ((MYSQL, (MYSQL_PORT,)),)),
        "metadata-envoy": Calls((("component", "metadata-envoy"),), ((METADATA, (METADATA_PORT,)),)),
        "ml-pipeline-ui": Calls((("app", "ml-pipeline-ui"),), (
            (KUBE_API, ()), (API, (UI_BACKEND_PORT,)), (VISUALIZATION, (UI_BACKEND_PORT,)),
            (ENVOY, (ENVOY_PORT,)), (SEAWEEDFS, (SEAWEEDFS_PORT,)))),
        "persistenceagent": Calls((("app", "ml-pipeline-persistenceagent"),), ((KUBE_API, ()), (API, API_PORTS))),
        "scheduledworkflow": Calls((("app", "ml-pipeline-scheduledworkflow"),), (
            (KUBE_API, ()), (API, (API_PORTS[0],)))),
        "metadata-writer": Calls((("app", "metadata-writer"),), ((KUBE_API, ()), (METADATA, (METADATA_PORT,)))),
        "viewer-crd": Calls((("app", "ml-pipeline-viewer-crd"),), ((KUBE_API, ()),)),
        "workflow-controller": Calls((("app", "workflow-controller"),), ((KUBE_API, ()),)),
        "seaweedfs": Calls((("app", "seaweedfs"),), ((SEAWEEDFS, ()),)),
    }
    if facts.artifacts == "seaweedfs":
        found["metacontroller"] = Calls((("app", "metacontroller"),), ((KUBE_API, ()), (HOOK, (HOOK_PORT,))))
        found["profile-controller"] = Calls((("app", "kubeflow-pipelines-profile-controller"),),
                                            ((SEAWEEDFS, (IAM_PORT, SEAWEEDFS_PORT)),))
    return found


def _rule(peer: Any, ports: tuple[int, ...]) -> dict[str, Any]:
    if peer == KUBE_API:
        return api_server_egress()
    rule: dict[str, Any] = {"to": [peer]}
    if ports:
        rule["ports"] = tcp(ports)
    return rule


def base_policy() -> dict[str, Any]:
    """Every Pipelines pod: egress denied but DNS, and istiod for those with a sidecar."""
    return {"podSelector": {"matchLabels": dict(PIPELINES_PODS)}, "policyTypes": ["Egress"], "egress": [dns_egress()]}


def mesh_policy() -> dict[str, Any]:
    return {"podSelector": {"matchLabels": dict(PIPELINES_PODS),
                            "matchExpressions": [{"key": INJECT, "operator": "NotIn", "values": ["false"]}]},
            "policyTypes": ["Egress"],
            "egress": [{"to": [ISTIOD], "ports": [{"protocol": "TCP", "port": XDS_PORT}]}]}


def egress_policies(facts: PipelinesFacts) -> dict[str, dict[str, Any]]:
    """NetworkPolicy name -> spec, in `kubeflow`."""
    policies = {"pipelines-egress": base_policy(), "pipelines-egress-mesh": mesh_policy()}
    for name, calls in _calls(facts).items():
        policies[f"pipelines-egress-{name}"] = {
            "podSelector": {"matchLabels": {**PIPELINES_PODS, **dict(calls.labels)}}, "policyTypes": ["Egress"],
            "egress": [_rule(peer, ports) for peer, ports in calls.calls]}
    return policies

