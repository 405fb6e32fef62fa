"""The offline API server over a whole plan: every object the platform renders goes through the rules the live
API server would apply to it. The CRDs' CEL rules and the operators' webhooks run as rules of the policy pack
(policies/apiserver_rules.py), under `pulumi preview` and in `trainyard validate` alike; the stack's own admission
policies and Pod Security are a plan check here. Each refusal names object, field path and the rule's message;
each rule that cannot be evaluated offline is listed, not skipped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.apiserver import crd_rules, podsecurity, vap, webhooks
from infra.apiserver.schema import CrdIndex
from infra.apiserver.state import ClusterState
from infra.apiserver.verdict import Refusal, Unchecked, subject
from infra.spec import Finding
from infra.spec.versions import Versions


def _findings(obj: dict[str, Any], refusals: list[Refusal]) -> list[Finding]:
    return [Finding(r.family, subject(obj), f"{r.field}: {r.message}" if r.field else r.message) for r in refusals]


def unchecked_findings(family: str, unchecked: set[Unchecked]) -> list[Finding]:
    return [Finding(family, u.where, f"rule not evaluated offline ({u.why}): {u.rule}", "warning")
            for u in sorted(unchecked)]


def crd_cel_refusals(objects: Sequence[dict[str, Any]], index: CrdIndex) -> list[tuple[int, Refusal]]:
    """The pinned CRDs' CEL rules on every custom resource: (position of the object, refusal)."""
    found = []
    for position, obj in enumerate(objects):
        schema = index.schema(obj.get("apiVersion", ""), obj.get("kind", ""))
        if schema is not None:  # the schema check reports custom resources without a CRD
            found += [(position, refusal) for refusal in crd_rules.evaluate(obj, schema).refusals]
    return found


def unevaluable_crd_rules(objects: Sequence[dict[str, Any]], index: CrdIndex) -> list[Unchecked]:
    """The CEL rules of the CRDs these objects use that cannot be evaluated offline, whatever the objects hold."""
    kinds = sorted({(str(o.get("apiVersion", "")), str(o.get("kind", ""))) for o in objects})
    schemas = [(kind, index.schema(api_version, kind)) for api_version, kind in kinds]
    return sorted({u for kind, schema in schemas if schema is not None for u in crd_rules.unevaluable(kind, schema)})


def webhook_refusals(objects: Sequence[dict[str, Any]], versions: Versions) -> list[tuple[int, Refusal]]:
    """The webhook rules of the pinned Kueue, Trainer and JobSet minors on every object they would see:
    (position of the object, refusal). The rules read the other objects as the cluster they run in."""
    rules, _ = webhooks.rules_for(versions)
    cluster = ClusterState(objects)
    return [(position, refusal) for position, obj in enumerate(objects)
            for refusal in webhooks.review(obj, cluster, rules)]


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
