"""The pack's tenancy rules: risky platform changes a pull request could slip in. Each judges the registered
objects (never the stack file), so a change to a component is caught whatever its author intended.

- tenant-rbac: a tenant bound to the built-in admin/edit roles, or to a role that escalates (escalate, bind,
  impersonate, serviceaccounts/token, `*` verbs); anyone granted Secret reads cluster-wide.
- tenant-network: an Ingress in a team namespace; a NetworkPolicy rule open to every peer on every port.
- team-pod-security: a team namespace not enforcing restricted/baseline Pod Security; a training runtime
  that runs privileged, on host namespaces or paths, with added capabilities, host ports, or as root.
- no-private-keys: a private key in a ConfigMap.
- queue-isolation: a ClusterQueue whose namespace selector is empty (every namespace may use its quota);
  a PriorityClass that is a global default or above every priority the platform declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, StackValidationArgs

from infra.vocabulary import PSA_PREFIX, TEAM_LABEL, containers, pod_specs
from policies.kube import from_chart, get, items, kind_of, meta, objects, team_namespaces, tenant_subjects

BUILT_IN_BROAD = frozenset({"admin", "edit"})  # cluster-admin: no-tenant-cluster-admin
ESCALATING_VERBS = frozenset({"escalate", "bind", "impersonate", "*"})
READS = frozenset({"get", "list", "watch", "*"})
PRIVATE_KEY = "PRIVATE KEY-----"
TRAINING_RUNTIMES = ("ClusterTrainingRuntime", "TrainingRuntime")
ALLOWED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})


def _strings(value: Any) -> set[str]:
    return {str(v) for v in items(value)}


def _roles(resources: Any) -> dict[tuple[str, str], list[Any]]:
    found = {}
    for kind in ("Role", "ClusterRole"):
        for role in objects(resources, kind):
            namespace, name, _ = meta(role.props)
            found[(kind, name if kind == "ClusterRole" else f"{namespace}/{name}")] = items(role.props.get("rules"))
    return found


def _escalates(rules: list[Any]) -> str:
    for rule in rules:
        verbs, resources = _strings(get(rule, "verbs")), _strings(get(rule, "resources"))
        if verbs & ESCALATING_VERBS:
            return f"verbs {', '.join(sorted(verbs & ESCALATING_VERBS))}"
        if "serviceaccounts/token" in resources and "create" in verbs:
            return "serviceaccounts/token create (mints tokens)"
    return ""


def _reads_secrets(rules: list[Any]) -> bool:
    return any(_strings(get(rule, "apiGroups")) & {"", "*"} and _strings(get(rule, "resources")) & {"secrets", "*"}
               and _strings(get(rule, "verbs")) & READS and not items(get(rule, "resourceNames")) for rule in rules)


def tenant_rbac(args: StackValidationArgs, report: ReportViolation) -> None:
    admins = {str(g) for g in items(args.get_config().get("adminGroups"))}
    tenants_ns = team_namespaces(args.resources)
    roles = _roles(args.resources)
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in objects(args.resources, kind):
            namespace, name, _ = meta(binding.props)
            ref = get(binding.props, "roleRef")
            ref_kind, ref_name = str(get(ref, "kind") or ""), str(get(ref, "name") or "")
            rules = roles.get((ref_kind, ref_name if ref_kind == "ClusterRole" else f"{namespace}/{ref_name}"), [])
            where = f"{kind} {'/'.join(filter(None, (namespace, name)))}"
            # An upstream controller's own RBAC (an object the pinned chart renders) is reviewed with the chart's
            # rendered diff at each bump; this rule judges the bindings this repository writes.
            if kind == "ClusterRoleBinding" and _reads_secrets(rules) and not from_chart(binding):
                report(f"{where} lets {ref_name} read Secrets in every namespace: bind it per namespace, to "
                       "named Secrets", binding.urn)
            tenants = tenant_subjects(binding.props.get("subjects"), namespace, tenants_ns, admins)
            if not tenants:
                continue
            if ref_kind == "ClusterRole" and ref_name in BUILT_IN_BROAD:
                report(f"{where} grants the built-in role {ref_name} to {', '.join(tenants)}: bind the persona "
                       "roles instead", binding.urn)
            elif reason := _escalates(rules):
                report(f"{where} grants {ref_name} ({reason}) to {', '.join(tenants)}: tenants may not "
                       "escalate, bind or impersonate", binding.urn)


def _open_peer(peer: Any) -> bool:
    if get(peer, "ipBlock", "cidr") in ("0.0.0.0/0", "::/0"):
        return True
    selectors = [get(peer, "namespaceSelector"), get(peer, "podSelector")]
    present = [s for s in selectors if s is not None]
    return bool(present) and get(peer, "namespaceSelector") is not None and all(
        not get(s, "matchLabels") and not items(get(s, "matchExpressions")) for s in present)


def _allow_all(rule: Any, field: str) -> bool:
    peers = items(get(rule, field))
    return not items(get(rule, "ports")) and (not peers or any(_open_peer(p) for p in peers))


def tenant_network(args: StackValidationArgs, report: ReportViolation) -> None:
    teams = team_namespaces(args.resources)
    for ingress in objects(args.resources, "Ingress"):
        namespace, name, _ = meta(ingress.props)
        if namespace in teams:
            report(f"Ingress {namespace}/{name} exposes a team namespace: services stay cluster-internal",
                   ingress.urn)
    for policy in objects(args.resources, "NetworkPolicy"):
        namespace, name, _ = meta(policy.props)
        for direction, field in (("ingress", "from"), ("egress", "to")):
            if any(_allow_all(rule, field) for rule in items(get(policy.props, "spec", direction))):
                report(f"NetworkPolicy {namespace}/{name} allows all {direction} (every peer, every port): name "
                       "the peers and ports of the flow", policy.urn)


def runtime_escapes(spec: Mapping[str, Any]) -> list[str]:
    """What in a complete pod spec leaves the restricted profile (the admission policy refuses the same)."""
    found = [field for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field) is True]
    found += ["hostPath volume" for v in items(spec.get("volumes")) if get(v, "hostPath") is not None]
    pod_context = spec.get("securityContext") or {}
    for container in containers(spec):
        context = container.get("securityContext") or {}
        if context.get("privileged") is True:
            found.append(f"privileged container {container.get('name')}")
        added = _strings(get(context, "capabilities", "add")) - ALLOWED_CAPABILITIES
        if added:
            found.append(f"capabilities {', '.join(sorted(added))}")
        if any(get(port, "hostPort") for port in items(container.get("ports"))):
            found.append("hostPort")
        non_root = context.get("runAsNonRoot", get(pod_context, "runAsNonRoot"))
        if non_root is not True or context.get("runAsUser", get(pod_context, "runAsUser")) == 0:
            found.append(f"container {container.get('name')} may run as root")
    return found


def team_pod_security(args: StackValidationArgs, report: ReportViolation) -> None:
    for ns in objects(args.resources, "Namespace"):
        _, name, labels = meta(ns.props)
        level = str(labels.get(f"{PSA_PREFIX}/enforce", ""))
        if TEAM_LABEL in labels and level not in ("restricted", "baseline"):
            report(f"team namespace {name} enforces Pod Security '{level or 'nothing'}': use restricted (or "
                   "baseline with a reason)", ns.urn)
    for resource in args.resources:
        kind = kind_of(resource.resource_type)
        if kind in TRAINING_RUNTIMES:
            escapes = sorted({e for spec in pod_specs(kind, resource.props) for e in runtime_escapes(spec)})
            if escapes:
                report(f"{kind} {meta(resource.props)[1]} runs with {'; '.join(escapes)}: tenants' jobs would "
                       "inherit it", resource.urn)


def no_private_keys(args: StackValidationArgs, report: ReportViolation) -> None:
    for config_map in objects(args.resources, "ConfigMap"):
        data = get(config_map.props, "data")
        keys = [key for key in (data if isinstance(data, Mapping) else {}) if PRIVATE_KEY in str(data[key])]
        if keys:
            namespace, name, _ = meta(config_map.props)
            report(f"ConfigMap {'/'.join(filter(None, (namespace, name)))} holds a private key in "
                   f"{', '.join(sorted(keys))}: keep keys in a Secret", config_map.urn)


def queue_isolation(args: StackValidationArgs, report: ReportViolation) -> None:
    for queue in objects(args.resources, "ClusterQueue"):
        selector = get(queue.props, "spec", "namespaceSelector")
        if selector is not None and not get(selector, "matchLabels") and not items(get(selector, "matchExpressions")):
            report(f"ClusterQueue {meta(queue.props)[1]} selects every namespace: name the team's namespaces",
                   queue.urn)
    ceiling = max((int(get(p.props, "value") or 0) for p in objects(args.resources, "WorkloadPriorityClass")),
                  default=0)
    for priority in objects(args.resources, "PriorityClass"):
        value, name = int(get(priority.props, "value") or 0), meta(priority.props)[1]
        default = get(priority.props, "globalDefault") is True
        if default or value > ceiling:
            report(f"PriorityClass {name} (value {value}{', global default' if default else ''}) outranks the "
                   f"platform's priorities (highest {ceiling}): pods using it preempt training outside Kueue",
                   priority.urn)
