"""ValidatingAdmissionPolicies with their bindings and Pod Security admission, evaluated by the offline API
server on synthetic objects (the stacks' own policies are tested in test_admission_cel.py), and the plan check
that the platform passes its own admission."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver import podsecurity, vap
from infra.apiserver.plan import admission_findings
from infra.apiserver.state import ClusterState

API = "admissionregistration.k8s.io/v1"
QUEUE = "kueue.x-k8s.io/queue-name"
LABELLED = f"(has(object.metadata.labels) && '{QUEUE}' in object.metadata.labels)"


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _policy(**spec: Any) -> dict[str, Any]:
    base = {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"],
                                                    "operations": ["CREATE"]}]},
            "variables": [{"name": "queue", "expression": LABELLED + f" ? object.metadata.labels['{QUEUE}'] : ''"}],
            "validations": [{"expression": LABELLED,
                             "messageExpression": "'job ' + object.metadata.name + ' has no queue'",
                             "message": "no queue", "reason": "Forbidden"}]}
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "queued"},
            "spec": {**base, **spec}}


def _binding(**match: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "queued"},
            "spec": {"policyName": "queued", "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchLabels": {"team": "yes"}}, **match}}}


def _job(namespace: str = "vision", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": namespace,
                                                                  "labels": labels},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}


def _denials(obj: dict[str, Any], *cluster: dict[str, Any], operation: str = "CREATE") -> list[str]:
    state = ClusterState([_namespace("vision", team="yes"), _namespace("ops"), *cluster])
    return [r.message for r in vap.evaluate(vap.Request(obj, operation), state).refusals]


def test_a_bound_policy_denies_with_its_message_expression() -> None:
    assert _denials(_job(), _policy(), _binding()) == [
        "ValidatingAdmissionPolicy 'queued' denied request: job train has no queue"]
    assert _denials(_job(**{QUEUE: "vision"}), _policy(), _binding()) == []


def test_the_namespace_selector_reads_the_target_namespaces_labels() -> None:
    assert _denials(_job("ops"), _policy(), _binding()) == []
    by_name = _binding(namespaceSelector={"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ops"]}]})
    assert _denials(_job("ops"), _policy(), by_name) != []  # the name label Kubernetes sets on every namespace
    assert _denials(_job("vision"), _policy(), by_name) == []


def test_object_selector_operations_and_exclusions() -> None:
    selected = _binding(objectSelector={"matchLabels": {"checked": "yes"}})
    assert _denials(_job(), _policy(), selected) == []
    assert _denials(_job(checked="yes"), _policy(), selected) != []
    assert _denials(_job(), _policy(), _binding(), operation="UPDATE") == []
    excluded = _binding(excludeResourceRules=[{"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"],
                                               "operations": ["*"]}])
    assert _denials(_job(), _policy(), excluded) == []


def test_match_conditions_and_variables() -> None:
    only_named = _policy(matchConditions=[{"name": "named", "expression": "object.metadata.name == 'train'"}])
    assert _denials(_job(), only_named, _binding()) != []
    renamed = _job()
    renamed["metadata"]["name"] = "other"
    assert _denials(renamed, only_named, _binding()) == []
    by_variable = _policy(validations=[{"expression": "variables.queue == 'vision'", "message": "wrong queue"}])
    assert _denials(_job(**{QUEUE: "vision"}), by_variable, _binding()) == []
    assert _denials(_job(**{QUEUE: "nlp"}), by_variable, _binding()) == [
        "ValidatingAdmissionPolicy 'queued' denied request: wrong queue"]


def test_validation_actions_and_failure_policy() -> None:
    warn = _binding()
    warn["spec"]["validationActions"] = ["Warn"]
    state = ClusterState([_namespace("vision", team="yes"), _policy(), warn])
    outcome = vap.evaluate(vap.Request(_job()), state)
    assert outcome.refusals == [] and len(outcome.warnings) == 1
    broken = [{"expression": "object.spec.nothing.here == 1", "message": "m"}]
    assert _denials(_job(), _policy(validations=broken), _binding())[0].endswith(")")  # an error denies (Fail)
    assert _denials(_job(), _policy(validations=broken, failurePolicy="Ignore"), _binding()) == []


def test_a_policy_this_interpreter_cannot_read_is_listed_not_skipped() -> None:
    optional = _policy(validations=[{"expression": f"object.metadata.?labels[?'{QUEUE}'].hasValue()", "message": "m"}])
    state = ClusterState([_namespace("vision", team="yes"), optional, _binding()])
    outcome = vap.evaluate(vap.Request(_job()), state)
    assert outcome.refusals == [] and [u.where for u in outcome.unchecked] == ["ValidatingAdmissionPolicy/queued"]


def test_the_platform_check_reports_each_denial_as_an_error() -> None:
    findings = admission_findings([_namespace("vision", team="yes"), _policy(), _binding(), _job()])
    assert [(f.check, f.subject, f.severity) for f in findings] == [("admission-policy", "Job/vision/train", "error")]
    assert admission_findings([_namespace("vision", team="yes"), _policy(), _binding(), _job(**{QUEUE: "q"})]) == []


# --- Pod Security ----------------------------------------------------------------------------------------

def _pod(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "image": "i", "securityContext": {
                         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}, **container}]}}


def _psa(obj: dict[str, Any], level: str) -> list[str]:
    state = ClusterState([_namespace("vision", **{"pod-security.kubernetes.io/enforce": level})])
    return [r.line() for r in podsecurity.review(obj, state)]


def test_a_restricted_pod_passes_every_level() -> None:
    for level in ("privileged", "baseline", "restricted"):
        assert _psa(_pod(), level) == []


@pytest.mark.parametrize(("change", "baseline_refuses"), [
    ({"hostNetwork": True}, True),
    ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, True),
    ({"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}, False),
])
def test_pod_level_rules(change: dict[str, Any], baseline_refuses: bool) -> None:
    pod = _pod()
    pod["spec"].update(change)
    assert bool(_psa(pod, "baseline")) is baseline_refuses
    assert _psa(pod, "restricted")
    assert _psa(pod, "privileged") == []


@pytest.mark.parametrize(("context", "baseline_refuses"), [
    ({"privileged": True}, True),
    ({"capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}, True),
    ({"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}, False),
    ({"allowPrivilegeEscalation": True}, False),
    ({"runAsUser": 0}, False),
    ({"capabilities": {"drop": ["NET_RAW"]}}, False),
])
def test_container_rules(context: dict[str, Any], baseline_refuses: bool) -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["securityContext"].update(context)
    assert bool(_psa(pod, "baseline")) is baseline_refuses
    assert _psa(pod, "restricted")


def test_net_bind_service_is_the_one_capability_restricted_allows() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE"]
    assert _psa(pod, "restricted") == []


def test_host_ports_and_workload_templates() -> None:
    job = _job()
    job["spec"]["template"]["spec"] = copy.deepcopy(_pod(ports=[{"containerPort": 80, "hostPort": 80}])["spec"])
    lines = _psa(job, "baseline")
    assert len(lines) == 1 and "its Pods would be refused" in lines[0] and "hostPort=80" in lines[0]
