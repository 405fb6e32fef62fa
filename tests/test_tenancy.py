"""Tenancy: every team namespace, as rendered, is isolated and bounded the way its declaration says."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.components import GATEWAY_PEER, MONITORING
from infra.kit.manifests import ManifestLoader
from infra.platform.network import INITIALIZER_PODS
from infra.platform.tenancy import PROFILE_OWNER
from infra.spec import SpecError, validate
from infra.spec.base import parse_quantity
from infra.spec.pools import GPU_RESOURCE
from tests.conftest import CRDS, STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_selected

PSA = "pod-security.kubernetes.io"
TEAM_LABEL = "trainyard.io/team"
TRAINER_VALUES = CRDS.parent / "upstream-values" / "kubeflow-trainer-2.2.1-values.yaml"
def _monitoring_pods(peer: dict[str, Any]) -> bool:
    """Named pods of the platform's monitoring namespace (Prometheus scraping the predictors, the registry
    exporter reading a team's registry), never a whole namespace."""
    return bool(peer.get("podSelector", {}).get("matchLabels")) and peer.get("namespaceSelector") == {
        "matchLabels": {"kubernetes.io/metadata.name": MONITORING.namespace}}


def _manifests(tmp_path: Path, stack: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The rendered manifests/ tree, walked from disk: namespace folder -> kind -> objects (the Namespaces and
    the team namespaces' folders: the charts' CRDs, most of the bytes, are no team's)."""
    teams = {ns for _, ns in _team_namespaces(stack)}
    write_selected(capture_of(stack), tmp_path, lambda record: record.inputs.get("kind") == "Namespace" or (
        record.inputs.get("metadata") or {}).get("namespace") in teams)
    root = tmp_path / "manifests"
    paths = [*root.glob("_cluster/Namespace-*.yaml"),
             *(path for _, ns in _team_namespaces(stack) for path in (root / ns).glob("*.yaml"))]
    tree: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for path in sorted(paths):
        obj = yaml.load(path.read_text(encoding="utf-8"), Loader=ManifestLoader)
        tree.setdefault(path.parent.name, {}).setdefault(obj["kind"], []).append(obj)
    return tree


def _team_namespaces(stack: str) -> Iterator[tuple[str, str]]:
    spec = platform_of(stack).spec
    for team in spec.teams:
        for ns in spec.namespaces(team):
            yield team, ns


def _one(objs: list[dict[str, Any]], name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, f"{name} in {namespace}: {len(found)}"
    return found[0]


@pytest.mark.parametrize("stack", STACKS)
def test_every_team_namespace_has_quota_limits_default_deny_and_psa(stack: str, tmp_path: Path) -> None:
    tree = _manifests(tmp_path, stack)
    pairs = list(_team_namespaces(stack))
    for team, ns in pairs:
        namespace = _one(tree["_cluster"]["Namespace"], ns)
        labels = namespace["metadata"]["labels"]
        assert labels[TEAM_LABEL] == team
        assert labels[f"{PSA}/enforce"] in ("restricted", "baseline")
        assert labels[f"{PSA}/warn"] == labels[f"{PSA}/audit"] == "restricted"
        objects = tree[ns]
        hard = objects["ResourceQuota"][0]["spec"]["hard"]
        for key in ("requests.cpu", "requests.memory", "pods", "services", "configmaps", "secrets",
                    "persistentvolumeclaims", "requests.storage"):
            assert key in hard, f"{ns}: quota has no {key}"
        if any(f.gpu_resources for f in platform_of(stack).flavors):
            assert f"requests.{GPU_RESOURCE}" in hard
        defaults = [limit for lr in objects["LimitRange"] for limit in lr["spec"]["limits"]]
        assert any(d["type"] == "Container" and d.get("defaultRequest") for d in defaults)
        deny = [p for p in objects["NetworkPolicy"]
                if p["spec"]["podSelector"] == {} and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
                and not p["spec"].get("ingress") and not p["spec"].get("egress")]
        assert deny, f"{ns}: no default-deny NetworkPolicy"
        assert any(sa["metadata"]["name"] == "trainyard-ci" for sa in objects["ServiceAccount"])
    assert len(pairs) == len({ns for _, ns in pairs})


@pytest.mark.parametrize("stack", STACKS)
def test_no_policy_opens_a_namespace_to_another_team(stack: str) -> None:
    """Ingress only from the team's own namespaces; egress to other namespaces only DNS and the Trainer. In a models
    namespace also the front door's gateway pods (to the registry), pods of the namespace itself (the registry's
    server to its database) and named monitoring pods (the predictors' metrics, the registry exporter): none is another
    team's."""
    spec = platform_of(stack).spec
    team_of = {ns: team for team, ns in _team_namespaces(stack)}
    models = platform_of(stack).models
    registries = {t.namespace for t in models.teams} if models else set()
    for policy in kube_objects(capture_of(stack), "NetworkPolicy"):
        ns = policy["metadata"]["namespace"]
        if ns not in team_of:
            continue
        for rule in policy["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                platform_peer = peer == GATEWAY_PEER or set(peer) == {"podSelector"} or _monitoring_pods(peer)
                if ns in registries and platform_peer:
                    continue
                assert peer == {"namespaceSelector": {"matchLabels": {TEAM_LABEL: team_of[ns]}}}, (ns, peer)
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                selector = peer.get("namespaceSelector", {}).get("matchLabels", {})
                if TEAM_LABEL in selector:
                    assert selector[TEAM_LABEL] == team_of[ns]
                elif selector:
                    target = selector["kubernetes.io/metadata.name"]
                    assert target not in team_of, f"{ns} may reach team namespace {target}"
                else:
                    assert set(peer) == {"ipBlock"}, (ns, peer)
    assert spec.teams or not team_of


def test_trainer_status_server_is_reachable_on_the_upstream_port() -> None:
    if not TRAINER_VALUES.is_file():
        pytest.skip(f"{TRAINER_VALUES} not present")
    port = yaml.safe_load(TRAINER_VALUES.read_text(encoding="utf-8"))["manager"]["config"]["statusServer"]["port"]
    capture = capture_of("onprem-lab")
    chart = next(r for r in capture.resources if r.type.startswith("kubernetes:helm.sh/")
                 and "kubeflow-trainer" in str(r.inputs.get("chart")))
    for _, ns in _team_namespaces("onprem-lab"):
        allowed = [(peer, p) for policy in kube_objects(capture, "NetworkPolicy")
                   if policy["metadata"]["namespace"] == ns for rule in policy["spec"].get("egress", [])
                   for peer in rule.get("to", []) for p in rule.get("ports", [])]
        trainer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": chart.inputs["namespace"]}}}
        assert (trainer, {"protocol": "TCP", "port": port}) in allowed, ns


def _egress_blocks(capture: Any, ns: str, name: str) -> list[tuple[str, list[int]]]:
    policy = _one(kube_objects(capture, "NetworkPolicy"), name, ns)
    return [(peer["ipBlock"]["cidr"], [p["port"] for p in rule["ports"]])
            for rule in policy["spec"]["egress"] for peer in rule["to"]]


def test_object_storage_egress_follows_the_declaration() -> None:
    capture = capture_of("onprem-lab")
    # Undeclared: no egress out of the cluster at all, on any stack (the Ceph RGW has its own in-cluster rule). Only
    # the runtimes' initializer pods may go anywhere (on 443), where the stack declares the Hub that way
    # (egress.modelHub: the Hugging Face Hub publishes no ranges).
    for stack in STACKS:
        for policy in kube_objects(capture_of(stack), "NetworkPolicy"):
            if policy["metadata"]["name"] == "allow-model-hub":
                assert policy["spec"]["podSelector"] == INITIALIZER_PODS
                continue
            if policy["metadata"]["namespace"] in {ns for _, ns in _team_namespaces(stack)}:
                for rule in policy["spec"].get("egress", []):
                    assert not any(peer.get("ipBlock", {}).get("cidr") in ("0.0.0.0/0", "::/0")
                                   for peer in rule.get("to", [])), (stack, policy["metadata"])
    assert not [p for p in kube_objects(capture, "NetworkPolicy") if p["metadata"]["name"] == "allow-object-storage"
                and p["metadata"]["namespace"] != "velero"]
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["objectStorage"] = [{"cidr": "10.40.0.0/16", "ports": [443, 7480]}]
    narrowed = run_raw("onprem-lab", raw)
    assert _egress_blocks(narrowed, "nlp", "allow-object-storage") == [("10.40.0.0/16", [443, 7480])]
    assert not [p for p in kube_objects(narrowed, "NetworkPolicy")
                if p["metadata"]["name"] == "allow-object-storage" and p["metadata"]["namespace"] == "vision"]


def test_object_counts_and_storage_follow_namespace_quota() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["speech"]["namespaceQuota"] = {"pods": 40, "persistentVolumeClaims": 3, "storage": "2Ti",
                                                "trainJobs": 7}
    capture = run_raw("onprem-lab", raw)
    for ns in ("speech", "speech-eval"):
        hard = _one(kube_objects(capture, "ResourceQuota"), "team-quota", ns)["spec"]["hard"]
        assert hard["pods"] == "40" and hard["persistentvolumeclaims"] == "3"
        assert parse_quantity(hard["requests.storage"]) == 2 * Decimal(2**40)
        assert hard["count/trainjobs.trainer.kubeflow.org"] == "7"
        assert hard["services.loadbalancers"] == hard["services.nodeports"] == "0"
    vision = _one(kube_objects(capture, "ResourceQuota"), "team-quota", "vision")["spec"]["hard"]
    assert vision["pods"] != "40"


def test_baseline_is_an_exception_with_a_reason_on_the_namespace() -> None:
    raw = raw_platform("onprem-lab")
    reason = "mpi-distributed runs sshd in the launcher"
    raw["teams"]["speech"]["podSecurity"] = {"level": "baseline", "reason": reason}
    capture = run_raw("onprem-lab", raw)
    for ns in ("speech", "speech-eval"):
        meta = _one(kube_objects(capture, "Namespace"), ns)["metadata"]
        assert meta["labels"][f"{PSA}/enforce"] == "baseline"
        assert meta["labels"][f"{PSA}/warn"] == "restricted"
        assert reason in meta["annotations"].values()
    vision = _one(kube_objects(capture, "Namespace"), "vision")["metadata"]
    # No exception annotation: only the profile owner (infra/platform/tenancy.py profile_marks).
    assert vision["labels"][f"{PSA}/enforce"] == "restricted" and vision["annotations"] == {"owner": PROFILE_OWNER}


@pytest.mark.parametrize("security", ["baseline", {"level": "baseline"}, {"level": "privileged", "reason": "x"}])
def test_pod_security_exceptions_without_reason_or_beyond_baseline_are_refused(security: object) -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["speech"]["podSecurity"] = security
    with pytest.raises(SpecError, match=r"teams\.speech\.podSecurity"):
        validate(raw, "onprem-lab")


def test_psa_version_follows_the_cluster_minor() -> None:
    platform, capture = platform_of("onprem-lab"), capture_of("onprem-lab")
    labels = _one(kube_objects(capture, "Namespace"), "nlp")["metadata"]["labels"]
    assert labels[f"{PSA}/enforce-version"] == f"v{platform.spec.versions.kubernetes}"


@pytest.mark.parametrize(("value", "path"), [
    ({"cidr": "10.0.0.1/16"}, "objectStorage[0].cidr"),
    ({"cidr": "10.0.0.0/16", "ports": [0]}, "objectStorage[0].ports"),
    ({"cidr": "10.0.0.0/16", "ports": []}, "objectStorage[0].ports"),
])
def test_bad_object_storage_destinations_are_refused(value: dict[str, Any], path: str) -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["objectStorage"] = [value]
    with pytest.raises(SpecError) as error:
        validate(raw, "onprem-lab")
    assert f"teams.nlp.{path}" in str(error.value)


@pytest.mark.parametrize("stack", STACKS)
def test_namespace_quota_never_blocks_what_kueue_guarantees(stack: str) -> None:
    """Per resource: at least the team's nominal quota, at most what its pools hold at their largest. Not the models
    namespace: its quota is the serving budget (tests/test_model_registry.py)."""
    platform, capture = platform_of(stack), capture_of(stack)
    models = {t.namespace for t in platform.models.teams} if platform.models else set()
    for team in platform.teams:
        for ns in [n for n in team.namespaces if n not in models]:
            hard = _one(kube_objects(capture, "ResourceQuota"), "team-quota", ns)["spec"]["hard"]
            for resource, nominal in team.totals.items():
                largest = sum((platform.flavor(f).max_capacity.get(resource, platform.flavor(f).capacity.get(
                    resource, Decimal(0))) for f in team.quota), Decimal(0))
                assert nominal <= parse_quantity(hard[f"requests.{resource}"]) <= max(largest, nominal), \
                    (ns, resource)


def _gpu_ceiling(capture: Any, ns: str) -> int:
    hard = _one(kube_objects(capture, "ResourceQuota"), "team-quota", ns)["spec"]["hard"]
    return int(hard[f"requests.{GPU_RESOURCE}"])


def test_the_gpu_ceiling_is_what_the_cohort_can_lend_when_that_is_below_the_limit() -> None:
    """nlp lends nothing on h100: vision can borrow only speech's 4 there (every h100 is someone's, no shared
    pool), so its own limit of 10 does not bound it: h100 16 + 4, l40s 8 + half of the 16 the others lend
    (the default). The ceilings of the team's ResourceQuotas follow; tests/test_reach.py has the rest."""
    raw = raw_platform("onprem-lab")
    raw["teams"]["nlp"]["quota"]["h100"] = {"gpus": 12, "lendingLimit": 0}
    raw["teams"]["vision"]["quota"]["h100"] = {"gpus": 16, "borrowingLimit": 10}
    capture = run_raw("onprem-lab", raw)
    assert _gpu_ceiling(capture, "vision") == 16 + 4 + 8 + 8
    # speech's two namespaces each get the team's ceiling (its ClusterQueue bounds their sum): h100 4 + half of
    # vision's 16 (nlp lends nothing), l40s 8 + half of 16.
    assert _gpu_ceiling(capture, "speech") == _gpu_ceiling(capture, "speech-eval") == 4 + 8 + 8 + 8


@pytest.mark.parametrize("stack", STACKS)
def test_platform_namespaces_deny_by_default_and_allow_only_named_flows(stack: str) -> None:
    capture = capture_of(stack)
    namespaces = {ns["metadata"]["name"]: ns["metadata"].get("labels", {}) for ns in kube_objects(capture, "Namespace")}
    platform = [ns for ns in ("kueue-system", "kubeflow-system", "velero", "gpu-operator") if ns in namespaces]
    assert {"kueue-system", "kubeflow-system", "velero"} <= set(platform)
    for ns in platform:
        policies = {p["metadata"]["name"]: p["spec"] for p in kube_objects(capture, "NetworkPolicy")
                    if p["metadata"]["namespace"] == ns}
        assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, ns
        assert {"allow-dns", "allow-api-server"} <= set(policies), ns
        for name, spec in policies.items():
            assert name == "default-deny" or len(spec["policyTypes"]) == 1, (ns, name)  # one flow, one direction
            for rule in spec.get("ingress", []) + spec.get("egress", []):
                assert rule["ports"], (ns, name)  # every flow names its ports
    for ns in ("kueue-system", "kubeflow-system"):
        assert namespaces[ns][f"{PSA}/enforce"] == "restricted"


@pytest.mark.parametrize("stack", STACKS)
def test_team_default_service_accounts_mount_no_token(stack: str) -> None:
    capture = capture_of(stack)
    patched = {r.inputs["metadata"]["namespace"]: r.inputs for r in capture.resources
               if r.type == "kubernetes:core/v1:ServiceAccountPatch"}
    assert set(patched) == {ns for _, ns in _team_namespaces(stack)}
    assert all(p["metadata"]["name"] == "default" and p["automountServiceAccountToken"] is False
               for p in patched.values())
