"""How `trainyard accept` reaches HTTP services in a team's namespaces: through the relay (relay_program.py), a pod
in the run's namespace that the team's network policies admit as the team's own, itself reached through the API
server's service proxy as verify reaches Prometheus. A direct service proxy to a team's pod would come from the API
server, which the team's default-deny policies refuse (they admit only namespaces labelled with the team)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from infra.accept.kube import Kube
from infra.accept.runner import Run
from infra.platform.web.binder import RESTRICTED_CONTAINER, RESTRICTED_POD
from infra.spec.versions import WEB_BINDER_IMAGE

NAME = "accept-relay"
PORT = 8080
PROGRAM = Path(__file__).with_name("relay_program.py")
READY_POLL = 5.0


def objects(namespaces: list[str]) -> list[dict[str, Any]]:
    """The program's ConfigMap, the pod (a Python image the platform already runs: the web binder's) and its
    Service; it serves only `namespaces`."""
    labels = {"app": NAME}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME},
         "data": {"relay.py": PROGRAM.read_text(encoding="utf-8")}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": NAME, "labels": labels}, "spec": {
            "securityContext": copy.deepcopy(RESTRICTED_POD),  # the binder's: copies, so no caller changes those
            "containers": [{
                "name": "relay", "image": WEB_BINDER_IMAGE, "command": ["python", "/relay/relay.py"],
                "env": [{"name": "RELAY_NAMESPACES", "value": ",".join(namespaces)}],
                "ports": [{"name": "http", "containerPort": PORT}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),
                "volumeMounts": [{"name": "program", "mountPath": "/relay", "readOnly": True}]}],
            "volumes": [{"name": "program", "configMap": {"name": NAME}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "labels": labels},
         "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]}},
    ]


class Relayed:
    """Calls to services of the team's namespaces, through the relay in the run's namespace."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace

    def call(self, method: str, namespace: str, service: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.kube.proxy(method, self.namespace, f"{NAME}:{PORT}", f"{namespace}/{service}/{path.lstrip('/')}",
                               body)


def relay(run: Run, namespaces: list[str]) -> Relayed:
    """The run's relay, started once (the run's namespace goes at the end of the run, and the relay with it)."""
    if not any(p["metadata"]["name"] == NAME for p in run.kube.pods(run.namespace, f"app={NAME}")):
        for obj in objects(namespaces):
            run.kube.create(run.namespace, obj)

    def ready() -> bool | None:
        pods = run.kube.pods(run.namespace, f"app={NAME}")
        return True if any(c.get("type") == "Ready" and c.get("status") == "True" for p in pods
                           for c in p.get("status", {}).get("conditions", []) or []) else None

    run.wait(f"the relay pod {run.namespace}/{NAME} Ready", ready, READY_POLL)
    return Relayed(run.kube, run.namespace)
