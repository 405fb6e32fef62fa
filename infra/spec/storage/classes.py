"""The StorageClasses and VolumeSnapshotClasses a storage profile offers, as plain facts (the cloud modules and
storage.py build them; the platform declares them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# The three classes every profile offers: team datasets and checkpoints (RWX, Retain) and scratch
# (same backend, Delete: drill restores and temporary volumes go away with their namespace).
DATASETS, CHECKPOINTS, SCRATCH, BLOCK = "datasets", "checkpoints", "scratch", "block"


@dataclass(frozen=True)
class Klass:
    """A StorageClass to declare."""

    name: str
    provisioner: str
    parameters: Mapping[str, str]
    reclaim: Literal["Retain", "Delete"]
    binding: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    mount_options: tuple[str, ...] = ()
    expandable: bool = True
    snapshots: bool = True  # the driver implements CSI snapshots (else Velero backs it up by fs-backup)
    static: bool = False  # volumes are pre-created PVs bound to a bucket, not provisioned
    pod_annotations: Mapping[str, str] = field(default_factory=dict)  # what pods mounting its volumes carry


@dataclass(frozen=True)
class SnapshotClass:
    name: str
    driver: str
    parameters: Mapping[str, str] = field(default_factory=dict)
