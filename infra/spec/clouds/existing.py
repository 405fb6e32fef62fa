"""An existing cluster (on-prem, or a laptop kind cluster): its nodes are already there, so it has no machine
catalogue or regions; what it provides is what its stack declares (cluster.existing.provides). It runs the
snapshot controller and any autoscaler as pods of its own."""

from __future__ import annotations

from infra.spec.clouds.facts import CloudFacts

FACTS = CloudFacts(
    kind="existing",
    title="existing",
    storage_profile="rook-ceph",
    snapshot_controller_in_cluster=True,
    autoscaler_in_cluster=True,
    audit_store="the API server's log files",
)
