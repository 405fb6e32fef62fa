"""Egress from `kubeflow` (issue 30): every Pipelines pod is egress-isolated; each reaches what it calls, named here
as the rendered Service it calls and that Service's port (the Service's selector and target port decide which pods
and port the policy must open), and nothing else: not a team pod, not another kube-system pod, not an unlisted port,
not the network for pods that call no Kubernetes API. Judged by evaluating the rendered NetworkPolicies."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from infra.apiserver.selectors import matches_selector
from infra.vocabulary import NAME_LABEL
from tests.conftest import capture_of, kube_objects

NS = "kubeflow"
KUBEFLOW = {NAME_LABEL: NS, "control-plane": "kubeflow", "istio-injection": "enabled"}
KUBE_SYSTEM, ISTIO_SYSTEM = {NAME_LABEL: "kube-system"}, {NAME_LABEL: "istio-system"}
API_SERVER_IP = "10.96.0.1"  # an address of the Kubernetes API (unknown at plan time: any address on its port)
# The workload (Deployment, StatefulSet, CronJob) -> the Services it calls and their ports, from KFP 2.16.0's and
# Argo v3.7.3's code and the rendered env (docs/pipelines.md); "kubernetes" is the Kubernetes API.
CALLS = {
    "ml-pipeline": [("kubernetes", 443), ("mysql", 3306), ("seaweedfs", 9000)],
    "metadata-grpc-deployment": [("mysql", 3306)],
    "metadata-envoy-deployment": [("metadata-grpc-service", 8080)],
    "ml-pipeline-ui": [("kubernetes", 443), ("ml-pipeline", 8888), ("ml-pipeline-visualizationserver", 8888),
                       ("metadata-envoy-service", 9090), ("seaweedfs", 9000)],
    "ml-pipeline-persistenceagent": [("kubernetes", 443), ("ml-pipeline", 8887), ("ml-pipeline", 8888)],
    "ml-pipeline-scheduledworkflow": [("kubernetes", 443), ("ml-pipeline", 8887)],
    "metadata-writer": [("kubernetes", 443), ("metadata-grpc-service", 8080)],
    "ml-pipeline-viewer-crd": [("kubernetes", 443)],
    "workflow-controller": [("kubernetes", 443)],
    "seaweedfs": [("seaweedfs", 9333), ("seaweedfs", 8888), ("seaweedfs", 19333)],
    "mysql": [], "ml-pipeline-visualizationserver": [],
    # SeaweedFS-artifact stacks: upstream's per-namespace sync
    "metacontroller": [("kubernetes", 443), ("kubeflow-pipelines-profile-controller", 80)],
    "kubeflow-pipelines-profile-controller": [("seaweedfs", 8111), ("seaweedfs", 8333)],
}


def _peer(peer: dict[str, Any], ns_labels: dict[str, str] | None, pod: dict[str, str] | None, ip: str | None) -> bool:
    if "ipBlock" in peer:
        if ip is None:
            return False
        block = peer["ipBlock"]
        address = ipaddress.ip_address(ip)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except", []))
    if ns_labels is None or pod is None:
        return False
    namespace_ok = matches_selector(peer["namespaceSelector"], ns_labels) if "namespaceSelector" in peer \
        else ns_labels.get(NAME_LABEL) == NS
    return namespace_ok and matches_selector(peer.get("podSelector"), pod)


def egress(policies: list[dict[str, Any]], source: dict[str, str], port: int, protocol: str = "TCP",
           ns_labels: dict[str, str] | None = None, pod: dict[str, str] | None = None, ip: str | None = None,
           namespace: str = NS) -> bool:
    """Whether a pod of `namespace` (`kubeflow`) labelled `source` may connect to the pod (or address) on the port
    (a peer without a namespace selector is read as in `kubeflow`)."""
    selecting = [p["spec"] for p in policies if p["metadata"]["namespace"] == namespace
                 and "Egress" in p["spec"].get("policyTypes", [])
                 and matches_selector(p["spec"]["podSelector"], source)]
    if not selecting:
        return True
    for spec in selecting:
        for rule in spec.get("egress", []):
            ports = rule.get("ports")
            port_ok = not ports or any(p.get("protocol", "TCP") == protocol and p.get("port") == port for p in ports)
            if port_ok and any(_peer(peer, ns_labels, pod, ip) for peer in rule.get("to", [])):
                return True
    return False


def _workloads(capture: Any) -> dict[str, dict[str, str]]:
    """Name -> pod labels of every workload in `kubeflow`."""
    found = {}
    for obj in kube_objects(capture):
        if obj["metadata"].get("namespace") != NS or obj["kind"] not in ("Deployment", "StatefulSet", "CronJob"):
            continue
        spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
        found[obj["metadata"]["name"]] = dict(spec["template"]["metadata"].get("labels") or {})
    return found


def _service(capture: Any, name: str, port: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """The pods a Service of `kubeflow` selects (its selector) and the pod port its port goes to."""
    service = next(o for o in kube_objects(capture, "Service")
                   if o["metadata"].get("namespace") == NS and o["metadata"]["name"] == name)
    target = next(p.get("targetPort", p["port"]) for p in service["spec"]["ports"] if p["port"] == port)
    return tuple(sorted(service["spec"]["selector"].items())), int(target)


@pytest.mark.parametrize("stack", ["onprem-lab", "local", "aws-prod"])
def test_each_pipelines_pod_reaches_what_it_calls(stack: str) -> None:
    capture = capture_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    workloads = {name: labels for name, labels in _workloads(capture).items()
                 if labels.get("application-crd-id") == "kubeflow-pipelines"}
    assert set(workloads) <= set(CALLS), set(workloads) - set(CALLS)  # a new pod: say what it calls
    for name, labels in workloads.items():
        for protocol in ("UDP", "TCP"):
            assert egress(policies, labels, 53, protocol, KUBE_SYSTEM, {"k8s-app": "kube-dns"}), (name, protocol)
        sidecar = labels.get("sidecar.istio.io/inject") != "false"
        assert egress(policies, labels, 15012, "TCP", ISTIO_SYSTEM, {"app": "istiod"}) is sidecar, name
        for service, port in CALLS[name]:
            if service == "kubernetes":
                assert egress(policies, labels, port, ip=API_SERVER_IP), name
                continue
            pods, target = _service(capture, service, port)
            assert egress(policies, labels, target, "TCP", KUBEFLOW, dict(pods)), (name, service, target)
        if not any(service == "kubernetes" for service, _ in CALLS[name]):
            assert not egress(policies, labels, 443, ip=API_SERVER_IP), name  # no network beyond its peers


@pytest.mark.parametrize("stack", ["onprem-lab", "local"])
def test_no_pipelines_pod_reaches_an_unlisted_destination(stack: str) -> None:
    capture = capture_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    workloads = {name: labels for name, labels in _workloads(capture).items()
                 if labels.get("application-crd-id") == "kubeflow-pipelines"}
    team = {NAME_LABEL: "vision", "trainyard.io/team": "vision"}
    for name, labels in workloads.items():
        assert not egress(policies, labels, 8080, "TCP", team, {}), name  # a team's pods
        assert not egress(policies, labels, 8333, "TCP", team, {"app": "seaweedfs"}), name  # a look-alike elsewhere
        assert not egress(policies, labels, 53, "UDP", KUBE_SYSTEM, {"k8s-app": "metrics-server"}), name
        assert not egress(policies, labels, 15010, "TCP", ISTIO_SYSTEM, {"app": "istiod"}), name  # plaintext xDS
        assert not egress(policies, labels, 80, ip="203.0.113.7"), name  # the internet, off the API's ports
        called = {_service(capture, service, port) for service, port in CALLS[name] if service != "kubernetes"}
        for service, port in (("mysql", 3306), ("seaweedfs", 9000), ("ml-pipeline", 8888),
                              ("metadata-grpc-service", 8080), ("seaweedfs", 8111)):
            pods, target = _service(capture, service, port)
            if (pods, target) in called or name == service == "seaweedfs":
                continue
            assert not egress(policies, labels, target, "TCP", KUBEFLOW, dict(pods)), (name, service, port)
    # KServe shares the namespace; its egress is serving's to decide: none of these policies selects it.
    kserve = _workloads(capture)["kserve-controller-manager"]
    assert not any(matches_selector(p["spec"]["podSelector"], kserve) for p in policies
                   if p["metadata"]["namespace"] == NS and "Egress" in p["spec"].get("policyTypes", []))
