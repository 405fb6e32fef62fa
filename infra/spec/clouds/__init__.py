"""The clusters Trainyard knows, one module of facts each (aws.py for EKS, gcp.py for GKE, azure.py for AKS,
existing.py for on-prem and kind), in one registry keyed by the cluster kind (the key under `cluster:`). Every
fact that differs by cloud is read from here; the code that creates each cluster is in infra/cluster/<kind>/.

To add a cloud: a module here with its cluster section model and its FACTS, a line in CLOUDS, its key in
infra/spec/cluster.py ClusterSpec, its storage profile in infra/spec/storage/model.py (Profile, a StorageSpec
section), and its folder and line in infra/cluster/ (CLOUD_COMPONENTS)."""

from __future__ import annotations

from infra.spec.clouds import aws, azure, existing, gcp
from infra.spec.clouds.facts import CloudFacts, CloudStorage, IdentityMechanism, Machine, lookup

__all__ = ["CLOUDS", "CLOUD_STORAGE", "MACHINES", "VELERO_PLUGINS", "CloudFacts", "CloudStorage",
           "IdentityMechanism", "Machine", "machine", "pod_credentials"]

CLOUDS: dict[str, CloudFacts] = {facts.kind: facts for facts in (existing.FACTS, aws.FACTS, gcp.FACTS, azure.FACTS)}

# The clouds' storage profiles by profile name (aws, gcp, azure).
CLOUD_STORAGE: dict[str, CloudStorage] = {f.storage.profile: f.storage for f in CLOUDS.values() if f.storage}
# Velero's object-store plugin image per Velero provider.
VELERO_PLUGINS: dict[str, str] = {s.velero_provider: s.velero_plugin for s in CLOUD_STORAGE.values()}
# Every cloud machine by its name (instance type, machine type, VM size).
MACHINES: dict[str, Machine] = {m.name: m for facts in CLOUDS.values() for m in facts.machines}


def machine(name: str) -> Machine:
    """The catalog entry for an instance type of any cloud; a ValueError suggests the nearest known names."""
    return lookup(name, MACHINES)


def pod_credentials(kind: str, profile: str) -> tuple[tuple[str, int], ...]:
    """Where a cluster's pods fetch their workload identity's credentials (range, TCP port) when the stack's storage
    is the cloud's object store; none otherwise."""
    return CLOUDS[kind].pod_credentials if profile in CLOUD_STORAGE else ()
