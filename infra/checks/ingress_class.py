"""Every Ingress is served: an Ingress, and the one cert-manager creates for each ACME http01 challenge (the
solver's `ingressClassName`), names an IngressClass the stack declares. Without it no controller serves the
Ingress, the ACME server never sees its token, and the certificate is never issued (the front door's `istio`
class: infra/platform/frontdoor.py)."""

from __future__ import annotations

from infra.checks.context import Context
from infra.components import ISTIO
from infra.spec import Finding


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
