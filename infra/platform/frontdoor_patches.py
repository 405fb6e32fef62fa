"""Our patches to the vendored Kubeflow Platform 26.03 folders the front door installs (infra/platform/frontdoor.py):
plain data, each with the reason the upstream object does not fit as shipped. kustomize applies them in the overlay
(infra/kit/overlays.py), so `pulumi up` and the offline plan build the same objects.

Used as vendored: common/cert-manager/base, common/istio/istio-crds/base. Patched: istio-namespace, istio-install
(overlays/oauth2-proxy), kubeflow-istio-resources, oauth2-proxy (overlays/m2m-dex-only), dex (overlays/oauth2-proxy).
Not applied: common/kubeflow-namespace/base (it relabels kubeflow-system, where the Trainer and JobSet already run,
for sidecar injection and isolates it: kubeflow-platform reference, finding 5), cert-manager's `kubeflow` overlay
(its self-signing ClusterIssuer; ours comes from frontDoor.tls), the istio-install `gke` variant (it differs only in
the CNI's binary folder: patched below where the CNI stays on GKE), the m2m-dex-and-kind/-eks variants (their
issuer rule and jwks proxy are built per cluster kind in frontdoor.py).
"""

from __future__ import annotations

from typing import Any

import yaml

from infra.components import GATEWAY_POD_LABELS, ISTIO, MESH_AGENT_TOLERATION, PIPELINES
from infra.vocabulary import TEAM_LABEL

Patch = dict[str, Any]
GATEWAY = "kubeflow-gateway"  # the vendored Gateway's name, which every vendored VirtualService binds to
GATEWAY_REF = f"{ISTIO.namespace}/{GATEWAY}"
# On a laptop the gateway is a NodePort that kind's extraPortMappings expose on the host (docs/kind-trainyard.yaml):
# Service port name -> (port, nodePort). A Service's ports merge by `port` and `protocol`: a patch entry without them
# matches no port (an entry of names and node ports alone left the Service with no port at all).
LAPTOP_NODE_PORTS = {"http2": (80, 30080), "https": (443, 30443)}
# ... and a fixed cluster address, which the laptop's Grafana pods resolve the host to (grafana/orgs.py): in kind's
# service range (docs/kind-trainyard.yaml, 10.96.0.0/16), in its lower 256 addresses, which Kubernetes hands out to
# Services that ask for a fixed address before any other (KEP-3070).
LAPTOP_GATEWAY_IP = "10.96.0.80"
# The istio-install chart's CNI node agent and what only it uses, all in kube-system.
_CNI = [("DaemonSet", "istio-cni-node"), ("ConfigMap", "istio-cni-config"), ("ServiceAccount", "istio-cni"),
        ("ClusterRole", "istio-cni"), ("ClusterRole", "istio-cni-repair-role"),
        ("ClusterRoleBinding", "istio-cni"), ("ClusterRoleBinding", "istio-cni-repair-rolebinding")]
_API = {"DaemonSet": "apps/v1", "ConfigMap": "v1", "ServiceAccount": "v1", "Secret": "v1",
        "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
        "Sidecar": "networking.istio.io/v1", "Gateway": "networking.istio.io/v1alpha3",
        "NetworkPolicy": "networking.k8s.io/v1"}
INJECTOR_WEBHOOKS = 4  # the istio-sidecar-injector configuration's webhooks (two per revision selector style)


def _text(document: dict[str, Any] | list[dict[str, Any]]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def delete(kind: str, name: str, namespace: str | None = None) -> Patch:
    """Drop an upstream object from the build (a strategic merge `$patch: delete`)."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"patch": _text({"$patch": "delete", "apiVersion": _API[kind], "kind": kind, "metadata": meta})}


def merge(api_version: str, kind: str, name: str, namespace: str | None, **fields: Any) -> Patch:
    """A strategic merge patch of one upstream object."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"patch": _text({"apiVersion": api_version, "kind": kind, "metadata": meta, **fields})}


def json6902(kind: str, name: str, operations: list[dict[str, Any]]) -> Patch:
    return {"patch": _text(operations), "target": {"kind": kind, "name": name}}


def istio_namespace_patches() -> list[Patch]:
    """Knative is not installed: its allowance into the gateways would be a hole with no purpose."""
    return [delete("NetworkPolicy", "allow-knative-to-istio-gateways", ISTIO.namespace)]


# GKE mounts /opt/cni/bin read-only; its writable CNI folder (the vendored components/gke-cni patch).
GKE_CNI_BIN = "/home/kubernetes/bin"


def istio_install_patches(laptop: bool, sidecars: bool = False, gke: bool = False) -> list[Patch]:
    """- Without Pipelines (`sidecars` false) the CNI node agent goes: no pod then carries a sidecar (the gateway is
      a standalone Envoy, oauth2-proxy and Dex run without one, team namespaces are outside injection), so nothing
      needs traffic redirection, and the agent would be a privileged DaemonSet with five hostPaths in kube-system
      (istio-init instead would need NET_ADMIN, which the `restricted` level refuses); an injected pod then fails
      its istio-validation init container rather than running without the mesh.
    - The two Sidecars in namespace `kubeflow` go: they except the notebook controller and the UI's artifact proxy,
      neither of which runs here.
    - The chart's own Gateway (port 80, every host, plain HTTP) goes: the vendored kubeflow-gateway, patched for the
      host and HTTPS, is the one Gateway.
    - The gateway's Service becomes the stack's one web-facing entry: LoadBalancer, or on a laptop NodePort (at a
      fixed cluster address, LAPTOP_GATEWAY_IP).
    - Every injector webhook also skips team namespaces (label trainyard.io/team), so no label or annotation a
      team sets on a pod can give a training pod a sidecar.
    `sidecars`: Kubeflow Pipelines runs its pods with sidecars (infra/platform/kfp/pipelines.py), so the CNI agent
    stays: it redirects their traffic, where istio-init would need NET_ADMIN, which `restricted` refuses. It keeps
    off tainted (GPU) nodes, where no injected pod can run (upstream tolerates every taint): it would take from
    what the teams are guaranteed there. On GKE (`gke`) it writes its binary where GKE's nodes let it, as the
    vendored `gke` variant does."""
    patches = [json6902("DaemonSet", "istio-cni-node", [
        {"op": "replace", "path": "/spec/template/spec/tolerations",
         "value": [{"key": MESH_AGENT_TOLERATION, "operator": "Exists"}]}])] if sidecars else [
        delete(kind, name, "kube-system" if kind in ("DaemonSet", "ConfigMap", "ServiceAccount") else None)
        for kind, name in _CNI]
    if sidecars and gke:
        volume = {"name": "cni-bin-dir", "hostPath": {"path": GKE_CNI_BIN}}
        patches.append(merge("apps/v1", "DaemonSet", "istio-cni-node", "kube-system",
                             spec={"template": {"spec": {"volumes": [volume]}}}))
    patches += [delete("Sidecar", name, PIPELINES.namespace) for name in ("ml-pipeline-ui-exception",
                                                                          "notebook-controller-exception")]
    patches.append(delete("Gateway", "istio-ingressgateway", ISTIO.namespace))
    service: dict[str, Any] = {"type": "NodePort" if laptop else "LoadBalancer"}
    if laptop:
        service["clusterIP"] = LAPTOP_GATEWAY_IP
        service["ports"] = [{"name": name, "port": port, "protocol": "TCP", "nodePort": node_port}
                            for name, (port, node_port) in LAPTOP_NODE_PORTS.items()]
    patches.append(merge("v1", "Service", "istio-ingressgateway", ISTIO.namespace, spec=service))
    outside_teams = {"key": TEAM_LABEL, "operator": "DoesNotExist"}
    patches.append(json6902("MutatingWebhookConfiguration", "istio-sidecar-injector", [
        {"op": "add", "path": f"/webhooks/{index}/namespaceSelector/matchExpressions/-", "value": outside_teams}
        for index in range(INJECTOR_WEBHOOKS)]))
    return patches


def gateway_patches(host: str, credential: str, http01: bool) -> list[Patch]:
    """The vendored kubeflow-gateway sits in namespace `kubeflow` (not created here) and serves plain HTTP for every
    host. Ours sits beside the gateway's pods in istio-system (where the gateway reads its TLS Secret), serves
    HTTPS for the host with `credential`, and answers port 80 only with a redirect to HTTPS (but for an ACME http01
    challenge, which must be answered on port 80). Its three ClusterRoles (kubeflow-istio-*) aggregate into
    Kubeflow roles this platform does not install: dropped."""
    http: dict[str, Any] = {"hosts": [host], "port": {"name": "http", "number": 80, "protocol": "HTTP"}}
    if not http01:
        http["tls"] = {"httpsRedirect": True}
    servers = [{"hosts": [host], "port": {"name": "https", "number": 443, "protocol": "HTTPS"},
                "tls": {"mode": "SIMPLE", "credentialName": credential}}, http]
    move = json6902("Gateway", GATEWAY, [
        {"op": "replace", "path": "/metadata/namespace", "value": ISTIO.namespace},
        {"op": "replace", "path": "/spec/selector", "value": dict(GATEWAY_POD_LABELS)},
        {"op": "replace", "path": "/spec/servers", "value": servers}])
    return [move, *(delete("ClusterRole", f"kubeflow-istio-{role}") for role in ("admin", "edit", "view"))]


def bind_to_gateway(name: str, namespace: str) -> Patch:
    """A vendored VirtualService bound to `kubeflow/kubeflow-gateway`, rebound to where the Gateway is."""
    return merge("networking.istio.io/v1alpha3", "VirtualService", name, namespace, spec={"gateways": [GATEWAY_REF]})


def replace_config(name: str, namespace: str, key: str, text: str) -> Patch:
    """An upstream ConfigMap's one configuration file, replaced by ours whole."""
    return merge("v1", "ConfigMap", name, namespace, data={key: text})
