"""GKE: Filestore instances join the VPC network their StorageClass names; nodes on another network cannot mount
them (the volume provisions, the pod hangs in ContainerCreating)."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.clouds.gcp import vpc_name

FILESTORE = "filestore.csi.storage.gke.io"


def check_filestore_network(ctx: Context) -> list[Finding]:
    gke = ctx.platform.spec.cluster.gke
    if gke is None:
        return []
    vpc = vpc_name(gke, ctx.platform.cluster_name)
    return [Finding("storage", "storage.gcp.network", f"StorageClass {obj['metadata']['name']} puts Filestore "
                    f"instances on network '{obj['parameters'].get('network')}', not the cluster's VPC '{vpc}': "
                    "remove storage.gcp.network (the cluster's VPC is the default) or name that VPC")
            for obj in ctx.objects() if obj.get("kind") == "StorageClass" and obj.get("provisioner") == FILESTORE
            and obj.get("parameters", {}).get("network") != vpc]
