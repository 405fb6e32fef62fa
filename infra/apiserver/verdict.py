"""The words of the offline API server's answers: a refusal (which rule family, where, why) and a rule that
could not be evaluated offline (listed, never skipped silently)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Refusal:
    family: str  # crd-cel, webhook:<component>, admission-policy, pod-security, queue
    field: str  # field path in the object ("" when about the whole object)
    message: str
    reason: str = "Invalid"

    def line(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.family}: {where}{self.message}"


@dataclass(frozen=True, order=True)
class Unchecked:
    where: str  # the CRD kind and schema node, or the policy
    rule: str
    why: str


def subject(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')}/{namespace}{meta.get('name')}"
