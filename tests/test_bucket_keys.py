"""The team bucket's keys in the team's other namespaces on rook-ceph (issues 30 and 31): one copier owned by the
storage layer (infra/spec/storage/keys.py, infra/platform/storage.py bucket_keys) writes the claim's Secret into
Pipelines' second namespaces and the models namespaces. Its account's rights are read from the rendered RBAC, name
by name; its script runs against a fake kubectl; its pods pass Pod Security `restricted` and reach DNS and the API
server only; its failure alerts. Stacks whose data account reads the bucket by workload identity (aws, gcp), or that
have no team bucket the platform reads (nfs, azure), get none of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.apiserver.podsecurity import restricted
from infra.kit.naming import cluster_scope
from infra.platform.storage import earlier_place
from infra.vocabulary import NAME_LABEL
from tests.conftest import capture_of, kube_objects, platform_of
from tests.test_backup import _fake_kubectl, _named, _run_cron_job
from tests.test_pipelines_egress import egress

ROOK = "rook-ceph"
ACCOUNT = {"kind": "ServiceAccount", "name": "bucket-keys", "namespace": ROOK}
# Written from the stack files, not from the code: team -> (its first namespace, the namespaces that need its keys).
NEEDS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "onprem-lab": {"vision": ("vision", ("vision-models",)), "nlp": ("nlp", ("nlp-models",)),
                   "speech": ("speech", ("speech-eval", "speech-models"))},
    "hybrid-burst": {"vision": ("vision", ("vision-models",)), "nlp": ("nlp", ("nlp-models",))},
}
NO_COPIES = ["aws-prod", "gcp-prod", "azure-prod", "local"]


def _own(stack: str, kind: str) -> list[dict[str, Any]]:
    return kube_objects(capture_of(stack), kind, own=True)


def _rights(stack: str) -> set[tuple[str, str, str, str]]:
    """(verb, namespace, resource, name) the copier's account is granted, read from the rendered bindings; a rule
    without resourceNames is recorded with name '*'."""
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["rules"] for o in _own(stack, "Role")}
    granted = set()
    for binding in _own(stack, "RoleBinding") + _own(stack, "ClusterRoleBinding"):
        if ACCOUNT not in binding["subjects"]:
            continue
        assert binding["kind"] == "RoleBinding" and binding["roleRef"]["kind"] == "Role", binding["metadata"]
        namespace = binding["metadata"]["namespace"]
        for rule in roles[(namespace, binding["roleRef"]["name"])]:
            assert rule["apiGroups"] == [""], rule
            granted |= {(verb, namespace, resource, name) for verb in rule["verbs"] for resource in rule["resources"]
                        for name in rule.get("resourceNames", ["*"])}
    return granted


@pytest.mark.parametrize("stack", sorted(NEEDS))
def test_the_fact_lists_every_namespace_that_needs_the_keys(stack: str) -> None:
    copies = platform_of(stack).storage.key_copies
    assert {c.team: (c.source, tuple(t.namespace for t in c.targets)) for c in copies} == NEEDS[stack]
    assert all(c.secret == f"{c.team}-datasets" for c in copies)
    # KServe's endpoint on the models namespace only: Pipelines' launcher reads its own endpoint from kfp-launcher.
    served = {t.namespace for c in copies for t in c.targets if t.served}
    assert served == {ns for _, targets in NEEDS[stack].values() for ns in targets if ns.endswith("-models")}


@pytest.mark.parametrize("stack", sorted(NEEDS))
def test_the_account_gets_each_claim_secret_and_patches_its_copies_nothing_else(stack: str) -> None:
    expected = {("get", first, "secrets", f"{team}-datasets") for team, (first, _) in NEEDS[stack].items()}
    expected |= {("patch", ns, "secrets", f"{team}-datasets") for team, (_, targets) in NEEDS[stack].items()
                 for ns in targets}
    granted = _rights(stack)
    assert granted == expected
    # What must stay refused: another team's Secret, a copy read back, the claim's own Secret written, any list.
    assert ("get", "vision", "secrets", "nlp-datasets") not in granted
    assert ("patch", "vision-models", "secrets", "nlp-datasets") not in granted
    assert ("get", "vision-models", "secrets", "vision-datasets") not in granted
    assert ("patch", "vision", "secrets", "vision-datasets") not in granted
    assert not {g for g in granted if g[0] in ("list", "watch", "create", "delete", "update") or g[3] == "*"}


@pytest.mark.parametrize("stack", NO_COPIES)
def test_no_copier_where_no_namespace_needs_copied_keys(stack: str) -> None:
    platform = platform_of(stack)
    assert platform.storage.key_copies == ()
    assert _rights(stack) == set()
    names = {o["metadata"]["name"] for o in _own(stack, "CronJob") + _own(stack, "Job") + _own(stack, "Secret")}
    assert not names & {"bucket-keys", "bucket-keys-at-up"} and not any(n.endswith("-datasets") for n in names)
    rules = [r for o in _own(stack, "PrometheusRule") for g in o["spec"]["groups"] for r in g["rules"]]
    assert rules and "BucketKeysNotCopied" not in {r.get("alert") for r in rules}


def _pods(stack: str) -> dict[str, dict[str, Any]]:
    cron = _named(capture_of(stack), "CronJob", "bucket-keys")
    job = _named(capture_of(stack), "Job", "bucket-keys-at-up")
    assert cron["metadata"]["namespace"] == job["metadata"]["namespace"] == ROOK
    return {"cron": cron["spec"]["jobTemplate"]["spec"]["template"], "first run": job["spec"]["template"]}


@pytest.mark.parametrize("stack", sorted(NEEDS))
def test_the_copier_runs_every_ten_minutes_and_once_at_up_in_restricted_pods_without_sidecar(stack: str) -> None:
    cron = _named(capture_of(stack), "CronJob", "bucket-keys")["spec"]
    assert cron["schedule"] == "*/10 * * * *" and cron["concurrencyPolicy"] == "Forbid"
    job = _named(capture_of(stack), "Job", "bucket-keys-at-up")["spec"]
    assert job["backoffLimit"] == 20 and "activeDeadlineSeconds" not in job  # it waits for Rook to bind the claims
    pods = _pods(stack)
    assert pods["cron"] == pods["first run"]  # one script, one account, one image
    for pod in pods.values():
        assert restricted(pod) == []
        assert pod["spec"]["serviceAccountName"] == "bucket-keys"
        assert pod["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
        assert [c["name"] for c in pod["spec"]["containers"]] == ["run"] and "initContainers" not in pod["spec"]
    namespaces = {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in _own(stack, "Namespace")}
    assert "istio-injection" not in namespaces.get(ROOK, {})


def test_the_copier_reaches_dns_and_the_api_server_only() -> None:
    policies = _own("onprem-lab", "NetworkPolicy")
    pod = _pods("onprem-lab")["cron"]["metadata"]["labels"]
    kube_dns = ({NAME_LABEL: "kube-system"}, {"k8s-app": "kube-dns"})
    assert egress(policies, pod, 53, "UDP", *kube_dns, namespace=ROOK)
    assert egress(policies, pod, 443, ip="10.96.0.1", namespace=ROOK)
    assert not egress(policies, pod, 80, ns_labels={NAME_LABEL: ROOK}, pod={"app": "rook-ceph-rgw"}, namespace=ROOK)
    assert not egress(policies, pod, 8080, ns_labels={NAME_LABEL: "vision"}, pod={"app": "x"}, namespace=ROOK)
    assert not egress(policies, pod, 80, ip="203.0.113.7", namespace=ROOK)
    # Rook's own pods in that namespace are not selected (their egress stays Rook's business).
    assert egress(policies, {"app": "rook-ceph-rgw"}, 80, ip="203.0.113.7", namespace=ROOK)


# get: the claim's value of the jsonpath's key (none for the UNBOUND namespace or the MISSING key); patch: recorded.
COPY_KUBECTL = r"""
case "$*" in
  *" get secret "*) key="${7#jsonpath=\{.data.}"; key="${key%\}}"
     [ "$2" = "$UNBOUND" ] || [ "$key" = "$MISSING" ] || printf '%s' "$2-$key" ;;
  *" patch secret "*) echo "$* <- $(cat)" >> "$(dirname "$0")/../patched" ;;
esac
"""


def _copy(tmp_path: Path, unbound: str = "", missing: str = "") -> tuple[int, str, list[str]]:
    cron = _named(capture_of("onprem-lab"), "CronJob", "bucket-keys")
    result = _run_cron_job(cron, {**_fake_kubectl(tmp_path, COPY_KUBECTL), "UNBOUND": unbound, "MISSING": missing})
    patched = tmp_path / "patched"
    lines = patched.read_text().splitlines() if patched.exists() else []
    return result.returncode, result.stdout + result.stderr, lines


def _patch(target: str, team: str) -> str:
    return (f'-n {target} patch secret {team}-datasets --type merge --patch-file /dev/stdin <- {{"data": '
            f'{{"AWS_ACCESS_KEY_ID":"{team}-AWS_ACCESS_KEY_ID","AWS_SECRET_ACCESS_KEY":"{team}-AWS_SECRET_ACCESS_KEY"}}}}')


def test_a_run_copies_each_claims_two_keys_into_every_namespace_that_needs_them(tmp_path: Path) -> None:
    returncode, output, patched = _copy(tmp_path)
    assert returncode == 0, output
    assert sorted(patched) == sorted(_patch(ns, team) for team, (_, targets) in NEEDS["onprem-lab"].items()
                                     for ns in targets)
    assert "-AWS_SECRET_ACCESS_KEY" not in (tmp_path / "calls").read_text()  # values go by stdin, not by arguments


def test_an_unbound_claim_fails_the_run_but_not_the_other_teams(tmp_path: Path) -> None:
    returncode, output, patched = _copy(tmp_path, unbound="speech")
    assert returncode != 0
    assert "no AWS_ACCESS_KEY_ID in speech/speech-datasets yet" in output
    assert sorted(patched) == sorted([_patch("vision-models", "vision"), _patch("nlp-models", "nlp")])


def test_a_claim_missing_one_key_is_not_half_copied(tmp_path: Path) -> None:
    returncode, output, patched = _copy(tmp_path, missing="AWS_SECRET_ACCESS_KEY")
    assert returncode != 0 and "no AWS_SECRET_ACCESS_KEY in vision/vision-datasets yet" in output
    assert patched == []


@pytest.mark.parametrize("stack", sorted(NEEDS))
def test_a_failing_copy_alerts_with_a_runbook(stack: str) -> None:
    rules = {r.get("alert"): r for o in _own(stack, "PrometheusRule") for g in o["spec"]["groups"]
             for r in g["rules"]}
    alert = rules["BucketKeysNotCopied"]
    assert 'namespace="rook-ceph", cronjob="bucket-keys"' in alert["expr"] and "> 1800" in alert["expr"]
    assert alert["annotations"]["runbook_url"].endswith("#bucketkeysnotcopied")
    runbook = (Path(__file__).parent.parent / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "\n### BucketKeysNotCopied\n" in runbook


# The copies' Secrets as the release before the storage layer owned the copier registered them (its plan.json for
# onprem-lab and hybrid-burst): the aliases must name exactly these, or `pulumi up` on a deployed stack creates each
# Secret again under Storage and deletes the old resource, and with it the object and its copied keys.
EARLIER_URNS = {
    ("onprem-lab", ""): {
        "urn:pulumi:onprem-lab::trainyard::trainyard:platform:Serving$kubernetes:core/v1:Secret::"
        "vision-models-vision-datasets",
        "urn:pulumi:onprem-lab::trainyard::trainyard:platform:Serving$kubernetes:core/v1:Secret::"
        "nlp-models-nlp-datasets",
        "urn:pulumi:onprem-lab::trainyard::trainyard:platform:Serving$kubernetes:core/v1:Secret::"
        "speech-models-speech-datasets",
        "urn:pulumi:onprem-lab::trainyard::trainyard:platform:Pipelines$kubernetes:core/v1:Secret::"
        "speech-eval-speech-datasets-keys"},
    ("hybrid-burst", "core"): {
        "urn:pulumi:hybrid-burst::trainyard::trainyard:platform:Serving$kubernetes:core/v1:Secret::"
        "core-vision-models-vision-datasets",
        "urn:pulumi:hybrid-burst::trainyard::trainyard:platform:Serving$kubernetes:core/v1:Secret::"
        "core-nlp-models-nlp-datasets"},
}


def _alias_urn(alias: Any, kind: str) -> str:
    """The URN Pulumi gives an alias with a parent URN: the parent's type chain, then the kind and the name."""
    head, _, _ = alias.parent.rpartition("::")
    return f"{head}${kind}::{alias.name}"


@pytest.mark.parametrize(("stack", "cluster"), sorted(EARLIER_URNS))
def test_each_copy_s_secret_keeps_its_earlier_place_in_a_deployed_stack(stack: str, cluster: str) -> None:
    copies = platform_of(stack).storage.key_copies
    with cluster_scope(cluster):
        urns = {_alias_urn(earlier_place(target, copy.secret, stack, "trainyard"), "kubernetes:core/v1:Secret")
                for copy in copies for target in copy.targets}
    assert urns == EARLIER_URNS[(stack, cluster)]
