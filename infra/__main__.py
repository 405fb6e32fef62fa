"""The Pulumi program: load the spec, build the cluster and the platform. Nothing else."""

import pulumi

from infra.cluster import build_cluster
from infra.platform import build_platform
from infra.spec import KUBECONFIG_KEY, load_pulumi, secret
from infra.spec.keys import ALERT_WEBHOOK_KEY, CREDENTIALS_KEY, GRAFANA_PASSWORD_KEY

platform = load_pulumi()
cluster = build_cluster(platform, secret(KUBECONFIG_KEY))
build_platform(platform, cluster, secret(CREDENTIALS_KEY), secret(ALERT_WEBHOOK_KEY), secret(GRAFANA_PASSWORD_KEY))
pulumi.export("stack", platform.stack)
pulumi.export("cluster", platform.cluster_name)
pulumi.export("kubernetes", platform.spec.versions.kubernetes)  # the offline engine renders charts for it
