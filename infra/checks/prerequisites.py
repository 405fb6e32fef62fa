"""Requires and provides, over a captured stack: every need of the platform has a provider (the cloud cluster,
the site's declaration, or the platform's own charts), and every API group the platform declares objects of is
either built into Kubernetes or a stated need, so that a component adding a custom resource cannot skip
saying what it needs; and every Ingress is served: an Ingress, and the one cert-manager creates for each ACME
http01 challenge (the solver's `ingressClassName`), names an IngressClass the stack declares, without which no
controller serves it and the certificate is never issued (the front door's `istio` class:
infra/platform/frontdoor.py)."""

from __future__ import annotations

from infra.checks.context import Context
from infra.components import ISTIO
from infra.spec import Finding
from infra.spec.prerequisites import SNAPSHOT_GROUP

# API groups every conformant cluster serves.
BUILT_IN_GROUPS = frozenset({
    "", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io",
    "storage.k8s.io", "admissionregistration.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io",
    "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "flowcontrol.apiserver.k8s.io",
    "certificates.k8s.io", "resource.k8s.io", "apiregistration.k8s.io",
})


def check_prerequisites(ctx: Context) -> list[Finding]:
    prerequisites = ctx.platform.prerequisites
    return [Finding("prerequisites", need.capability, prerequisites.finding_line(need))
            for need in prerequisites.unmet()]


def check_needs_cover_objects(ctx: Context) -> list[Finding]:
    """An object of a non-built-in API group needs that group's CRDs: installed by the plan itself (a declared
    CustomResourceDefinition), or stated as a need (crd:<group>, volume-snapshots for snapshot classes)."""
    needed = {need.capability for need in ctx.platform.prerequisites.needs}
    provided = ctx.platform.prerequisites.provided
    declared = list(ctx.declared())
    installed = {obj.get("spec", {}).get("group") for _, obj in declared
                 if obj.get("kind") == "CustomResourceDefinition"}
    findings: dict[str, Finding] = {}
    for _, obj in declared:
        group = obj.get("apiVersion", "").rpartition("/")[0]
        if group in BUILT_IN_GROUPS or group in installed or group in findings:
            continue
        capability = "volume-snapshots" if group == SNAPSHOT_GROUP else f"crd:{group}"
        if capability in needed or provided.get(capability, None) is not None:
            continue
        findings[group] = Finding("prerequisites", capability, f"{obj.get('kind')} objects are declared but no "
                                  "platform part states the need for their CRDs: add it to "
                                  "infra/spec/prerequisites.py derive_needs")
    return list(findings.values())


def _named_classes(ctx: Context) -> list[tuple[str, str]]:
    """(who names it, the class name) for every Ingress and http01 ingress solver."""
    named: list[tuple[str, str]] = []
    for obj in ctx.objects():
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name", "")
        if kind == "Ingress" and obj.get("spec", {}).get("ingressClassName"):
            named.append((f"Ingress/{name}", obj["spec"]["ingressClassName"]))
        if kind in ("ClusterIssuer", "Issuer"):
            for solver in obj.get("spec", {}).get("acme", {}).get("solvers", []):
                ingress = solver.get("http01", {}).get("ingress", {})
                if ingress.get("ingressClassName"):
                    named.append((f"{kind}/{name} (its http01 solver's Ingress)", ingress["ingressClassName"]))
    return named


def check_ingress_class(ctx: Context) -> list[Finding]:
    declared = {obj["metadata"]["name"] for obj in ctx.objects() if obj.get("kind") == "IngressClass"}
    return [Finding(ISTIO.name, who, f"names IngressClass '{klass}', which the stack does not declare, so no "
                    f"controller serves it: declare the IngressClass '{klass}' (for the front door's `istio`: "
                    f"controller istio.io/ingress-controller, which {ISTIO.name}'s gateway serves)")
            for who, klass in _named_classes(ctx) if klass not in declared]
