"""The Amazon Managed Service for Prometheus workspace a stack asks for (observability.managedPrometheus) and the
identity the in-cluster Prometheus writes to it with. Prometheus signs with SigV4 (`sigv4.region`, credentials from
the default chain: the EKS Pod Identity agent, as for every other pod identity of this cluster) as a role allowed
`aps:RemoteWrite` on this workspace only. The platform only adds the remote write the contract describes."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infra.cluster.eks.addons import pod_role, policy
from infra.kit.contract import RemoteWrite, WorkloadIdentity
from infra.spec import Platform
from infra.spec.observability import PROMETHEUS_ACCOUNT


def amazon_managed_prometheus(platform: Platform, region: str, after: Sequence[pulumi.Resource],
                              opts: pulumi.ResourceOptions) -> tuple[RemoteWrite, WorkloadIdentity]:
    """`after`: the Pod Identity agent add-on the association needs."""
    namespace, account = PROMETHEUS_ACCOUNT
    workspace = aws.amp.Workspace("prometheus", alias=platform.cluster_name, opts=opts)
    role = pod_role("prometheus-remote-write", opts, inline=workspace.arn.apply(lambda arn: policy([
        {"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": arn}])))
    aws.eks.PodIdentityAssociation(
        "identity-prometheus", cluster_name=platform.cluster_name, namespace=namespace, service_account=account,
        role_arn=role.arn,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(after))))
    url = workspace.prometheus_endpoint.apply(lambda endpoint: f"{endpoint.rstrip('/')}/api/v1/remote_write")
    return RemoteWrite(url=url, auth={"sigv4": {"region": region}}), WorkloadIdentity()
