"""The offline API server's checks in `trainyard plan`/`validate`: every object the platform renders goes
through the rules the live API server would apply to it; each refusal is an error naming object, field
path and the rule's message; each rule that cannot be evaluated offline is a warning (listed, not skipped)."""

from __future__ import annotations

from typing import Any

from infra.offline.schema import CrdIndex, is_custom
from infra.spec import Finding
from infra.spec.versions import Versions

from . import crd_rules, podsecurity, vap, webhooks
from .state import ClusterState
from .verdict import Refusal, Unchecked, subject


def _findings(obj: dict[str, Any], refusals: list[Refusal]) -> list[Finding]:
    return [Finding(r.family, subject(obj), f"{r.field}: {r.message}" if r.field else r.message) for r in refusals]


def unchecked_findings(family: str, unchecked: set[Unchecked]) -> list[Finding]:
    return [Finding(family, u.where, f"rule not evaluated offline ({u.why}): {u.rule}", "warning")
            for u in sorted(unchecked)]


def crd_cel_findings(objects: list[dict[str, Any]], index: CrdIndex | None) -> list[Finding]:
    """The pinned CRDs' CEL rules on every custom resource (schemas come from the pinned CRD directories)."""
    if index is None:
        return []
    findings: list[Finding] = []
    unchecked: set[Unchecked] = set()
    for obj in objects:
        schema = index.schema(obj.get("apiVersion", ""), obj.get("kind", "")) if is_custom(obj, index) else None
        if schema is None:
            continue  # the schema check reports custom resources without a CRD
        outcome = crd_rules.evaluate(obj, schema)
        findings += _findings(obj, outcome.refusals)
        unchecked.update(outcome.unchecked)
    return findings + unchecked_findings("crd-cel", unchecked)


def webhook_findings(objects: list[dict[str, Any]], versions: Versions) -> list[Finding]:
    """The pinned Kueue, Trainer and JobSet webhooks' rules on every object they would see."""
    rules, missing = webhooks.rules_for(versions)
    cluster = ClusterState(objects)
    findings = [f for obj in objects for f in _findings(obj, webhooks.review(obj, cluster, rules))]
    return findings + unchecked_findings("webhook", set(missing))


def admission_findings(objects: list[dict[str, Any]]) -> list[Finding]:
    """The stack's own ValidatingAdmissionPolicies (with their bindings) and Pod Security on every object the
    platform creates, each as a CREATE by the platform: the platform must pass its own admission."""
    cluster = ClusterState(objects)
    findings: list[Finding] = []
    unchecked: set[Unchecked] = set()
    for obj in objects:
        outcome = vap.evaluate(vap.Request(obj), cluster)
        findings += _findings(obj, outcome.refusals + podsecurity.review(obj, cluster))
        findings += [Finding(w.family, subject(obj), w.message, "warning") for w in outcome.warnings]
        unchecked.update(outcome.unchecked)
    return findings + unchecked_findings(vap.FAMILY, unchecked)
