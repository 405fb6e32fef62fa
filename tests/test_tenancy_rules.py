"""A team namespace as infra/platform/tenancy.py builds it (the component run alone, tests/parts.py): its network
policies judged by what they let through (tests/netpol.py), each allowed peer admitted and its neighbour refused;
its quota up to the team's reach (the serving budget in a models namespace); its Pod Security labels, profile marks
and ServiceAccounts."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

from infra.platform.models.registry_patches import DATABASE_PODS, registry_requests
from infra.platform.tenancy import (
    DEFAULT_REQUEST,
    PROFILE_LABELS,
    PROFILE_OWNER,
    network_policies,
    profile_marks,
    quota_hard,
    serving_compute,
)
from infra.platform.trainer import NAMESPACE as TRAINER_NAMESPACE
from infra.platform.trainer import TRAINER_STATUS_PORT
from infra.spec import validate
from infra.spec.base import parse_quantity
from infra.vocabulary import PSA_REASON, TEAM_LABEL
from tests.conftest import platform_of, raw_platform
from tests.netpol import Endpoint, Pod, connects
from tests.parts import namespace_refs, parts_objects, parts_of, run_parts

PSA = "pod-security.kubernetes.io"
TENANCY_KINDS = {"Namespace": "v1", "ResourceQuota": "v1", "LimitRange": "v1", "ServiceAccount": "v1",
                 "NetworkPolicy": "networking.k8s.io/v1"}
MANAGED = "app.kubernetes.io/managed-by"
DNS = Pod("kube-system", {"k8s-app": "kube-dns"})


def _policies(stack: str) -> list[dict[str, Any]]:
    return parts_objects(parts_of(stack), "NetworkPolicy")


def _pod(namespace: str, team: str, **labels: str) -> Pod:
    return Pod(namespace, labels, {TEAM_LABEL: team})


def _one(objs: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name
             and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, (kind, name, namespace)
    return found[0]


# --- network policies --------------------------------------------------------------------------------------------

VISION, VISION_MODELS, NLP = _pod("vision", "vision"), _pod("vision-models", "vision"), _pod("nlp", "nlp")


# (target, port, protocol, allowed) from a vision pod
REACHES: list[tuple[Endpoint, int, str, bool]] = [
    (DNS, 53, "UDP", True), (DNS, 53, "TCP", True),
    (DNS, 54, "UDP", False), (DNS, 52, "TCP", False), (DNS, 53, "SCTP", False),
    (Pod("kube-system", {"k8s-app": "metrics-server"}), 53, "UDP", False),  # the kube-dns selector keeps it out
    (Pod("kube-system"), 53, "TCP", False),
    (Pod("impostor", {"k8s-app": "kube-dns"}), 53, "UDP", False),  # a kube-dns label outside kube-system
    (Pod(TRAINER_NAMESPACE, {"app": "trainer"}), TRAINER_STATUS_PORT, "TCP", True),  # TrainJob progress
    (Pod(TRAINER_NAMESPACE), TRAINER_STATUS_PORT + 1, "TCP", False),
    (Pod(TRAINER_NAMESPACE), TRAINER_STATUS_PORT, "UDP", False),
    (Pod("kueue-system"), TRAINER_STATUS_PORT, "TCP", False),
    (VISION_MODELS, 29500, "TCP", True), (_pod("vision", "vision", app="x"), 8080, "UDP", True),  # same team
    (NLP, 29500, "TCP", False), (NLP, 53, "UDP", False),  # another team, on any port
    (Pod("default"), 443, "TCP", False), ("10.1.2.3", 443, "TCP", False), ("1.1.1.1", 53, "UDP", False),
]
# (source, allowed) to a vision pod on 8080
REACHED_BY: list[tuple[Pod, bool]] = [
    (VISION_MODELS, True), (_pod("speech-eval", "speech"), False), (NLP, False), (Pod("kube-system"), False),
    (Pod("kubeflow-system"), False), (Pod("vision"), False),  # a namespace named like the team, without its label
]


def test_a_team_pod_reaches_dns_the_trainer_and_its_own_team_only() -> None:
    policies = _policies("onprem-lab")
    wrong = [(target, port, protocol, expected) for target, port, protocol, expected in REACHES
             if connects(policies, VISION, target, port, protocol) is not expected]
    assert wrong == []


def test_a_team_pod_is_reached_by_its_own_team_only() -> None:
    policies = _policies("onprem-lab")
    assert [(source, expected) for source, expected in REACHED_BY
            if connects(policies, source, VISION, 8080) is not expected] == []


def test_in_a_models_namespace_the_team_reaches_every_pod_but_the_registry_database() -> None:
    database = _pod("vision-models", "vision", **DATABASE_PODS)
    server = _pod("vision-models", "vision", component="model-registry-server")
    policies = _policies("onprem-lab")
    assert connects(policies, VISION, server, 8080) and connects(policies, server, VISION, 8080)
    assert not connects(policies, VISION, database, 3306)
    assert not connects(policies, database, VISION, 8080)
    # elsewhere a pod with the database's labels is an ordinary team pod
    assert connects(policies, VISION_MODELS, _pod("vision", "vision", **DATABASE_PODS), 3306)


def test_every_team_policy_is_a_valid_network_policy() -> None:
    """The fields networking/v1 has, `podSelector` required, each port with its protocol: a misspelt field is pruned
    by the API server (a policy without its selector, a port without its protocol) or refused."""
    for policy in _policies("aws-prod"):
        spec = policy["spec"]
        assert "podSelector" in spec and set(spec) <= {"podSelector", "policyTypes", "ingress", "egress"}, spec
        for rule in [*spec.get("ingress", []), *spec.get("egress", [])]:
            assert set(rule) <= {"from", "to", "ports"}, rule
            assert all(set(port) == {"protocol", "port"} and port["protocol"] in ("TCP", "UDP")
                       for port in rule.get("ports", [])), rule


def test_the_team_policies_are_default_deny_then_one_allow_per_reason() -> None:
    policies = network_policies("vision", {"allow-extra": {"podSelector": {}, "policyTypes": ["Egress"]}})
    assert list(policies) == ["default-deny", "allow-dns", "allow-same-team", "allow-extra", "allow-trainer-status"]
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert policies["allow-same-team"]["podSelector"] == {}
    models = network_policies("vision", {}, models=True)["allow-same-team"]["podSelector"]
    assert models == {"matchExpressions": [{"key": "component", "operator": "NotIn", "values": ["db"]}]}


def test_object_storage_and_the_model_hub_are_the_only_ways_out_of_the_cluster() -> None:
    policies = _policies("aws-prod")
    pod, initializer = _pod("vision", "vision"), _pod("vision", "vision", **{
        "jobset.sigs.k8s.io/replicatedjob-name": "model-initializer"})
    node = _pod("vision", "vision", **{"jobset.sigs.k8s.io/replicatedjob-name": "node"})
    assert connects(policies, pod, "52.216.10.1", 443) and connects(policies, pod, "169.254.170.23", 80)
    assert not connects(policies, pod, "52.216.10.1", 80) and not connects(policies, pod, "169.254.170.24", 80)
    assert not connects(policies, pod, "52.218.0.1", 443)  # just past 52.216.0.0/15
    assert connects(policies, initializer, "140.82.112.3", 443)  # the Hub publishes no ranges
    assert not connects(policies, node, "140.82.112.3", 443) and not connects(policies, initializer, "140.82.112.3", 80)


def test_without_declared_destinations_nothing_leaves_the_cluster() -> None:
    policies = _policies("local")
    names = {p["metadata"]["name"] for p in policies if p["metadata"]["namespace"] == "demo"}
    assert names == {"default-deny", "allow-dns", "allow-same-team", "allow-trainer-status"}
    assert not connects(policies, _pod("demo", "demo"), "52.216.10.1", 443)


# --- the namespace, its quota, limits and accounts ---------------------------------------------------------------

def test_a_team_namespace_is_labelled_for_its_team_pod_security_and_kubeflow_profile() -> None:
    platform = platform_of("onprem-lab")
    namespace = _one(parts_objects(parts_of("onprem-lab")), "Namespace", "speech-eval")
    version = f"v{platform.spec.versions.kubernetes}"
    assert namespace["metadata"]["labels"] == {
        TEAM_LABEL: "speech", MANAGED: "trainyard", **PROFILE_LABELS,
        f"{PSA}/enforce": "restricted", f"{PSA}/audit": "restricted", f"{PSA}/warn": "restricted",
        f"{PSA}/enforce-version": version, f"{PSA}/audit-version": version, f"{PSA}/warn-version": version}
    assert namespace["metadata"]["annotations"] == {"owner": PROFILE_OWNER}


def test_a_baseline_exception_carries_its_reason_and_restricted_takes_none() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["speech"]["podSecurity"] = {"level": "baseline", "reason": "sshd in the MPI launcher"}
    objs = parts_objects(run_parts("onprem-lab", raw))
    speech = _one(objs, "Namespace", "speech")["metadata"]
    assert speech["labels"][f"{PSA}/enforce"] == "baseline"
    assert speech["annotations"] == {PSA_REASON: "sshd in the MPI launcher", "owner": PROFILE_OWNER}
    assert _one(objs, "Namespace", "nlp")["metadata"]["annotations"] == {"owner": PROFILE_OWNER}
    # a reason on a restricted namespace is no exception: nothing marks it
    raw["teams"]["speech"]["podSecurity"] = {"level": "restricted", "reason": "none needed"}
    restricted = _one(parts_objects(run_parts("onprem-lab", raw)), "Namespace", "speech")["metadata"]
    assert restricted["annotations"] == {"owner": PROFILE_OWNER}


def test_without_a_front_door_a_namespace_has_no_profile_marks_and_no_annotations() -> None:
    raw = raw_platform("local")
    for section in ("frontDoor", "pipelines", "models"):
        del raw[section]
    for team in raw["teams"].values():
        team.pop("serving", None)
    bare = _one(parts_objects(run_parts("local", raw)), "Namespace", "demo")["metadata"]
    assert "annotations" not in bare
    assert not set(PROFILE_LABELS) & set(bare["labels"]) and bare["labels"][TEAM_LABEL] == "demo"


def test_profile_marks_only_with_a_front_door() -> None:
    platform = platform_of("onprem-lab")
    assert profile_marks(platform) == (PROFILE_LABELS, {"owner": PROFILE_OWNER})
    assert profile_marks(dataclasses.replace(platform, front_door=None)) == ({}, {})


def test_the_quota_reaches_what_kueue_may_admit_and_no_load_balancers_or_node_ports() -> None:
    platform = platform_of("onprem-lab")
    vision = next(t for t in platform.teams if t.name == "vision")
    hard = quota_hard(platform, vision, "vision")
    reach = platform.queueing.reach("vision")
    for resource in ("cpu", "memory", "nvidia.com/gpu"):
        assert parse_quantity(hard[f"requests.{resource}"]) == reach.get(resource, Decimal(0)), resource
    assert hard["services.loadbalancers"] == "0" and hard["services.nodeports"] == "0"
    assert {k: hard[k] for k in ("pods", "services", "configmaps", "secrets", "persistentvolumeclaims",
                                 "count/trainjobs.trainer.kubeflow.org")} == {
        "pods": "500", "services": "50", "configmaps": "100", "secrets": "100", "persistentvolumeclaims": "20",
        "count/trainjobs.trainer.kubeflow.org": "100"}
    assert parse_quantity(hard["requests.storage"]) == 20 * Decimal(2**40)
    assert quota_hard(platform, vision) == hard  # no namespace named: the team's ceiling
    objs = parts_objects(parts_of("onprem-lab"))
    assert _one(objs, "ResourceQuota", "team-quota", "vision")["spec"]["hard"] == hard


def test_a_models_namespace_quota_is_the_serving_budget_plus_the_registry() -> None:
    platform = platform_of("onprem-lab")
    vision = next(t for t in platform.teams if t.name == "vision")
    hard = quota_hard(platform, vision, "vision-models")
    registry = registry_requests()
    assert parse_quantity(hard["requests.cpu"]) == registry["cpu"] + 2  # budget: 2 CPUs, 4Gi, no GPU
    assert parse_quantity(hard["requests.memory"]) == registry["memory"] + 4 * 2**30
    assert parse_quantity(hard["requests.nvidia.com/gpu"]) == 0
    rendered = _one(parts_objects(parts_of("onprem-lab")), "ResourceQuota", "team-quota", "vision-models")
    assert rendered["spec"]["hard"] == hard
    nlp = next(t for t in platform.teams if t.name == "nlp")  # no serving budget: the registry alone
    bare = quota_hard(platform, nlp, "nlp-models")
    assert parse_quantity(bare["requests.cpu"]) == registry["cpu"]
    assert parse_quantity(bare["requests.nvidia.com/gpu"]) == 0


def test_a_gpu_serving_budget_counts_its_pools_gpu_resource_only() -> None:
    raw = raw_platform("azure-prod")
    raw["teams"]["vision"]["serving"] = {"pool": next(iter(raw["pools"])), "gpus": 1, "cpu": "1", "memory": "1Gi"}
    platform = validate(raw, "azure-prod")
    budget = platform.spec.teams["vision"].serving
    compute = serving_compute(platform, budget)
    gpu_resources = platform.flavor(budget.pool).gpu_resources  # type: ignore[union-attr]
    assert gpu_resources and all(compute[r] == 1 for r in gpu_resources)
    others = [r for r in platform.covered_resources if r not in ("cpu", "memory", *gpu_resources)]
    assert others and all(r not in compute for r in others)
    assert compute["cpu"] == registry_requests()["cpu"] + 1
    assert serving_compute(platform, None) == registry_requests()


def test_containers_get_default_requests_and_no_default_limits() -> None:
    limits = _one(parts_objects(parts_of("onprem-lab")), "LimitRange", "team-defaults", "nlp")["spec"]["limits"]
    assert limits == [{"type": "Container", "defaultRequest": DEFAULT_REQUEST}]
    assert DEFAULT_REQUEST == {"cpu": "250m", "memory": "512Mi"}


def test_no_service_account_of_a_team_namespace_mounts_a_token() -> None:
    capture = parts_of("onprem-lab")
    for ns in ("vision", "speech-eval"):
        ci = _one(parts_objects(capture), "ServiceAccount", "trainyard-ci", ns)
        assert ci["automountServiceAccountToken"] is False and ci["metadata"]["labels"][TEAM_LABEL] == ns.split("-")[0]
        patch = next(r for r in capture.resources if r.type == "kubernetes:core/v1:ServiceAccountPatch"
                     and r.inputs["metadata"]["namespace"] == ns)
        assert patch.inputs["metadata"]["name"] == "default" and patch.inputs["automountServiceAccountToken"] is False
        assert patch.inputs["apiVersion"] == "v1" and patch.inputs["kind"] == "ServiceAccount"


def test_every_team_object_waits_for_its_namespace() -> None:
    capture = parts_of("onprem-lab")
    namespaces = namespace_refs(capture)
    kinds = set()
    for record in capture.resources:
        ns = (record.inputs.get("metadata") or {}).get("namespace")
        if ns:  # the access component's RoleBindings too: they wait for the namespace Tenancy hands over
            assert namespaces[ns] in record.depends_on, record.name
            kinds.add(record.inputs.get("kind"))
    assert kinds == {"ResourceQuota", "LimitRange", "NetworkPolicy", "ServiceAccount", "RoleBinding"}
    # and "guarded", the platform namespace of tests/parts_program.py
    assert set(namespaces) == {"guarded", *(ns for t in platform_of("onprem-lab").teams for ns in t.namespaces)}


def test_tenancy_objects_are_the_components_children_on_the_clusters_provider_under_stable_names() -> None:
    """As for access (tests/test_persona_rules.py): a renamed resource or component type is replaced by `pulumi up`;
    for a Namespace that deletes everything in it."""
    capture = parts_of("onprem-lab")
    assert [r.type for r in capture.resources if r.name == "tenancy"] == ["trainyard:platform:Tenancy"]
    children = [r for r in capture.resources if r.inputs.get("kind") in TENANCY_KINDS
                and "guarded" not in (r.inputs["metadata"]["name"], r.inputs["metadata"].get("namespace"))]
    assert children and {r.parent for r in children} == {"trainyard:platform:Tenancy::tenancy"}
    assert {r.provider for r in children} == {"pulumi:providers:kubernetes::k8s"}
    # each kind at the version the API serves it at (core kinds: v1 only)
    assert all(r.inputs["apiVersion"] == TENANCY_KINDS[r.inputs["kind"]] for r in children)
    assert all(r.type == f"kubernetes:core/v1:{r.inputs['kind']}" for r in children
               if r.inputs["kind"] not in ("NetworkPolicy", "ServiceAccount"))
    suffix = {"ResourceQuota": "quota", "LimitRange": "limits"}
    for record in children:
        meta, kind = record.inputs["metadata"], record.inputs["kind"]
        ns = meta.get("namespace")
        expected = {"Namespace": f"ns-{meta['name']}", "ServiceAccount": f"{ns}-ci",
                    "NetworkPolicy": f"{ns}-{meta['name']}"}.get(kind) or f"{ns}-{suffix[kind]}"
        if record.type == "kubernetes:core/v1:ServiceAccountPatch":
            expected = f"{ns}-default-sa"
        assert record.name == expected, (record.name, kind, meta["name"])
    # Offboarding is removing the team from the stack file (docs/onboarding.md): its namespaces are not protected
    # (a protected resource stops `pulumi up` from deleting it); its data volumes are kept by their own options.
    assert all(not r.protect and not r.retain_on_delete for r in children if r.inputs["kind"] == "Namespace")
    assert len(children) == 7 * (1 + 1 + 1 + 1 + 1) + sum(
        1 for r in children if r.inputs["kind"] == "NetworkPolicy")
