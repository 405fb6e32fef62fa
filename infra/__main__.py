"""The Pulumi program: load the spec, build the cluster and the platform (each cluster's, in a stack of
several, then MultiKueue between them). Nothing else."""

import pulumi

from infra.cluster import build_cluster
from infra.kit.naming import cluster_scope
from infra.platform import build_burst, build_platform
from infra.spec import KUBECONFIG_KEY, Platform, load_pulumi, secret
from infra.spec.input.keys import (
    ALERT_WEBHOOK_KEY,
    CREDENTIALS_KEY,
    GRAFANA_PASSWORD_KEY,
    MODEL_REGISTRY_DB_PASSWORD_KEY,
    PIPELINES_DB_PASSWORD_KEY,
)
from infra.spec.input.load import worker_kubeconfigs

platform = load_pulumi()
secrets = (secret(CREDENTIALS_KEY), secret(ALERT_WEBHOOK_KEY), secret(GRAFANA_PASSWORD_KEY))


def door_secret(member: Platform) -> pulumi.Output[str] | None:
    """The front door's secret key (the identity provider's), on the cluster that runs the door."""
    return secret(member.front_door.secret_keys[0]) if member.front_door else None


def pipelines_secret(member: Platform) -> pulumi.Output[str] | None:
    return secret(PIPELINES_DB_PASSWORD_KEY) if member.pipelines else None


def registry_secret(member: Platform) -> pulumi.Output[str] | None:
    return secret(MODEL_REGISTRY_DB_PASSWORD_KEY) if member.models else None


if platform.hybrid is None:
    build_platform(platform, build_cluster(platform, secret(KUBECONFIG_KEY)), *secrets, door_secret(platform),
                   pipelines_secret(platform), registry_secret(platform))
else:
    built = {}
    for name, member in platform.hybrid.clusters.items():
        with cluster_scope(name):
            built[name] = build_platform(member, build_cluster(member, secret(KUBECONFIG_KEY)), *secrets,
                                         door_secret(member), pipelines_secret(member), registry_secret(member))
    build_burst(platform, built, worker_kubeconfigs(platform))
    pulumi.export("clusters", {name: member.cluster_name for name, member in platform.hybrid.clusters.items()})
pulumi.export("stack", platform.stack)
pulumi.export("cluster", platform.cluster_name)
pulumi.export("kubernetes", platform.spec.versions.kubernetes)  # the offline engine renders charts for it
