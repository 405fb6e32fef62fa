"""Rules that can be loosened in ways their own tests did not see, each pinned from both sides: the MultiKueue
account on a worker bound to its own role and nothing more; the team DNS egress reaching kube-dns and no other
kube-system pod; plaintext secrets found inside lists; chart values checked at three levels and deeper."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from infra.checks.hybrid import rbac_findings
from infra.offline import charts
from infra.offline.charts import Source, unknown_keys
from infra.offline.clusters import split
from infra.platform.kueue import NAMESPACE as KUEUE_NAMESPACE
from infra.platform.multikueue import ACCOUNT
from infra.spec import SpecError, load_file
from infra.spec.input.load import PLATFORM_KEY
from infra.spec.input.secrets import plaintext_secret_paths
from infra.spec.versions import Chart
from infra.vocabulary import TEAM_LABEL
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, write_stack
from tests.netpol import Pod, connects
from tests.test_charts import _archive

# --- the MultiKueue account on a worker --------------------------------------------------------------------


@functools.cache
def _worker_objects() -> tuple[dict[str, Any], ...]:
    stack = "hybrid-burst"
    parts = split(platform_of(stack), capture_of(stack))
    return tuple(r.inputs for r in parts["burst"][1].resources if r.custom and r.type.startswith("kubernetes:")
                 and "helm.sh" not in r.type and "providers" not in r.type)


def _binding(name: str, role: str, subjects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects}


ACCOUNT_SUBJECT = {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": KUEUE_NAMESPACE}


def test_the_worker_as_rendered_binds_the_account_to_its_own_role_only() -> None:
    assert rbac_findings("burst", list(_worker_objects())) == []


@pytest.mark.parametrize("role", ["cluster-admin", "admin", "edit", "view", ACCOUNT])
def test_a_second_binding_for_the_account_is_refused(role: str) -> None:
    extra = _binding("multikueue-extra", role, [ACCOUNT_SUBJECT])
    found = rbac_findings("burst", [*_worker_objects(), extra])
    assert len(found) == 1 and f"bound to {ACCOUNT} only" in found[0].message and role in found[0].message


def test_a_second_binding_naming_the_account_among_others_is_refused() -> None:
    extra = _binding("ops", "cluster-admin", [{"kind": "Group", "name": "ops"}, ACCOUNT_SUBJECT])
    assert rbac_findings("burst", [*_worker_objects(), extra])


def test_a_binding_for_another_account_of_the_same_name_elsewhere_is_not_the_managers() -> None:
    """The edge: the same name in another namespace is another ServiceAccount."""
    other = _binding("other", "cluster-admin", [{**ACCOUNT_SUBJECT, "namespace": "default"}])
    assert rbac_findings("burst", [*_worker_objects(), other]) == []


def test_no_binding_for_the_account_is_refused() -> None:
    objs = [o for o in _worker_objects() if not (o["kind"] == "ClusterRoleBinding"
                                                   and ACCOUNT_SUBJECT in o.get("subjects", []))]
    assert any("not nothing" in f.message for f in rbac_findings("burst", objs))


# --- team DNS egress ---------------------------------------------------------------------------------------


def _dns_egress_allowed(policies: list[dict[str, Any]], namespace: str, target: Pod, protocol: str,
                        port: int) -> bool:
    """Whether a pod (no labels) of a team namespace may send to `target` by its own namespace's egress policies:
    the target's ingress is left out (kube-system's own policies, if any, are not what is under test)."""
    own = [p for p in policies if p["metadata"]["namespace"] == namespace]
    return connects(own, Pod(namespace), target, port, protocol)


KUBE_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})


@pytest.mark.parametrize("stack", STACKS)
def test_team_pods_resolve_names_at_kube_dns_and_reach_no_other_kube_system_pod(stack: str) -> None:
    policies = kube_objects(capture_of(stack), "NetworkPolicy")
    for team in platform_of(stack).teams:
        for namespace in team.namespaces:
            for protocol in ("UDP", "TCP"):
                assert _dns_egress_allowed(policies, namespace, KUBE_DNS, protocol, 53), (namespace, protocol)
                # Any other kube-system pod on the DNS port: the kube-dns selector is what keeps it out.
                for labels in ({"k8s-app": "metrics-server"}, {"component": "kube-apiserver"}, {}):
                    other_pod = Pod("kube-system", labels)
                    assert not _dns_egress_allowed(policies, namespace, other_pod, protocol, 53), (namespace, labels)
            assert not _dns_egress_allowed(policies, namespace, KUBE_DNS, "TCP", 80), namespace
            # A pod labelled as kube-dns outside kube-system (a tenant can label its own pods) is no resolver.
            impostor = Pod("impostor", KUBE_DNS.labels, {TEAM_LABEL: "someone-else"})
            assert not _dns_egress_allowed(policies, namespace, impostor, "UDP", 53), namespace


# --- plaintext secrets inside lists ------------------------------------------------------------------------

TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"  # a GitHub token's published format (36 characters after ghp_)


def _config(edit: Any) -> dict[str, Any]:
    raw = raw_platform("onprem-lab")
    edit(raw)
    return {PLATFORM_KEY: raw}


def test_a_token_in_a_group_list_is_found_where_it_is() -> None:
    def put(raw: dict[str, Any]) -> None:
        raw["teams"]["vision"]["groups"]["analysts"] = ["vision-read", TOKEN]
    assert [path for path, _ in plaintext_secret_paths(_config(put))] == [
        f"{PLATFORM_KEY}.teams.vision.groups.analysts[1]"]


def test_a_token_in_a_group_list_is_refused_when_the_stack_is_loaded(tmp_path: Path) -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["groups"]["analysts"] = ["nlp-read", TOKEN]
    with pytest.raises(SpecError) as error:
        load_file(write_stack(tmp_path, raw))
    assert f"{PLATFORM_KEY}.teams.nlp.groups.analysts[1]" in str(error.value)


@pytest.mark.parametrize("value", [
    [["nested", TOKEN]],  # a list in a list
    [{"name": "x", "url": "https://user:hunter2@example.com/repo"}],  # a mapping in a list
    [{"password": "hunter2"}],  # a secret-like key in a mapping in a list
])
def test_secrets_are_found_at_any_depth_of_lists(value: list[Any]) -> None:
    config = {PLATFORM_KEY: {"anything": value}}
    assert plaintext_secret_paths(config), value


def test_a_list_of_plain_group_names_is_clean() -> None:
    assert plaintext_secret_paths(_config(lambda raw: None)) == []
    config = {PLATFORM_KEY: {"groups": ["vision-read", "ghp_short", "https://example.com/a:b"]}}
    assert plaintext_secret_paths(config) == []


# --- chart values three levels deep ------------------------------------------------------------------------

DEFAULTS = {"a": {"b": {"c": 1, "free": {}, "d": {"e": "x"}}}, "top": 1}


@pytest.mark.parametrize(("values", "unknown"), [
    ({"a": {"b": {"c": 2}}}, []),  # a known key three levels deep
    ({"a": {"b": {"x": 2}}}, ["a.b.x"]),  # an unknown one, named by its whole path
    ({"a": {"b": {"c": 2, "x": 2, "y": 3}}}, ["a.b.x", "a.b.y"]),
    ({"a": {"b": {"d": {"e": "y", "f": 1}}}}, ["a.b.d.f"]),  # four levels
    ({"a": {"b": {"free": {"anything": {"at": "all"}}}}}, []),  # a free-form map three levels down
    ({"a": {"x": {"c": 1}}}, ["a.x"]),  # the first unknown level is named, not what lies below it
])
def test_unknown_values_keys_three_levels_deep_are_named_by_their_whole_path(
        values: dict[str, Any], unknown: list[str]) -> None:
    assert list(unknown_keys(values, copy.deepcopy(DEFAULTS))) == unknown


def _three_level_chart(tmp_path: Path, template_reads: str) -> Path:
    values_yaml = b"a:\n  b:\n    c: 1\n"
    template = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n"
                f"  c: '{{{{ .Values.a.b.c }}}}'\n{template_reads}").encode()
    return _archive(tmp_path / "deep-0.1.0.tgz", {"deep/Chart.yaml": b"apiVersion: v2\nname: deep\nversion: 0.1.0\n",
                                                  "deep/values.yaml": values_yaml,
                                                  "deep/templates/probe.yaml": template})


@pytest.mark.parametrize(("template_reads", "problems"), [
    ("", ["values.a.b.x: not in the chart's values.yaml (Helm ignores it)"]),
    ("  x: '{{ .Values.a.b.x }}'\n", []),  # values.yaml leaves it out, but a template reads it
])
def test_the_chart_values_check_reports_an_unknown_key_three_levels_deep(
        tmp_path: Path, template_reads: str, problems: list[str]) -> None:
    archive = _three_level_chart(tmp_path, template_reads)
    source = Source("kubernetes:helm.sh/v4:Chart::deep", "deep", "deep-ns", Chart("deep", "", "0.1.0"),
                    {"a": {"b": {"c": 2, "x": 3}}})
    _, _, found = charts._render_now(source, archive, "1.34", [])
    assert list(found) == problems
