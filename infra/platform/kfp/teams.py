"""What Kubeflow Pipelines needs in each team namespace, written by Trainyard (docs/pipelines.md):

- where the team's stack has team buckets, the objects upstream's per-namespace sync (sync.py) would write, but
  pointing at the team's own bucket: ConfigMap `kfp-launcher` (the pipeline root and the launcher's credentials:
  the run account's workload identity, or the bucket claim's Secret on Ceph), `artifact-repositories` (Argo's log
  archive, same bucket) and `metadata-grpc-configmap`;
- everywhere, the run account's Role (what Argo's executor and KFP's driver and launcher do in the namespace), and
  the NetworkPolicy that lets its pods reach Pipelines' API server and ML Metadata, on their ports only (the
  namespace's default-deny stays).
"""

from __future__ import annotations

from typing import Any

import yaml

from infra.components import PIPELINES
from infra.kit.objects import NETWORKING_API, RBAC_API, RBAC_GROUP
from infra.platform.kfp.patches import API_PORTS, METADATA_PORT, RUNNER_ACCOUNT, SEAWEEDFS_PORT, tcp
from infra.spec.pipelines.model import ArtifactStore, PipelinesFacts
from infra.vocabulary import NAME_LABEL

RUNNER_ROLE = "pipeline-runner"
DEFAULT_REPOSITORY = "workflows.argoproj.io/default-artifact-repository"  # Argo's annotation on the ConfigMap
REPOSITORY_KEY = "default-namespaced"  # sync.py's key, which the annotation names
METADATA_HOST = f"metadata-grpc-service.{PIPELINES.namespace}"
# Pods of Pipelines' namespace by their upstream labels: the API server, ML Metadata's gRPC server, SeaweedFS.
_API_PODS = {"app": "ml-pipeline"}
_METADATA_PODS = {"component": "metadata-grpc-server"}
_STORE_PODS = {"app": "seaweedfs"}


def store_objects(store: ArtifactStore) -> dict[str, dict[str, Any]]:
    """ConfigMap name -> its fields (data, annotations) for one namespace's artifact store."""
    return {
        "kfp-launcher": {"data": {"defaultPipelineRoot": store.root,
                                  "providers": yaml.safe_dump(dict(store.providers), sort_keys=False)}},
        "artifact-repositories": {"annotations": {DEFAULT_REPOSITORY: REPOSITORY_KEY},
                                  "data": {REPOSITORY_KEY: yaml.safe_dump(dict(store.argo), sort_keys=False)}},
        "metadata-grpc-configmap": {"data": {"METADATA_GRPC_SERVICE_HOST": METADATA_HOST,
                                             "METADATA_GRPC_SERVICE_PORT": str(METADATA_PORT)}},
    }


def runner_rules(store: ArtifactStore | None) -> list[dict[str, Any]]:
    """Argo's executor reports each step's outputs as a WorkflowTaskResult; KFP's driver and launcher read the
    namespace's launcher and metadata ConfigMaps and, on Ceph, the bucket claim's Secret; a step starts training as
    a TrainJob (queued by Kueue like any other) and reads its pods (the image digests that ran, for the run's
    record: examples/pipelines)."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
         "resourceNames": ["kfp-launcher", "metadata-grpc-configmap"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"],
         "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]
    secret = (store.providers.get("s3", {}).get("default", {}).get("credentials", {}).get("secretRef")
              if store is not None else None)
    if secret:
        rules.append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                      "resourceNames": [secret["secretName"]]})
    return rules


def runner_binding(namespace: str) -> dict[str, Any]:
    return {"subjects": [{"kind": "ServiceAccount", "name": RUNNER_ACCOUNT, "namespace": namespace}],
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": RUNNER_ROLE}}


def pipelines_egress(facts: PipelinesFacts) -> dict[str, Any]:
    """The namespace's pods reach the API server and ML Metadata (and SeaweedFS where it holds the artifacts)."""
    def peer(labels: dict[str, str]) -> dict[str, Any]:
        return {"namespaceSelector": {"matchLabels": {NAME_LABEL: PIPELINES.namespace}},
                "podSelector": {"matchLabels": labels}}
    rules = [{"to": [peer(_API_PODS)], "ports": tcp(*API_PORTS)},
             {"to": [peer(_METADATA_PODS)], "ports": tcp(METADATA_PORT)}]
    if facts.artifacts == "seaweedfs":
        rules.append({"to": [peer(_STORE_PODS)], "ports": tcp(SEAWEEDFS_PORT)})
    return {"podSelector": {}, "policyTypes": ["Egress"], "egress": rules}


def team_objects(facts: PipelinesFacts, namespace: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(apiVersion, kind, name, fields) of every object Pipelines needs in one team namespace."""
    store = facts.store(namespace)
    objects: list[tuple[str, str, str, dict[str, Any]]] = [
        (RBAC_API, "Role", RUNNER_ROLE, {"rules": runner_rules(store)}),
        (RBAC_API, "RoleBinding", RUNNER_ROLE, runner_binding(namespace)),
        (NETWORKING_API, "NetworkPolicy", "allow-pipelines", {"spec": pipelines_egress(facts)}),
    ]
    if store is not None:
        objects += [("v1", "ConfigMap", name, fields) for name, fields in store_objects(store).items()]
    return objects
