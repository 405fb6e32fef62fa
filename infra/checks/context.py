"""What a plan check reads. Kept apart from the catalogue so that a check module imports this and nothing of the
catalogue: the catalogue imports every check, never the other way round.

A cluster check reads one cluster's part of the run (Context); a stack check (scope "stack") reads the whole run
of a stack of several clusters and each cluster's objects (StackContext).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from infra.apiserver.schema import CrdIndex
from infra.offline.clusters import split
from infra.offline.engine import Capture, Registration
from infra.offline.plan import objects
from infra.spec import Platform

CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"


@dataclass(frozen=True)
class Context:
    """One cluster: its validated spec, its part of the run, and the CRDs its custom resources are checked against."""

    platform: Platform
    capture: Capture
    crds: CrdIndex | None

    @cached_property
    def _records(self) -> list[tuple[Registration, dict[str, Any]]]:
        # read once per cluster: twenty checks walk the same objects
        return objects(self.capture)

    def records(self) -> list[tuple[Registration, dict[str, Any]]]:
        """Every Kubernetes object the stack creates with the registration that declares it."""
        return list(self._records)

    def objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the stack creates: ours and what its charts install."""
        return [obj for _, obj in self._records]

    def declared(self) -> Iterator[tuple[Registration, dict[str, Any]]]:
        """Every Kubernetes object: declared directly, or inside a ConfigGroup's `objs`."""
        yield from self._records
        for record in self.capture.resources:
            if record.type == CONFIG_GROUP:
                for obj in record.inputs.get("objs", []):
                    yield record, obj

    def of_kind(self, kind: str) -> list[tuple[Registration, dict[str, Any]]]:
        return [(record, obj) for record, obj in self.declared() if obj.get("kind") == kind]


@dataclass(frozen=True)
class StackContext:
    """A whole stack (several clusters): the manager's validated spec (with every member's under `hybrid`), the
    whole run, and each cluster's objects by cluster name."""

    platform: Platform
    capture: Capture

    @cached_property
    def parts(self) -> dict[str, list[dict[str, Any]]]:
        parts = split(self.platform, self.capture)
        return {name: [obj for _, obj in objects(part)] for name, (_, part) in parts.items()}

    def workers(self) -> list[str]:
        """The worker clusters' names; none in a stack of one cluster."""
        return list(self.platform.hybrid.workers) if self.platform.hybrid else []
