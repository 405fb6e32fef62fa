"""Our patches to the vendored KServe 0.16.0 (Kubeflow Platform 26.03, applications/kserve/kserve) that
infra/platform/models/serving.py installs: plain data, each with the reason the upstream object does not fit as
shipped (docs/models.md lists what is used, patched and removed).

- inferenceservice-config: Standard mode (the archive ships Knative's `Serverless`, and Knative is not installed);
  no Ingress (endpoints stay inside the cluster, reached from the team's own namespaces); Deployments roll with
  maxUnavailable 0, so the serving version keeps answering until the new one is ready (rollback, docs/models.md);
  the images it injects fully qualified.
- ClusterStorageContainer `default`: the storage-initializer init container gets a `restricted` securityContext
  (KServe merges the container into the one it injects; upstream leaves it none, so PSA `restricted` in team
  namespaces refuses every predictor pod that downloads a model).
- ClusterServingRuntimes: seccomp RuntimeDefault on their containers (upstream sets none: PSA `restricted`),
  images fully qualified; the multi-node Hugging Face runtime is removed (Ray workers without a securityContext,
  running as root: PSA `restricted` refuses them, and multi-node serving is not offered).
- Removed, unused: the LLMInferenceService controller with its Service, certificate, RBAC and validating webhook
  (the VWC would otherwise point at a Service with no pods, failurePolicy Fail); the local-model controller and
  the node agent's leftovers (localModel.enabled is false; the archive already drops the agent DaemonSet). Their
  CRDs stay: they are the API KServe's roles name, and removing a CRD deletes every object of it.
"""

from __future__ import annotations

import json
from typing import Any

from infra.components import PIPELINES
from infra.platform.frontdoor_patches import GATEWAY, Patch, json6902, merge

NS = PIPELINES.namespace  # KServe's folder renders into `kubeflow`, the namespace Pipelines' folder creates
CONFIG = "inferenceservice-config"
VERSION = "v0.16.0"
STORAGE_INITIALIZER = f"docker.io/kserve/storage-initializer:{VERSION}"
AGENT, ROUTER = f"docker.io/kserve/agent:{VERSION}", f"docker.io/kserve/router:{VERSION}"
CONTROLLER_IMAGE = f"docker.io/kserve/kserve-controller:{VERSION}"
# ClusterServingRuntime -> its image, fully qualified (Docker Hub's short names as the archive spells them).
RUNTIMES = {
    "kserve-huggingfaceserver": f"docker.io/kserve/huggingfaceserver:{VERSION}",
    "kserve-lgbserver": f"docker.io/kserve/lgbserver:{VERSION}",
    "kserve-mlserver": "docker.io/seldonio/mlserver:1.5.0",
    "kserve-paddleserver": f"docker.io/kserve/paddleserver:{VERSION}",
    "kserve-pmmlserver": f"docker.io/kserve/pmmlserver:{VERSION}",
    "kserve-sklearnserver": f"docker.io/kserve/sklearnserver:{VERSION}",
    "kserve-tensorflow-serving": "docker.io/tensorflow/serving:2.6.2",
    "kserve-torchserve": "docker.io/pytorch/torchserve-kfs:0.9.0",
    "kserve-tritonserver": "nvcr.io/nvidia/tritonserver:23.05-py3",
    "kserve-xgbserver": f"docker.io/kserve/xgbserver:{VERSION}",
}
SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}
# PSA `restricted` for the injected storage-initializer; 1000 is the image's own user (python/storage-initializer
# .Dockerfile at v0.16.0: `USER 1000`), stated so a root-defaulting image could not slip through.
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
              "runAsUser": 1000, **SECCOMP}
# The Deployment strategy KServe writes in Standard mode (KServe pkg/.../deployment_reconciler.go
# applyRolloutStrategyFromConfigmap). KServe passes both as strings, which a Deployment accepts only as percentages:
# no pod goes before its successor is ready; one surge pod (25% rounds up to at least one) carries the new version.
ROLLOUT = {"maxSurge": "25%", "maxUnavailable": "0%"}
# The archive's ingress settings (its own patch), with Ingress creation off: KServe then writes no Ingress and no
# route; the predictor Service answers inside the cluster (pkg/.../kube_ingress_reconciler.go DisableIngressCreation).
INGRESS = {"enableGatewayApi": False, "kserveIngressGateway": "kserve/kserve-ingress-gateway",
           "ingressGateway": f"{NS}/{GATEWAY}", "localGateway": "knative-serving/knative-local-gateway",
           "localGatewayService": "knative-local-gateway.istio-system.svc.cluster.local",
           "ingressDomain": "example.com", "ingressClassName": "istio",
           "domainTemplate": "{{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}", "urlScheme": "http",
           "disableIstioVirtualHost": False, "disableIngressCreation": True}
_RBAC = "rbac.authorization.k8s.io/v1"
_UNUSED = [
    # the LLMInferenceService controller (llm-d serving, not offered here)
    ("apps/v1", "Deployment", "llmisvc-controller-manager"), ("v1", "ServiceAccount", "llmisvc-controller-manager"),
    ("v1", "Service", "llmisvc-controller-manager-service"), ("v1", "Service", "llmisvc-webhook-server-service"),
    ("cert-manager.io/v1", "Certificate", "llmisvc-serving-cert"),
    (_RBAC, "Role", "llmisvc-leader-election-role"), (_RBAC, "RoleBinding", "llmisvc-leader-election-rolebinding"),
    (_RBAC, "ClusterRole", "llmisvc-manager-role"), (_RBAC, "ClusterRoleBinding", "llmisvc-manager-rolebinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "llminferenceservice.serving.kserve.io"),
    # the local-model cache (localModel.enabled false; its node agent is already gone from the archive)
    ("apps/v1", "Deployment", "kserve-localmodel-controller-manager"),
    ("v1", "ServiceAccount", "kserve-localmodel-controller-manager"),
    (_RBAC, "ClusterRole", "kserve-localmodel-manager-role"),
    (_RBAC, "ClusterRoleBinding", "kserve-localmodel-manager-rolebinding"),
    ("v1", "ServiceAccount", "kserve-localmodelnode-agent"), (_RBAC, "ClusterRole", "kserve-localmodelnode-agent-role"),
    (_RBAC, "ClusterRoleBinding", "kserve-localmodelnode-agent-rolebinding"),
    # Ray workers as root (above)
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime", "kserve-huggingfaceserver-multinode"),
]
_SERVING_API = "serving.kserve.io/v1alpha1"
_CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "ClusterServingRuntime"}


def remove(api_version: str, kind: str, name: str) -> Patch:
    """Drop an upstream object from the build (a strategic merge `$patch: delete`)."""
    return merge(api_version, kind, name, None if kind in _CLUSTER_SCOPED else NS, **{"$patch": "delete"})


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2)


def _injected(image: str, memory: str, cpu: str) -> dict[str, str]:
    return {"image": image, "memoryRequest": memory, "memoryLimit": "1Gi", "cpuRequest": cpu, "cpuLimit": "1"}


def config_data() -> dict[str, str]:
    """The keys of inferenceservice-config we set (the archive's other keys stay)."""
    return {
        "deploy": _json({"defaultDeploymentMode": "Standard",
                         "deploymentRolloutStrategy": {"defaultRollout": ROLLOUT}}),
        "ingress": _json(INGRESS),
        "storageInitializer": _json({
            **_injected(STORAGE_INITIALIZER, "100Mi", "100m"), "caBundleConfigMapName": "",
            "caBundleVolumeMountPath": "/etc/ssl/custom-certs", "enableModelcar": True,
            "cpuModelcar": "10m", "memoryModelcar": "15Mi", "uidModelcar": 1010}),
        "agent": _json(_injected(AGENT, "100Mi", "100m")),
        "router": _json({**_injected(ROUTER, "100Mi", "100m"), "imagePullPolicy": "IfNotPresent"}),
        "batcher": _json({**_injected(AGENT, "1Gi", "1"), "maxBatchSize": "32", "maxLatency": "5000"}),
        "logger": _json({**_injected(AGENT, "100Mi", "100m"), "defaultUrl": "http://default-broker"}),
        "localModel": _json({"enabled": False, "jobNamespace": "kserve-localmodel-jobs",
                             "defaultJobImage": STORAGE_INITIALIZER, "fsGroup": 1000}),
    }


def serving_patches() -> list[Patch]:
    """Every patch above, in the order kustomize applies them."""
    patches = [merge("v1", "ConfigMap", CONFIG, NS, data=config_data()),
               merge(_SERVING_API, "ClusterStorageContainer", "default", None,
                     spec={"container": {"name": "storage-initializer", "image": STORAGE_INITIALIZER,
                                         "securityContext": RESTRICTED}}),
               merge("apps/v1", "Deployment", "kserve-controller-manager", NS, spec={"template": {"spec": {
                   "containers": [{"name": "manager", "image": CONTROLLER_IMAGE}]}}})]
    # JSON patches: a strategic merge would replace a custom resource's lists whole.
    patches += [json6902("ClusterServingRuntime", name, [
        {"op": "replace", "path": "/spec/containers/0/image", "value": image},
        {"op": "add", "path": "/spec/containers/0/securityContext/seccompProfile", "value": SECCOMP["seccompProfile"]}])
        for name, image in RUNTIMES.items()]
    patches += [remove(*obj) for obj in _UNUSED]
    return patches
