"""The Pulumi program: load the spec, build the cluster and the platform. Nothing else."""

import pulumi

from infra.cluster import build_cluster
from infra.platform import build_platform
from infra.spec import load_pulumi, secret_kubeconfig

platform = load_pulumi()
cluster = build_cluster(platform, secret_kubeconfig())
build_platform(platform, cluster)
pulumi.export("stack", platform.stack)
pulumi.export("cluster", platform.cluster_name)
