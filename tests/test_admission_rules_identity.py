"""Who may do what (trainyard-no-token-secrets, -drill-evidence), the fabric request (-fabric-request) and the
Admission component itself, from both sides, with the policies built now from the stack's spec: every tenant
identity refused the drill's marker and the platform's admitted; every way a CI TrainJob could reach a Secret
refused and its Secret-free neighbour admitted; each fabric runtime's device count admitted at the count, refused
one below; every policy registered with its binding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import empty_pb2, json_format

from infra.offline import engine
from infra.platform.admission import fabric_policy, fabric_runtimes, policies, tenant_identities
from infra.platform.models.serving_policy import SERVING_POLICY
from infra.spec import validate
from infra.spec.clouds.aws import EFA_RESOURCE
from infra.vocabulary import EVIDENCE_POLICY, FABRIC_POLICY, SECRETS_POLICY
from tests.admitting import by, cluster, patched, refusals, trainjob
from tests.cel import denials
from tests.conftest import ALL_STACKS, platform_of, raw_platform

STACK = "onprem-lab"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
MARKER_RULE = "trainyard-backup-marker is the restore drill's evidence: only the platform writes it"
CI_RULE = ("a CI identity may not read Secrets, so its TrainJobs reference none (initializer secretRef, env from a "
           "Secret, Secret/projected/CSI volumes) and run on a ClusterTrainingRuntime")
SECRET_ENV = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
PLAIN_ENV = [{"name": "T", "value": "v"}, {"name": "U", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def _marker(name: str = "trainyard-backup-marker") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "vision"},
            "data": {"namespace": "vision"}}


# (username, groups, a tenant): every persona group of every team, the CI accounts and groups, every
# ServiceAccount of every team namespace; not the platform's admins, Velero or the platform's own controllers.
IDENTITIES = [
    ("oidc:a", ("oidc:vision-eng",), True), ("oidc:a", ("oidc:vision-read",), True),
    ("oidc:a", ("oidc:nlp-eng",), True), ("oidc:a", ("oidc:research-leads",), True),
    ("oidc:a", ("oidc:speech-eng",), True), ("oidc:ci", ("oidc:vision-ci",), True),
    ("system:serviceaccount:vision:trainyard-ci", (), True),
    ("system:serviceaccount:speech-eval:trainyard-ci", (), True),
    ("system:serviceaccount:nlp:default", ("system:serviceaccounts:nlp",), True),
    ("system:serviceaccount:speech-eval:x", ("system:serviceaccounts:speech-eval",), True),
    ("system:serviceaccount:vision-models:x", ("system:serviceaccounts:vision-models",), True),
    ("oidc:admin", ("oidc:platform-admins",), False),
    ("system:serviceaccount:velero:velero", ("system:serviceaccounts", "system:serviceaccounts:velero"), False),
    ("oidc:a", ("oidc:vision-eng-old", "vision-eng"), False),  # near misses of a group name
    ("system:serviceaccount:vision:trainyard-ci2", (), False),
]


@pytest.mark.parametrize(("user", "groups", "tenant"), IDENTITIES)
def test_no_tenant_identity_writes_the_drill_marker(user: str, groups: tuple[str, ...], tenant: bool) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    for operation in ("CREATE", "UPDATE"):
        found = by(EVIDENCE_POLICY, refusals(platform, _marker(), user, groups, operation, state=state))
        assert (found != []) is tenant, (operation, found)
        if tenant:
            assert found[0].endswith(MARKER_RULE)
        # any other ConfigMap is the tenant's
        assert refusals(platform, _marker("settings"), user, groups, operation, state=state) == []
    policy = policies(platform)[EVIDENCE_POLICY]
    assert policy["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["*"], "resources": [
        "configmaps"], "operations": ["CREATE", "UPDATE", "DELETE"]}]
    who = {"username": user, "groups": list(groups)}
    # a deletion names the object in oldObject only
    assert (denials(policy, None, "configmaps", "vision", "DELETE", user=who, old=_marker()) != []) is tenant
    assert denials(policy, None, "configmaps", "vision", "DELETE", user=who, old=_marker("settings")) == []
    unnamed = _marker()
    del unnamed["metadata"]["name"]  # generateName: not the marker
    assert denials(policy, unnamed, "configmaps", "vision", user=who) == []


def test_a_request_without_groups_is_judged_by_its_username() -> None:
    policy = policies(platform_of(STACK))[EVIDENCE_POLICY]
    assert denials(policy, _marker(), "configmaps", "vision", user={"username": "oidc:nobody"}) == []
    assert denials(policy, _marker(), "configmaps", "vision",
                   user={"username": "system:serviceaccount:vision:trainyard-ci"})


def test_tenant_identities_list_each_group_once_in_order() -> None:
    users, groups = tenant_identities(platform_of(STACK))
    assert "system:serviceaccount:vision:trainyard-ci" in users
    assert groups == sorted(set(groups))
    assert {"oidc:vision-eng", "oidc:vision-read", "oidc:nlp-read", "oidc:vision-ci",
            "system:serviceaccounts:vision-models"} <= set(groups)
    assert "oidc:platform-admins" not in groups


CI = [("system:serviceaccount:vision:trainyard-ci", ("system:serviceaccounts",)), ("oidc:bot", ("oidc:vision-ci",))]


def _ci_job(change: Any) -> dict[str, Any]:
    job = trainjob("vision", "vision", IMAGE)
    change(job)
    return job


SECRET_WAYS = [
    ("trainer env", lambda j: j["spec"]["trainer"].update(env=SECRET_ENV), lambda j: j["spec"]["trainer"].update(
        env=PLAIN_ENV)),
    ("model secretRef", lambda j: j["spec"].update(initializer={"model": {"storageUri": "hf://m", "secretRef": {
        "name": "s"}}}), lambda j: j["spec"].update(initializer={"model": {"storageUri": "hf://m"}})),
    ("dataset secretRef", lambda j: j["spec"].update(initializer={"dataset": {"storageUri": "hf://d", "secretRef": {
        "name": "s"}}}), lambda j: j["spec"].update(initializer={"dataset": {"storageUri": "hf://d"}})),
    ("model env", lambda j: j["spec"].update(initializer={"model": {"storageUri": "hf://m", "env": SECRET_ENV}}),
     lambda j: j["spec"].update(initializer={"model": {"storageUri": "hf://m", "env": PLAIN_ENV}})),
    ("dataset env", lambda j: j["spec"].update(initializer={"dataset": {"storageUri": "hf://d", "env": SECRET_ENV}}),
     lambda j: j["spec"].update(initializer={"dataset": {"storageUri": "hf://d", "env": PLAIN_ENV}, "model": {
         "storageUri": "hf://m"}})),
    ("namespaced runtime", lambda j: j["spec"]["runtimeRef"].update(kind="TrainingRuntime"),
     lambda j: j["spec"]["runtimeRef"].update(kind="ClusterTrainingRuntime")),
    ("secret volume", lambda j: j["spec"].update(runtimePatches=patched({"volumes": [{"name": "v", "secret": {
        "secretName": "s"}}]})), lambda j: j["spec"].update(runtimePatches=patched({"volumes": [{"name": "v",
                                                                                           "emptyDir": {}}]}))),
    ("projected volume", lambda j: j["spec"].update(runtimePatches=patched({"volumes": [{"name": "v", "projected": {
        "sources": [{"secret": {"name": "s"}}]}}]})), lambda j: None),
    ("csi volume", lambda j: j["spec"].update(runtimePatches=patched({"volumes": [{"name": "v", "csi": {
        "driver": "secrets-store.csi.k8s.io"}}]})), lambda j: None),
    ("patched env", lambda j: j["spec"].update(runtimePatches=patched({"initContainers": [
        {"name": "i", "env": SECRET_ENV}]})),
     lambda j: j["spec"].update(runtimePatches=patched({"initContainers": [{"name": "i", "env": PLAIN_ENV}]}))),
    ("patched envFrom", lambda j: j["spec"].update(runtimePatches=patched({"containers": [{"name": "node", "envFrom": [
        {"secretRef": {"name": "s"}}]}]})), lambda j: j["spec"].update(runtimePatches=patched({"containers": [
            {"name": "node", "envFrom": [{"configMapRef": {"name": "c"}}]}]}))),
]


@pytest.mark.parametrize(("way", "refused", "admitted"), SECRET_WAYS, ids=[w[0] for w in SECRET_WAYS])
def test_a_ci_trainjob_reaches_no_secret(way: str, refused: Any, admitted: Any) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    for user, groups in CI:
        assert by(SECRETS_POLICY, refusals(platform, _ci_job(admitted), user, groups, state=state)) == [], way
        found = by(SECRETS_POLICY, refusals(platform, _ci_job(refused), user, groups, state=state))
        assert len(found) == 1 and found[0].endswith(CI_RULE), (way, user, found)
    # an engineer may read the team's Secrets: the same TrainJob is theirs to submit
    assert by(SECRETS_POLICY, refusals(platform, _ci_job(refused), state=state)) == [], way


def test_a_ci_trainjob_without_a_trainer_is_judged_by_the_rest() -> None:
    policy = policies(platform_of(STACK))[SECRETS_POLICY]
    job = trainjob("vision", "vision", IMAGE)
    del job["spec"]["trainer"]
    ci = {"username": CI[0][0], "groups": list(CI[0][1])}
    assert denials(policy, job, "trainjobs", "vision", user=ci) == []
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert denials(policy, job, "trainjobs", "vision", user=ci)


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_nobody_writes_a_service_account_token_secret(operation: str) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "t", "namespace": "vision", "annotations": {
                 "kubernetes.io/service-account.name": "default"}}}
    for user, groups in (("oidc:admin", ("oidc:platform-admins",)), ("oidc:a", ("oidc:vision-eng",))):
        found = by(SECRETS_POLICY, refusals(platform, token, user, groups, operation, state=state))
        assert len(found) == 1 and found[0].endswith(
            "ServiceAccount token Secrets never expire: use `kubectl create token` (short-lived) or the workload's "
            "projected token"), found
        for kind in ("Opaque", "kubernetes.io/dockerconfigjson", None):
            other = {**token, "type": kind} if kind else {k: v for k, v in token.items() if k != "type"}
            assert refusals(platform, other, user, groups, operation, state=state) == [], kind


# --- fabric ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("stack", "resource", "count"), [
    ("aws-prod", EFA_RESOURCE, 32), ("onprem-lab", "rdma/rdma_shared_device_a", 1),
    ("hybrid-burst", "rdma/rdma_shared_device_a", 1)])
def test_fabric_runtimes_are_those_pinned_to_a_fabric_pool(stack: str, resource: str, count: int) -> None:
    found = fabric_runtimes(platform_of(stack))
    assert found["torch-distributed-h100"] == {"resource": resource, "count": count}
    assert "torch-distributed" not in found  # not pinned to a pool
    assert all("h100" in name for name in found), found  # the variants pinned to the fabric pool


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_a_stack_has_a_fabric_policy_exactly_when_a_runtime_needs_fabric(stack: str) -> None:
    platform = platform_of(stack)
    always = {"trainyard-queue-required", "trainyard-pod-security", "trainyard-allowed-registries",
              "trainyard-gpu-quota", "trainyard-no-token-secrets", "trainyard-drill-evidence",
              "trainyard-pipeline-steps"}
    expected = always | ({FABRIC_POLICY} if stack in ("aws-prod", "onprem-lab", "hybrid-burst") else set())
    assert set(policies(platform)) == expected | {SERVING_POLICY}  # every stack has `models`
    raw = raw_platform(stack)
    del raw["models"]
    for team in raw["teams"].values():
        team.pop("serving", None)
    assert set(policies(validate(raw, stack))) == expected


def _fabric_job(runtime: str, resources: dict[str, Any] | None, kind: str | None = None) -> dict[str, Any]:
    job = trainjob("vision", "vision", IMAGE)
    job["spec"]["runtimeRef"] = {"name": runtime, **({"kind": kind} if kind else {})}
    if resources is None:
        del job["spec"]["trainer"]["resourcesPerNode"]
    else:
        job["spec"]["trainer"]["resourcesPerNode"] = resources
    return job


@pytest.mark.parametrize(("resources", "kind", "allowed"), [
    ({"limits": {"nvidia.com/gpu": 8, "rdma/x": 2}}, None, True),
    ({"limits": {"rdma/x": "2"}}, None, True),
    ({"requests": {"rdma/x": 2}}, None, True),
    ({"requests": {"rdma/x": 2}}, "ClusterTrainingRuntime", True),
    ({"requests": {"rdma/x": 1}, "limits": {"rdma/x": 2}}, None, True),
    ({"limits": {"rdma/x": 1}}, None, False),
    ({"limits": {"rdma/x": 3}}, None, False),
    ({"limits": {"rdma/y": 2}}, None, False),
    ({"limits": {"nvidia.com/gpu": 8}}, None, False),
    ({}, None, False),
    (None, None, False),
    (None, "TrainingRuntime", True),  # a team's namespaced runtime of that name is not the platform's
])
def test_a_trainjob_on_a_fabric_runtime_requests_its_devices(resources: dict[str, Any] | None, kind: str | None,
                                                             allowed: bool) -> None:
    policy = fabric_policy({"fab": {"resource": "rdma/x", "count": 2}, "other": {"resource": "rdma/y", "count": 1}})
    found = denials(policy, _fabric_job("fab", resources, kind), "trainjobs", "vision")
    assert (found == []) is allowed, found
    if not allowed:
        assert found == ["a TrainJob on a fabric runtime requests its node's fabric devices in "
                         "spec.trainer.resourcesPerNode (fab: rdma/x=2, other: rdma/y=1)"]
    assert denials(policy, _fabric_job("plain", resources, kind), "trainjobs", "vision") == []
    without = _fabric_job("fab", resources, kind)
    del without["spec"]["trainer"]
    assert (denials(policy, without, "trainjobs", "vision") == []) is (kind == "TrainingRuntime")


def test_the_fabric_policy_judges_trainjob_creation_in_team_namespaces() -> None:
    platform = platform_of("aws-prod")
    job = _fabric_job("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8}})
    job["spec"]["trainer"]["image"] = next(
        c["image"] for r in platform.runtimes if r["metadata"]["name"] == "torch-distributed-h100"
        for j in r["spec"]["template"]["spec"]["replicatedJobs"] for c in j["template"]["spec"]["template"]["spec"][
            "containers"])
    found = refusals(platform, job)
    assert by(FABRIC_POLICY, found) and len(found) == 1, found
    assert "(deepspeed-distributed-h100: vpc.amazonaws.com/efa=32, jax-distributed-h100: " in found[0]
    job["spec"]["trainer"]["resourcesPerNode"]["limits"][EFA_RESOURCE] = 32
    assert refusals(platform, job) == []
    assert policies(platform)[FABRIC_POLICY]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["*"], "resources": ["trainjobs"],
         "operations": ["CREATE"]}]


# --- the component ------------------------------------------------------------------------------------------

PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s
from infra.platform.admission import Admission
from tests.conftest import platform_of
holder = pulumi.ComponentResource("test:index:Holder", "holder")
Admission("admission", platform_of("onprem-lab"), k8s.Provider("k8s"), pulumi.ResourceOptions(parent=holder))
"""


def test_the_component_registers_each_policy_with_its_binding(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM, encoding="utf-8")
    outputs: dict[str, Any] = {}

    def record(monitor: Any, request: Any) -> Any:
        outputs[request.urn] = json_format.MessageToDict(request.outputs)
        return empty_pb2.Empty()
    monkeypatch.setattr(engine.RecordingMonitor, "RegisterResourceOutputs", record)
    capture = engine.run("admission-only", {}, program)
    expected = policies(platform_of(STACK))
    kinds = {"ValidatingAdmissionPolicy": "vap", "ValidatingAdmissionPolicyBinding": "vapb"}
    registered = {r.name: r for r in capture.resources if r.inputs.get("kind") in kinds}
    assert set(registered) == {f"{prefix}-{name}" for name in expected for prefix in kinds.values()}
    for name, spec in expected.items():
        policy, binding = registered[f"vap-{name}"], registered[f"vapb-{name}"]
        assert policy.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
        assert binding.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
        assert policy.inputs["metadata"]["name"] == binding.inputs["metadata"]["name"] == name
        assert policy.inputs["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert policy.inputs["spec"] == spec
        assert binding.inputs["spec"]["policyName"] == name
        assert policy.ref() in binding.depends_on  # the binding waits for its policy
        assert policy.parent == binding.parent and "Admission" in policy.parent
        assert policy.provider and binding.provider
    component = next(r for r in capture.resources if r.type == "trainyard:platform:Admission")
    assert component.name == "admission"
    assert component.parent.endswith("test:index:Holder::holder")  # the options it is given are its own
    assert outputs[component.urn] == {"policies": sorted(expected)}  # what its state lists, in a stable order


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_rule_fails_closed_and_refuses_as_forbidden(stack: str) -> None:
    for name, spec in policies(platform_of(stack)).items():
        assert spec["failurePolicy"] == "Fail", name  # a request a rule cannot evaluate is refused, not admitted
        for validation in spec["validations"]:
            # 403 (the requester may not), as the API server answers a reason Forbidden; not 422 (Invalid)
            assert validation["reason"] == "Forbidden", (name, validation["message"])


def test_the_policies_do_not_depend_on_the_order_the_teams_are_listed() -> None:
    """The queues, namespaces and identities written into the expressions are sorted: listing the teams in another
    order is no change to review (and renders byte-identical)."""
    raw = raw_platform(STACK)
    raw["teams"] = dict(reversed(list(raw["teams"].items())))
    assert policies(validate(raw, STACK)) == policies(platform_of(STACK))
