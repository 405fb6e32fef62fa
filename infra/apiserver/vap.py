"""ValidatingAdmissionPolicies with their bindings, evaluated as the API server does
(k8s.io/apiserver/pkg/admission/plugin/policy/validating): a binding applies a policy to a request when the
policy's matchConstraints and the binding's matchResources both match (resource rules with operations,
exclusions, namespace selector on the target namespace's labels, object selector), then every
matchCondition holds; the variables are computed in order, and each failing validation is reported under
the binding's validationActions (Deny refuses, Warn warns, Audit only records). An evaluation error counts
as a failure unless the policy's failurePolicy is Ignore."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from celpy import celtypes

from infra.apiserver.cel import EvalError, Unevaluable, compiled, is_true, to_cel
from infra.apiserver.selectors import matches_selector
from infra.apiserver.state import NAME_LABEL, ClusterState
from infra.apiserver.verdict import Refusal, Unchecked

FAMILY = "admission-policy"
IRREGULAR_PLURALS = {"Endpoints": "endpoints", "Ingress": "ingresses"}


def resource_of(kind: str) -> str:
    """The REST resource of a kind (its lower-case plural)."""
    if kind in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[kind]
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith(("s", "x", "ch", "sh")) else "s")


@dataclass(frozen=True)
class Request:
    """An admission request: the object, what is done to it, and by whom."""

    obj: dict[str, Any]
    operation: str = "CREATE"
    user: str = "trainyard"
    groups: tuple[str, ...] = ("system:authenticated",)

    @property
    def group(self) -> str:
        return str(self.obj.get("apiVersion", "")).rpartition("/")[0]

    @property
    def version(self) -> str:
        return str(self.obj.get("apiVersion", "")).rpartition("/")[2]

    @property
    def namespace(self) -> str:
        return str(self.obj.get("metadata", {}).get("namespace", ""))

    def cel(self) -> dict[str, Any]:
        resource = resource_of(str(self.obj.get("kind", "")))
        return {"operation": self.operation, "namespace": self.namespace,
                "name": self.obj.get("metadata", {}).get("name", ""),
                "resource": {"group": self.group, "version": self.version, "resource": resource},
                "kind": {"group": self.group, "version": self.version, "kind": self.obj.get("kind", "")},
                "userInfo": {"username": self.user, "groups": list(self.groups)}, "dryRun": False}


def _rule_matches(rule: dict[str, Any], request: Request) -> bool:
    def has(values: list[str], value: str) -> bool:
        return "*" in values or value in values
    resource = resource_of(str(request.obj.get("kind", "")))
    return (has(rule.get("apiGroups", []), request.group) and has(rule.get("apiVersions", []), request.version)
            and has(rule.get("resources", []), resource) and has(rule.get("operations", []), request.operation))


def _matches(match: dict[str, Any], request: Request, cluster: ClusterState, require_rules: bool) -> bool:
    """matchConstraints / matchResources: a binding without resourceRules defers to its policy's."""
    rules = match.get("resourceRules", [])
    if (rules or require_rules) and not any(_rule_matches(rule, request) for rule in rules):
        return False
    if any(_rule_matches(rule, request) for rule in match.get("excludeResourceRules", [])):
        return False
    labels = request.obj.get("metadata", {}).get("labels", {})
    if not matches_selector(match.get("objectSelector"), labels):
        return False
    if request.obj.get("kind") == "Namespace":
        namespace_labels = {**labels, NAME_LABEL: request.obj.get("metadata", {}).get("name", "")}
    elif request.namespace:
        namespace_labels = cluster.namespace_labels(request.namespace) or {NAME_LABEL: request.namespace}
    else:
        return True  # other cluster-scoped objects: the namespace selector does not apply
    return matches_selector(match.get("namespaceSelector"), namespace_labels)


class PolicyOutcome:
    def __init__(self) -> None:
        self.refusals: list[Refusal] = []
        self.warnings: list[Refusal] = []
        self.unchecked: list[Unchecked] = []
        self.evaluated = 0


def _run(expression: str, activation: dict[str, Any]) -> Any:
    """The value, or the EvalError the API server would meet (returned, not raised)."""
    try:
        return compiled(expression).run(activation)
    except EvalError as error:
        return error


def evaluate(request: Request, cluster: ClusterState) -> PolicyOutcome:
    """Every binding of the cluster's policies that applies to the request."""
    outcome = PolicyOutcome()
    converted: dict[str, Any] = {}  # the request in CEL values: converted once, for the first policy that applies
    policies = {p.get("metadata", {}).get("name"): p for p in cluster.of_kind("ValidatingAdmissionPolicy")}
    for binding in sorted(cluster.of_kind("ValidatingAdmissionPolicyBinding"),
                          key=lambda b: str(b.get("metadata", {}).get("name"))):
        spec = binding.get("spec", {})
        policy = policies.get(spec.get("policyName"))
        if policy is None:
            continue  # a binding to a missing policy admits (the API server treats it as not found)
        policy_spec = policy.get("spec", {})
        if not (_matches(policy_spec.get("matchConstraints", {}), request, cluster, require_rules=True)
                and _matches(spec.get("matchResources", {}), request, cluster, require_rules=False)):
            continue
        try:
            if not converted:
                converted.update(object=to_cel(request.obj), request=to_cel(request.cel()))
            _apply(str(policy["metadata"]["name"]), policy_spec, spec.get("validationActions", []), converted,
                   outcome)
        except Unevaluable as error:
            outcome.unchecked.append(Unchecked(f"ValidatingAdmissionPolicy/{policy['metadata']['name']}",
                                               "", str(error)))
    return outcome


def _apply(name: str, spec: dict[str, Any], actions: list[str], converted: dict[str, Any],
           outcome: PolicyOutcome) -> None:
    if spec.get("paramKind"):
        raise Unevaluable("policies with params (paramKind) are not evaluated offline")
    fail_closed = spec.get("failurePolicy", "Fail") == "Fail"
    activation: dict[str, Any] = {**converted, "oldObject": None, "params": None}
    for condition in spec.get("matchConditions", []):
        result = _run(condition["expression"], activation)
        if isinstance(result, EvalError):
            if fail_closed:
                _report(name, actions, f"matchCondition {condition.get('name')!r} failed: {result}", "", outcome)
            return
        if not is_true(result):
            return
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        activation["variables"] = _cel_map(variables)
        variables[variable["name"]] = _run(variable["expression"], activation)
    activation["variables"] = _cel_map(variables)
    for validation in spec.get("validations", []):
        outcome.evaluated += 1
        result = _run(validation["expression"], activation)
        if is_true(result):
            continue
        if isinstance(result, EvalError):
            if not fail_closed:
                continue
            message = f"{validation.get('message') or validation['expression']} (evaluation error: {result})"
        else:
            message = _message(validation, activation)
        _report(name, actions, message, validation.get("reason", "Invalid"), outcome)


def _cel_map(values: dict[str, Any]) -> celtypes.MapType:
    return celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})


def _message(validation: dict[str, Any], activation: dict[str, Any]) -> str:
    if validation.get("messageExpression"):
        text = _run(validation["messageExpression"], activation)
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return str(text)
    return str(validation.get("message") or f"failed expression: {validation['expression']}")


def _report(name: str, actions: list[str], message: str, reason: str, outcome: PolicyOutcome) -> None:
    refusal = Refusal(FAMILY, "", f"ValidatingAdmissionPolicy '{name}' denied request: {message}", reason)
    if "Deny" in actions:
        outcome.refusals.append(refusal)
    if "Warn" in actions:
        outcome.warnings.append(refusal)
