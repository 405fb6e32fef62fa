"""Our patches to the vendored Kubeflow Model Registry 0.3.7 (Kubeflow Platform 26.03,
applications/model-registry/upstream/overlays/db) that infra/platform/models/registry.py renders into each team's
models namespace: plain data, each with the reason the upstream object does not fit as shipped (docs/models.md lists
what is used, patched and replaced). Used: the overlay's server (REST, `embedmd` on MySQL) and its MySQL. Not used:
options/istio (its VirtualService, DestinationRule and allow-all AuthorizationPolicy name the `kubeflow` namespace; our
route and policies are per team), options/ui, options/csi (its storage initializer is `:latest`), the controller and
the catalog.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from infra.components import MODEL_REGISTRY
from infra.platform.frontdoor_patches import Patch, json6902, merge
from infra.spec.base import parse_quantity
from infra.spec.models.model import ModelsFacts

DB_SECRET, = MODEL_REGISTRY.secrets  # model-registry-db-secrets: MYSQL_USER_NAME, MYSQL_ROOT_PASSWORD
DB_USER = "root"  # the overlay's user (its DSN and readiness probe log in as MYSQL_USER_NAME)
DB_PORT = 3306
DB_CLAIM = "metadata-mysql"
# The overlay's Deployments, their containers and their pods' labels.
SERVER, DATABASE = "model-registry-deployment", "model-registry-db"
SERVER_CONTAINER, DATABASE_CONTAINER = "rest-container", "db-container"
SERVER_PODS = {"component": "model-registry-server"}
DATABASE_PODS = {"component": "db"}
# Docker Hub's short name, fully qualified (the same image): `trainyard images` lists what a mirror needs.
MYSQL_IMAGE = "docker.io/library/mysql:8.3"
SERVER_IMAGE = "ghcr.io/kubeflow/model-registry/server"  # the overlay's, at `v<models.registry.version>`
# Upstream sets none (kubeflow-platform reference §7.6). They count in the models namespace's quota: the server idles
# at a few MiB (Go, one REST process); MySQL 8's buffer pool alone is 128 MiB. Memory limits only: a CPU limit would
# throttle the database under load for no isolation gain (the quota bounds requests).
RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    SERVER: {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    DATABASE: {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
}
_CONTAINERS = {SERVER: SERVER_CONTAINER, DATABASE: DATABASE_CONTAINER}


def registry_images(facts: ModelsFacts) -> list[str]:
    """The registry's images, as its pods run them: what the platform's admission must admit in a models namespace
    (infra/platform/admission.py platform_images)."""
    return [f"{SERVER_IMAGE}:v{facts.registry_version}", MYSQL_IMAGE]


def registry_requests() -> dict[str, Decimal]:
    """What one team's registry requests in all (server and database: one replica each), per resource."""
    total: dict[str, Decimal] = {}
    for resources in RESOURCES.values():
        for resource, amount in resources["requests"].items():
            total[resource] = total.get(resource, Decimal(0)) + parse_quantity(amount)
    return total


def _deployment(name: str, **pod: Any) -> Patch:
    container = {"name": _CONTAINERS[name], "resources": RESOURCES[name], **pod.pop("container", {})}
    return merge("apps/v1", "Deployment", name, None,
                 spec={**pod.pop("spec", {}), "template": {"spec": {"containers": [container]}}})


def registry_patches(facts: ModelsFacts) -> list[Patch]:
    """- The database's parameters: no MYSQL_ALLOW_EMPTY_PASSWORD (the root password is always set, from ours).
    - Its Secret (root / `test`) is dropped: registry.py writes each team's own, same name and keys.
    - Its claim on the stack's class and size (models.registry.database, a Retain class; retained on delete).
    - Images: spelled here (the same as the overlay's), so that admission admits exactly what runs.
    - Requests and limits on both (above). The server rolls over without a surge pod (maxSurge 0): the namespace's
      quota holds exactly one server's requests beyond the serving budget, so a surge pod would be refused and the
      rollout would stall; the REST API is away for the seconds a restart takes.
    - The server's pod label `sidecar.istio.io/inject: "true"` goes: team namespaces are outside Istio's injection
      whatever a pod asks (infra/platform/frontdoor_patches.py), so it would be a request nobody grants; no pod
      template of the platform asks for a sidecar outside Pipelines' namespace. Neither pod gets one (the gateway
      reaches the server in plain HTTP, as it reaches Grafana), and PSA `restricted` holds as rendered."""
    klass, size = facts.database
    return [
        json6902("ConfigMap", "model-registry-db-parameters", [
            {"op": "remove", "path": "/data/MYSQL_ALLOW_EMPTY_PASSWORD"}]),
        merge("v1", "Secret", DB_SECRET, None, **{"$patch": "delete"}),
        merge("v1", "PersistentVolumeClaim", DB_CLAIM, None,
              spec={"storageClassName": klass, "resources": {"requests": {"storage": size}}}),
        _deployment(DATABASE, container={"image": MYSQL_IMAGE}),
        _deployment(SERVER, container={"image": registry_images(facts)[0]}, spec={"strategy": {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}),
        json6902("Deployment", SERVER, [
            {"op": "remove", "path": "/spec/template/metadata/labels/sidecar.istio.io~1inject"}]),
    ]
