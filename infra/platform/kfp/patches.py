"""Our patches to the vendored Kubeflow Pipelines 2.16.0 (Kubeflow Platform 26.03) that infra/platform/kfp/pipelines.py
installs: plain data, each with the reason the upstream object does not fit as shipped (docs/pipelines.md lists
what is used, patched and replaced).

Used: applications/pipeline/upstream/env/cert-manager/platform-agnostic-multi-user, and of
common/kubeflow-namespace/base only its `kubeflow` folder (the whole base also relabels kubeflow-system, where the
Trainer runs, for sidecar injection: kubeflow-platform reference, finding 5).
"""

from __future__ import annotations

from typing import Any

from infra.components import GATEWAY_PEER, PIPELINES
from infra.platform.frontdoor_patches import Patch, bind_to_gateway, json6902, merge
from infra.spec.pipelines.model import PipelinesFacts
from infra.vocabulary import TEAM_LABEL

NS = PIPELINES.namespace
RUNNER_ACCOUNT = "datasets"  # TEAM_DATA_ACCOUNT: the account the cluster binds to the team bucket
DB_SECRET, STORE_SECRET = PIPELINES.secrets  # mysql-secret (username, password); mlpipeline-minio-artifact
# Run pods' user containers (executor templates) get no runAsNonRoot from the compiler unless these are set
# (KFP backend/src/v2/compiler/argocompiler/security_context.go): without it PSA `restricted` in team namespaces
# refuses every step. 1000 is the value the archive's own comment suggests.
RUN_AS_USER = "1000"
# The ports team pods call: the API server (8887 gRPC, 8888 HTTP: the launcher reports tasks and reads the run),
# ML Metadata (8080 gRPC: driver and launcher record executions and artifacts), SeaweedFS' S3 (8333, only where
# it holds the runs' artifacts).
API_PORTS, METADATA_PORT, SEAWEEDFS_PORT = (8887, 8888), 8080, 8333
# The run journal: MySQL's pods and claim carry JOURNAL_LABEL, which is what the journal drill restores
# (infra/platform/kfp/journal_drill.py); the names are the vendored Deployment's (third-party/mysql).
JOURNAL_LABEL = "trainyard.io/journal"
JOURNAL_CLAIM, JOURNAL_VOLUME, MYSQL_CONTAINER = "mysql-pv-claim", "mysql-persistent-storage", "mysql"
MYSQL_IMAGE = "docker.io/library/mysql:8.4"
TEAMS = {"namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}}
# The v1 cache server: a cluster-wide mutating webhook on pods labelled cache_enabled in every namespace, its
# cert-manager Issuer and Certificate, and the untagged `cacheImage` it substitutes. KFP 2.16's SDK compiles v2
# pipelines only, whose driver decides cache hits through ML Metadata and the API server: nothing of ours uses it.
_CACHE = [("apps/v1", "Deployment", "cache-server"), ("v1", "Service", "cache-server"),
          ("v1", "ServiceAccount", "kubeflow-pipelines-cache"),
          ("rbac.authorization.k8s.io/v1", "Role", "kubeflow-pipelines-cache-role"),
          ("rbac.authorization.k8s.io/v1", "RoleBinding", "kubeflow-pipelines-cache-binding"),
          ("rbac.authorization.k8s.io/v1", "ClusterRole", "kubeflow-pipelines-cache-role"),
          ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "kubeflow-pipelines-cache-binding"),
          ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "cache-webhook-kubeflow"),
          ("cert-manager.io/v1", "Issuer", "kfp-cache-selfsigned-issuer"),
          ("cert-manager.io/v1", "Certificate", "kfp-cache-cert"),
          ("security.istio.io/v1beta1", "AuthorizationPolicy", "service-cache-server")]
# The upstream per-namespace sync (metacontroller + the pipelines profile controller's sync.py), replaced where the
# stack has team buckets: it writes a SeaweedFS pipeline root and mints SeaweedFS keys for every namespace.
_SYNC = [("apps/v1", "Deployment", "kubeflow-pipelines-profile-controller"),
         ("v1", "Service", "kubeflow-pipelines-profile-controller"),
         ("v1", "ConfigMap", "kubeflow-pipelines-profile-controller-code"),
         ("v1", "ConfigMap", "kubeflow-pipelines-profile-controller-env"),
         ("metacontroller.k8s.io/v1alpha1", "DecoratorController", "kubeflow-pipelines-profile-controller"),
         ("apps/v1", "StatefulSet", "metacontroller"), ("v1", "ServiceAccount", "meta-controller-service"),
         ("rbac.authorization.k8s.io/v1", "ClusterRole", "kubeflow-metacontroller"),
         ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "meta-controller-cluster-role-binding"),
         *(("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"{crd}.metacontroller.k8s.io")
           for crd in ("compositecontrollers", "decoratorcontrollers", "controllerrevisions"))]
# NetworkPolicies of common/kubeflow-namespace/base/kubeflow for components this platform does not install.
_OTHER_POLICIES = ("cache-server", "centraldashboard", "jupyter-web-app", "katib-controller", "katib-db-manager",
                   "katib-ui", "kserve", "kserve-models-web-app", "model-catalog", "model-registry",
                   "model-registry-ui", "poddefaults", "pvcviewer-webhook", "spark-operator-webhook",
                   "tensorboards-web-app", "training-operator-webhook", "volumes-web-app")
_CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "CustomResourceDefinition",
                   "PriorityClass"}


def remove(api_version: str, kind: str, name: str) -> Patch:
    """Drop an upstream object from the build (a strategic merge `$patch: delete`)."""
    return merge(api_version, kind, name, None if kind in _CLUSTER_SCOPED else NS, **{"$patch": "delete"})


def _ingress(name: str, rules: list[dict[str, Any]]) -> Patch:
    return json6902("NetworkPolicy", name, [{"op": "replace", "path": "/spec/ingress", "value": rules}])


def tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def namespace_patches() -> list[Patch]:
    """The `kubeflow` namespace as vendored (sidecar injection on: the AuthorizationPolicies that refuse a forged
    identity header run in the sidecars; PSA restricted), less the policies of absent components. Team namespaces
    replace upstream's `part-of=kubeflow-profile` label as the peers that may call the API server and ML Metadata,
    on their ports only; the UI takes only the gateway's pods (the front door's own policy adds Prometheus)."""
    patches = [merge("networking.k8s.io/v1", "NetworkPolicy", name, NS, **{"$patch": "delete"})
               for name in _OTHER_POLICIES]
    patches += [_ingress("ml-pipeline", [{"from": [TEAMS], "ports": tcp(*API_PORTS)}]),
                _ingress("metadata-grpc-server", [{"from": [TEAMS], "ports": tcp(METADATA_PORT)}]),
                _ingress("ml-pipeline-ui", [{"from": [GATEWAY_PEER]}])]
    return patches


def pipelines_patches(facts: PipelinesFacts) -> list[Patch]:
    """- pipeline-install-config: run pods as non-root (above); no cache image (the v1 cache is not installed).
    - pipeline-api-server-config: runs execute as the team's data account, which the cluster already binds to the
      team bucket on every cloud (EKS Pod Identity, GKE and AKS workload identity) and which every other team
      workload runs as, instead of upstream's `default-editor`, which no cloud binding names.
    - MySQL: the root password from our Secret (the archive ships an empty one), on the stack's class and size;
      its pods and claim labelled as the journal (what the journal drill restores).
    - SeaweedFS (the API server's store of pipeline definitions): the admin key from our Secret (the archive ships
      minio/minio123), on the stack's class and size.
    - The UI route: the front door's VirtualService serves /pipeline; the ML Metadata route is rebound to the
      front door's gateway.
    - Team buckets: the per-namespace sync is removed (teams.py writes each namespace's objects). Without
      them it stays, and selects team namespaces instead of upstream's profile label."""
    database_class, database_size = facts.database
    store_class, store_size = facts.definitions
    mysql_env = [{"name": "MYSQL_ALLOW_EMPTY_PASSWORD", "$patch": "delete"},
                 {"name": "MYSQL_ROOT_PASSWORD", "valueFrom": {"secretKeyRef": {"name": DB_SECRET, "key": "password"}}}]
    patches = [
        merge("v1", "ConfigMap", "pipeline-install-config", NS, data={
            "defaultSecurityContextRunAsNonRoot": "true", "defaultSecurityContextRunAsUser": RUN_AS_USER,
            "cacheImage": ""}),
        merge("v1", "ConfigMap", "pipeline-api-server-config", NS,
              data={"DEFAULTPIPELINERUNNERSERVICEACCOUNT": RUNNER_ACCOUNT}),
        merge("apps/v1", "Deployment", "mysql", NS, spec={"template": {
            "metadata": {"labels": {JOURNAL_LABEL: "true"}},
            "spec": {"containers": [{"name": MYSQL_CONTAINER, "env": mysql_env}]}}}),
        merge("v1", "PersistentVolumeClaim", JOURNAL_CLAIM, NS,
              spec={"storageClassName": database_class, "resources": {"requests": {"storage": database_size}}}),
        json6902("PersistentVolumeClaim", JOURNAL_CLAIM, [
            {"op": "add", "path": "/metadata/labels/" + JOURNAL_LABEL.replace("/", "~1"), "value": "true"}]),
        merge("v1", "PersistentVolumeClaim", "seaweedfs-pvc", NS,
              spec={"storageClassName": store_class, "resources": {"requests": {"storage": store_size}}}),
        remove("v1", "Secret", DB_SECRET), remove("v1", "Secret", STORE_SECRET),
        remove("networking.istio.io/v1alpha3", "VirtualService", "ml-pipeline-ui"),
        bind_to_gateway("metadata-grpc", NS),
        *(remove(*obj) for obj in _CACHE),
        # Docker Hub's short names, fully qualified (the same images): `trainyard images` lists what a mirror needs.
        merge("apps/v1", "Deployment", "mysql", NS, spec={"template": {"spec": {"containers": [
            {"name": MYSQL_CONTAINER, "image": MYSQL_IMAGE}]}}}),
        merge("apps/v1", "Deployment", "seaweedfs", NS, spec={"template": {"spec": {"containers": [
            {"name": "seaweedfs", "image": "docker.io/chrislusf/seaweedfs:4.00"}]}}}),
        # Argo's controller at priority 1000000 would preempt training pods outside Kueue: it runs at the default.
        remove("scheduling.k8s.io/v1", "PriorityClass", "workflow-controller"),
        json6902("Deployment", "workflow-controller", [
            {"op": "remove", "path": "/spec/template/spec/priorityClassName"}]),
    ]
    if facts.artifacts == "team-buckets":
        patches += [remove(*obj) for obj in _SYNC]
        patches.append(_ingress("seaweedfs", [{"from": [{"podSelector": {}}], "ports": tcp(SEAWEEDFS_PORT)}]))
    else:
        patches.append(json6902("DecoratorController", "kubeflow-pipelines-profile-controller", [
            {"op": "replace", "path": "/spec/resources/0/labelSelector",
             "value": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}}]))
        patches.append(_ingress("seaweedfs", [{"from": [TEAMS, {"podSelector": {}}], "ports": tcp(SEAWEEDFS_PORT)}]))
    return patches
