"""The hybrid checks' rules pinned from both sides (infra/checks/hybrid.py): the MultiKueue account's rights on a
worker (every right it needs, none it does not, each RBAC field tried for a wildcard), what a dispatched job needs
on the worker (its LocalQueue, the same priorities, the runtimes it names), the worker's kubeconfig on the manager.

Every case edits the objects of the session's hybrid-burst run (tests/conftest.py capture_of): no engine run."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from infra.checks.context import StackContext
from infra.checks.hybrid import (
    check_worker_kubeconfig,
    check_worker_mirror,
    check_worker_rbac,
    mirror_findings,
    needed_rules,
    rbac_findings,
)
from infra.components import KUEUE_FRAMEWORKS, KUEUE_JOB_KINDS
from infra.platform.kueue import NAMESPACE as KUEUE_NAMESPACE
from infra.platform.multikueue import ACCOUNT
from infra.spec import Finding
from tests.conftest import capture_of, platform_of

STACK = "hybrid-burst"
SUBJECT = f"burst: ClusterRole/{ACCOUNT}"
Objs = list[dict[str, Any]]


@functools.cache
def _stack() -> StackContext:
    return StackContext(platform_of(STACK), capture_of(STACK))


def _core() -> Objs:
    return list(_stack().parts["core"])


def _burst() -> Objs:
    return list(_stack().parts["burst"])


def _edited(parts: dict[str, Objs]) -> StackContext:
    """The stack with some clusters' objects replaced (parts is computed once and cached on the instance)."""
    stack = StackContext(platform_of(STACK), capture_of(STACK))
    stack.__dict__["parts"] = {**_stack().parts, **parts}
    return stack


def _is_role(obj: dict[str, Any]) -> bool:
    return obj["kind"] == "ClusterRole" and obj["metadata"]["name"] == ACCOUNT


def _with_rules(rules: list[dict[str, Any]], objs: Objs | None = None) -> Objs:
    """The worker's objects with the account's ClusterRole holding `rules`."""
    return [{**o, "rules": rules} if _is_role(o) else o for o in (objs if objs is not None else _burst())]


def _rules() -> list[dict[str, Any]]:
    return [dict(rule) for o in _burst() if _is_role(o) for rule in o["rules"]]


def _binding(name: str, role: str, subjects: list[dict[str, Any]] | None) -> dict[str, Any]:
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}}
    return binding if subjects is None else {**binding, "subjects": subjects}


ACCOUNT_SUBJECT = {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": KUEUE_NAMESPACE}
WRITE = "create, update, patch, delete, get, list, watch"


# --- the account's rights on the worker ---------------------------------------------------------------------

def test_the_rights_needed_are_workloads_and_every_integrated_job_kind_with_its_status() -> None:
    """Kueue v0.19.2 test/util/multikueue.go: Workloads with their status, and each integrated kind."""
    needed = {(group, resource): verbs for group, resource, verbs in needed_rules()}
    assert needed[("kueue.x-k8s.io", "workloads")] == tuple(WRITE.split(", "))
    assert needed[("kueue.x-k8s.io", "workloads/status")] == ("get", "patch", "update")
    for framework in KUEUE_FRAMEWORKS:
        group, resource = KUEUE_JOB_KINDS[framework]
        assert needed[(group, resource)] == tuple(WRITE.split(", ")) and needed[(group, f"{resource}/status")] == (
            "get",)
    assert {resource for _, resource in needed} >= {"jobs", "jobsets", "trainjobs"}


@pytest.mark.parametrize(("group", "resource", "verbs"), [
    ("kueue.x-k8s.io", "workloads", WRITE), ("kueue.x-k8s.io", "workloads/status", "get, patch, update"),
    ("batch", "jobs", WRITE), ("batch", "jobs/status", "get"),
    ("jobset.x-k8s.io", "jobsets", WRITE), ("jobset.x-k8s.io", "jobsets/status", "get"),
    ("trainer.kubeflow.org", "trainjobs", WRITE), ("trainer.kubeflow.org", "trainjobs/status", "get")])
def test_each_right_taken_away_is_one_finding_naming_it(group: str, resource: str, verbs: str) -> None:
    rules = [r for r in _rules() if not (r["apiGroups"] == [group] and r["resources"] == [resource])]
    assert len(rules) == len(_rules()) - 1
    assert rbac_findings("burst", _with_rules(rules)) == [Finding(
        "multikueue", SUBJECT, f"lacks {verbs} on {resource}.{group}: MultiKueue cannot dispatch or follow that kind "
        "there")]


def test_one_verb_short_is_refused_and_rights_split_over_rules_add_up() -> None:
    trainjobs = {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"]}
    others = [r for r in _rules() if r["resources"] != ["trainjobs"]]
    short = [*others, {**trainjobs, "verbs": ["create", "update", "patch", "delete", "get", "list"]}]
    assert [f.message.split(":")[0] for f in rbac_findings("burst", _with_rules(short))] == [
        "lacks watch on trainjobs.trainer.kubeflow.org"]
    split_rules = [*others, {**trainjobs, "verbs": ["create", "update", "patch", "delete"]},
                   {**trainjobs, "verbs": ["get", "list", "watch"]}]
    assert rbac_findings("burst", _with_rules(split_rules)) == []


@pytest.mark.parametrize("moved", [{"apiGroups": ["kubeflow.org"]}, {"resources": ["trainingruntimes"]}])
def test_a_right_on_the_resource_in_another_group_or_another_resource_of_the_group_is_not_that_right(
        moved: dict[str, Any]) -> None:
    rules = [{**r, **moved} if r["resources"] == ["trainjobs"] else r for r in _rules()]
    assert [f.message.split(":")[0] for f in rbac_findings("burst", _with_rules(rules))] == [
        f"lacks {WRITE} on trainjobs.trainer.kubeflow.org"]


@pytest.mark.parametrize("rule", [
    {"apiGroups": ["*"], "resources": ["configmaps"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["*"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
    {"nonResourceURLs": ["/metrics"], "verbs": ["*"]}])
def test_a_wildcard_in_any_field_is_refused(rule: dict[str, Any]) -> None:
    assert rbac_findings("burst", _with_rules([*_rules(), rule])) == [Finding(
        "multikueue", SUBJECT, f"rule {rule} has a wildcard: name the groups, resources and verbs MultiKueue uses")]


def test_a_named_extra_right_and_a_non_resource_rule_are_not_wildcards() -> None:
    """A rule has API groups and resources, or non-resource URLs and neither (Kubernetes refuses both in one)."""
    extra = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
             {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]
    assert rbac_findings("burst", _with_rules([*extra, *_rules()])) == []


@pytest.mark.parametrize("role", [None, {}])
def test_a_missing_role_or_one_without_rules_lacks_every_right(role: dict[str, Any] | None) -> None:
    objs = [o for o in _burst() if not _is_role(o)]
    if role is not None:
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": ACCOUNT},
                     **role})
    found = rbac_findings("burst", objs)
    assert [f.message.split(":")[0] for f in found] == [
        f"lacks {', '.join(verbs)} on {resource}.{group}" for group, resource, verbs in needed_rules()]
    assert len(found) == 8 and {(f.check, f.subject, f.severity) for f in found} == {("multikueue", SUBJECT, "error")}


def test_every_other_binding_of_the_account_is_named_and_bindings_without_subjects_are_not_its() -> None:
    extras = [_binding("ops", "cluster-admin", [ACCOUNT_SUBJECT]), _binding("empty", "view", None),
              _binding("more", "edit", [{"kind": "Group", "name": "ops"}, ACCOUNT_SUBJECT])]
    assert rbac_findings("burst", [*_burst(), *extras]) == [Finding(
        "multikueue", SUBJECT, f"the manager's ServiceAccount {KUEUE_NAMESPACE}/{ACCOUNT} must be bound to {ACCOUNT} "
        f"only, not {ACCOUNT}, cluster-admin, edit")]
    assert rbac_findings("burst", [*_burst(), _binding("empty", "cluster-admin", None)]) == []


def test_the_stack_check_names_the_worker_whose_account_has_too_much() -> None:
    burst = [*_burst(), _binding("ops", "cluster-admin", [ACCOUNT_SUBJECT])]
    assert [f.subject for f in check_worker_rbac(_edited({"burst": burst}))] == [SUBJECT]
    assert check_worker_rbac(_stack()) == []


# --- what a dispatched job needs on the worker --------------------------------------------------------------

def test_a_missing_local_queue_and_a_shifted_priority_are_errors_naming_both_sides() -> None:
    burst = [o for o in _burst() if not (o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "nlp"
                                         and o["metadata"]["name"] == "burst")]
    burst = [{**o, "value": 999} if o["kind"] == "WorkloadPriorityClass" and o["metadata"]["name"] == "production"
             else o for o in burst]
    errors = [f for f in mirror_findings("burst", _core(), burst) if f.severity == "error"]
    assert errors == [
        Finding("multikueue", "burst: LocalQueue nlp/burst", "dispatched jobs keep their namespace and queue name, "
                "but the worker has no such LocalQueue"),
        Finding("multikueue", "burst: WorkloadPriorityClass production", "value 1000 on the manager, 999 on the "
                "worker: priorities must mean the same on both")]


def _runtimes(objs: Objs) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs if o["kind"] == "ClusterTrainingRuntime")


def _runtime_warning(names: list[str]) -> Finding:
    return Finding("multikueue", "burst: ClusterTrainingRuntimes", f"{', '.join(names)} exist on the manager only "
                   "(pool variants): a burst job naming one stays pending on the worker; burst jobs name the base "
                   "runtimes", severity="warning")


def test_runtimes_only_on_the_manager_are_its_pool_variants_and_a_warning() -> None:
    """The manager's pool is h100, the worker's p5: the h100 variants are the manager's only, the base runtimes are
    on both."""
    variants = [name for name in _runtimes(_core()) if "h100" in name]
    assert len(variants) > 1 and [f for f in mirror_findings("burst", _core(), _burst())] == [
        _runtime_warning(variants)]
    assert check_worker_mirror(_stack()) == [_runtime_warning(variants)]
    mirrored = [*_burst(), *[o for o in _core() if o["kind"] == "ClusterTrainingRuntime" and "h100" in
                             o["metadata"]["name"]]]
    assert mirror_findings("burst", _core(), mirrored) == []


# --- the worker's kubeconfig on the manager -----------------------------------------------------------------

def test_the_kubeconfig_secret_in_kueues_namespace_and_nowhere_else_answers_the_warning() -> None:
    unset = [Finding("multikueue", "burst: MultiKueueCluster burst", "no kubeconfig: set it with `pulumi config set "
                     "--secret trainyard:multikueue-burst < burst.kubeconfig` (docs/hybrid.md); until then nothing "
                     "bursts", severity="warning")]
    assert check_worker_kubeconfig(_stack()) == unset

    def secret(namespace: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "multikueue-burst", "namespace": namespace}}
    assert check_worker_kubeconfig(_edited({"core": [*_core(), secret(KUEUE_NAMESPACE)]})) == []
    assert check_worker_kubeconfig(_edited({"core": [*_core(), secret("default")]})) == unset
