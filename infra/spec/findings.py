"""A finding: something `trainyard plan`/`validate` reports about a rendered stack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Finding:
    check: str  # capacity, schema, policy, version, backup, ...
    subject: str  # what it is about: a flavor, a resource "kind/name", a team
    message: str
    severity: Severity = "error"

    def line(self) -> str:
        return f"[{self.severity}] {self.check}: {self.subject}: {self.message}"
