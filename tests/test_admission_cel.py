"""What the admission policies admit and deny, evaluated with a CEL interpreter over sample objects of the
onprem-lab stack (team vision: namespace and LocalQueue `vision`, GPU quota; registries ghcr.io/kubeflow and
nvcr.io/nvidia plus the runtimes' own)."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from celpy import celtypes

from infra.platform.admission import fabric_runtimes, image_pinned_cel, policies
from infra.spec.clouds.aws import EFA_RESOURCE
from infra.spec.pins import unpinned_image
from infra.vocabulary import asks_gpu, gpu_request_cel, is_gpu_resource
from tests.cel import denials
from tests.conftest import STACKS, platform_of

QUEUE = "kueue.x-k8s.io/queue-name"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"


def _policy(name: str) -> dict[str, Any]:
    return policies(platform_of("onprem-lab"))[name]


def _trainjob(**trainer: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "resnet", "namespace": "vision", "labels": {QUEUE: "vision"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"image": IMAGE, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}, **trainer}}}


def _pod(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"securityContext": {"runAsNonRoot": True},
                     "containers": [{"name": "c", "image": IMAGE, **container}]}}


def test_a_plain_trainjob_passes_every_policy() -> None:
    for name, policy in policies(platform_of("onprem-lab")).items():
        assert denials(policy, _trainjob(), "trainjobs", "vision") == [], name


@pytest.mark.parametrize(("labels", "allowed"), [({QUEUE: "vision"}, True), ({QUEUE: "nlp"}, False), ({}, False)])
def test_a_trainjob_must_name_the_local_queue_of_its_namespace(labels: dict[str, str], allowed: bool) -> None:
    job = _trainjob()
    job["metadata"]["labels"] = labels
    assert (denials(_policy("trainyard-queue-required"), job, "trainjobs", "vision") == []) is allowed


JOB_CONTROLLER = {"username": "system:serviceaccount:kube-system:job-controller", "groups": []}
OWNED_BY_JOB = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]


def test_a_gpu_pod_must_be_created_by_the_job_controller() -> None:
    policy = _policy("trainyard-queue-required")
    gpu_pod = _pod(resources={"limits": {"nvidia.com/gpu": 1}})
    assert denials(policy, gpu_pod, "pods", "vision")
    assert denials(policy, _pod(), "pods", "vision") == []
    assert denials(policy, _pod(resources={"limits": {"nvidia.com/gpu": "0"}}), "pods", "vision") == []
    assert denials(policy, gpu_pod, "pods", "vision", user=JOB_CONTROLLER) == []
    # An ownerReference is the requester's own words: it exempts nothing.
    owned = copy.deepcopy(gpu_pod)
    owned["metadata"]["ownerReferences"] = OWNED_BY_JOB
    assert denials(policy, owned, "pods", "vision")
    mig = _pod(resources={"requests": {"nvidia.com/mig-1g.10gb": 1}})
    assert denials(policy, mig, "pods", "vision")


def _job(labels: dict[str, str] | None = None, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "vision", "labels": labels or {}}
    if owners:
        meta["ownerReferences"] = owners
    pod = _pod(resources={"limits": {"nvidia.com/gpu": 8}})["spec"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": True, "template": {"spec": pod}}}


JOBSET_CONTROLLER = {"username": "system:serviceaccount:kubeflow-system:jobset-controller"}
TRAINER_CONTROLLER = {"username": "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"}


@pytest.mark.parametrize(("labels", "owners", "user", "allowed"), [
    ({QUEUE: "vision"}, None, None, True),
    ({}, None, None, False),
    ({QUEUE: "nlp"}, None, None, False),  # another team's queue
    ({}, [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "x", "uid": "u", "controller": True}],
     None, False),  # a claimed owner is no exemption
    ({}, None, JOBSET_CONTROLLER, True),  # the JobSet controller makes a JobSet's Jobs
    ({}, None, TRAINER_CONTROLLER, False),  # ... and only it
])
def test_jobs_carry_their_queue_unless_the_jobset_controller_creates_them(
        labels: dict[str, str], owners: list[dict[str, Any]] | None, user: dict[str, Any] | None,
        allowed: bool) -> None:
    job = _job(labels, owners)
    assert (denials(_policy("trainyard-queue-required"), job, "jobs", "vision", user=user) == []) is allowed


def test_jobsets_carry_their_queue_unless_the_trainer_creates_them() -> None:
    policy = _policy("trainyard-queue-required")
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "namespace": "vision"}, "spec": {"replicatedJobs": []}}
    assert denials(policy, jobset, "jobsets", "vision")
    assert denials(policy, jobset, "jobsets", "vision", user=JOBSET_CONTROLLER)
    assert denials(policy, jobset, "jobsets", "vision", user=TRAINER_CONTROLLER) == []


@pytest.mark.parametrize(("resource", "make"), [("jobs", lambda q: _job(q)), ("trainjobs", None)])
def test_the_queue_label_cannot_be_removed_or_changed_on_update(resource: str, make: Any) -> None:
    policy = _policy("trainyard-queue-required")

    def build(labels: dict[str, str]) -> dict[str, Any]:
        if make is not None:
            return make(labels)
        job = _trainjob()
        job["metadata"]["labels"] = labels
        return job
    queued = build({QUEUE: "vision"})
    for after, allowed in (({QUEUE: "vision"}, True), ({}, False), ({QUEUE: "nlp"}, False),
                           ({QUEUE: "vision", "x": "y"}, True)):
        changed = build(after)
        changed["spec"]["suspend"] = False
        assert (denials(policy, changed, resource, "vision", "UPDATE", old=queued) == []) is allowed, after
    # A Job the JobSet controller made without a label stays unlabelled under a tenant's update.
    if resource == "jobs":
        assert denials(policy, build({}), resource, "vision", "UPDATE", old=build({})) == []
        assert denials(policy, build({QUEUE: "vision"}), resource, "vision", "UPDATE", old=build({}))


@pytest.mark.parametrize(("change", "allowed"), [
    ({}, True),
    ({"securityContext": {"privileged": True}}, False),
    ({"securityContext": {"privileged": False}}, True),
    ({"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}, False),
    ({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, False),
    ({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}}, True),
    ({"ports": [{"containerPort": 8080, "hostPort": 8080}]}, False),
    ({"ports": [{"containerPort": 8080}]}, True),
    ({"securityContext": {"runAsUser": 0}}, False),
    ({"securityContext": {"runAsNonRoot": False}}, False),
])
def test_container_level_escapes_are_denied(change: dict[str, Any], allowed: bool) -> None:
    assert (denials(_policy("trainyard-pod-security"), _pod(**change), "pods", "vision") == []) is allowed


@pytest.mark.parametrize(("spec", "allowed"), [
    ({}, True),
    ({"hostNetwork": True}, False),
    ({"hostPID": True}, False),
    ({"hostIPC": True}, False),
    ({"hostNetwork": False}, True),
    ({"securityContext": {"runAsNonRoot": False}}, False),
    ({"securityContext": {"runAsNonRoot": True, "runAsUser": 0}}, False),
    ({"securityContext": {}}, False),  # root is the image's default: runAsNonRoot must be said
    ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, False),
])
def test_pod_level_escapes_are_denied(spec: dict[str, Any], allowed: bool) -> None:
    pod = _pod()
    pod["spec"].update(spec)
    assert (denials(_policy("trainyard-pod-security"), pod, "pods", "vision") == []) is allowed


def test_a_trainjob_patch_may_leave_the_user_to_its_runtime_but_not_choose_root() -> None:
    policy = _policy("trainyard-pod-security")
    job = _trainjob()
    pod: dict[str, Any] = {"containers": [{"name": "node"}]}
    job["spec"]["runtimePatches"] = [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]
    assert denials(policy, job, "trainjobs", "vision") == []
    pod["securityContext"] = {"runAsUser": 0}
    assert denials(policy, job, "trainjobs", "vision")
    del pod["securityContext"]
    pod["hostNetwork"] = True
    assert denials(policy, job, "trainjobs", "vision")


@pytest.mark.parametrize(("image", "allowed"), [
    (IMAGE, True),
    ("ghcr.io/kubeflow/trainer/torchtune-trainer:v2.2.1", True),
    ("docker.io/evil/miner:1.0", False),
    ("evil/miner:1.0", False),  # docker.io/evil/miner
    ("nvcr.io/nvidia-fake/x:1", False),  # a prefix must end at a path boundary
    ("nvcr.io/nvidia/pytorch:latest", False),  # unpinned
    ("nvcr.io/nvidia/pytorch", False),  # untagged: latest
    ("nvcr.io:443/nvidia/pytorch", False),  # a port is no tag
    ("nvcr.io/nvidia/pytorch@sha256:" + "a" * 64, True),
    ("nvcr.io/nvidia/pytorch@md5:00", False),
])
def test_images_come_from_allowed_registries(image: str, allowed: bool) -> None:
    policy = _policy("trainyard-allowed-registries")
    assert (denials(policy, _pod(image=image), "pods", "vision") == []) is allowed
    assert (denials(policy, _trainjob(image=image), "trainjobs", "vision") == []) is allowed


def test_gpus_only_where_the_team_has_a_gpu_quota() -> None:
    policy = _policy("trainyard-gpu-quota")
    assert denials(policy, _trainjob(), "trainjobs", "vision") == []
    gpu_free = "cpu-only-team"  # every onprem-lab team has a GPU quota; any other namespace has none
    assert denials(policy, _trainjob(), "trainjobs", gpu_free)
    assert denials(policy, _trainjob(resourcesPerNode={"limits": {"cpu": 4}}), "trainjobs", gpu_free) == []


@pytest.mark.parametrize(("runtime", "resources", "allowed"), [
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: 32}}, True),
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: "32"}}, True),
    ("torch-distributed-h100", {"requests": {EFA_RESOURCE: 32}, "limits": {"nvidia.com/gpu": 8}}, True),
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8}}, False),  # NCCL would fall back to TCP
    ("torch-distributed-h100", {"limits": {"nvidia.com/gpu": 8, EFA_RESOURCE: 4}}, False),
    ("torch-distributed-h100", None, False),
    ("torch-distributed", {"limits": {"nvidia.com/gpu": 8}}, True),  # the generic runtime: any pool
])
def test_trainjobs_on_efa_runtimes_request_every_efa_interface(runtime: str, resources: dict[str, Any] | None,
                                                               allowed: bool) -> None:
    platform = platform_of("aws-prod")
    # 32 interfaces per p5.48xlarge
    assert fabric_runtimes(platform)["torch-distributed-h100"] == {"resource": EFA_RESOURCE, "count": 32}
    job = _trainjob()
    job["spec"]["runtimeRef"]["name"] = runtime
    if resources is None:
        del job["spec"]["trainer"]["resourcesPerNode"]
    else:
        job["spec"]["trainer"]["resourcesPerNode"] = resources
    policy = policies(platform)["trainyard-fabric-request"]
    assert (denials(policy, job, "trainjobs", "vision") == []) is allowed


@pytest.mark.parametrize(("limits", "allowed"), [
    ({"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}, True),
    ({"nvidia.com/gpu": 8}, False),
])
def test_trainjobs_on_infiniband_runtimes_request_the_declared_rdma_device(limits: dict[str, Any],
                                                                         allowed: bool) -> None:
    job = _trainjob(resourcesPerNode={"limits": limits})
    job["spec"]["runtimeRef"]["name"] = "torch-distributed-h100"
    policy = _policy("trainyard-fabric-request")
    assert (denials(policy, job, "trainjobs", "vision") == []) is allowed


def test_stacks_without_fabric_devices_have_no_fabric_policy() -> None:
    for stack in ("gcp-prod", "azure-prod", "local"):
        assert "trainyard-fabric-request" not in policies(platform_of(stack)), stack


PINNING = ["nvcr.io/nvidia/pytorch:25.08-py3", "nvcr.io/nvidia/pytorch:latest", "nvcr.io/nvidia/pytorch",
           "localhost:5000/x", "localhost:5000/x:1", "x@sha256:" + "0" * 64, "x@md5:1", "busybox", "busybox:1.37"]


@pytest.mark.parametrize("image", PINNING)
def test_the_cel_and_python_pinning_rules_agree(image: str) -> None:
    program = celpy.Environment()
    expression = image_pinned_cel("i")
    pinned = program.program(program.compile(expression)).evaluate({"i": celtypes.StringType(image)})
    assert bool(pinned) is not unpinned_image(image)


@pytest.mark.parametrize("amounts", [{"nvidia.com/gpu": 1}, {"nvidia.com/gpu": "0"}, {"nvidia.com/mig-1g.10gb": "2"},
                                     {"nvidia.com/gpu.shared": 1}, {"cpu": 4}, {"amd.com/gpu": 1}, {}])
def test_the_cel_and_python_gpu_predicates_agree(amounts: dict[str, Any]) -> None:
    program = celpy.Environment()
    found = program.program(program.compile(gpu_request_cel("r"))).evaluate({"r": celpy.json_to_cel(amounts)})
    assert bool(found) is asks_gpu(amounts)


def test_every_flavor_gpu_resource_is_a_gpu_for_the_predicate() -> None:
    for stack in STACKS:
        for flavor in platform_of(stack).flavors:
            assert all(is_gpu_resource(r) for r in flavor.gpu_resources), (stack, flavor.name)


CI_USER = {"username": "system:serviceaccount:vision:trainyard-ci", "groups": ["system:serviceaccounts"]}
CI_GROUP = {"username": "oidc:pipeline", "groups": ["oidc:vision-ci"]}


def _secret_patch(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"manager": "ci", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}]


@pytest.mark.parametrize(("change", "allowed"), [
    (lambda j: None, True),
    (lambda j: j["spec"]["trainer"].update(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s",
                                                                                           "key": "k"}}}]), False),
    (lambda j: j["spec"]["trainer"].update(env=[{"name": "T", "value": "plain"}]), True),
    (lambda j: j["spec"].update(initializer={"model": {"storageUri": "hf://x", "secretRef": {"name": "s"}}}), False),
    (lambda j: j["spec"]["runtimeRef"].update(kind="TrainingRuntime"), False),
    (lambda j: j["spec"].update(runtimePatches=_secret_patch({"volumes": [{"name": "v", "secret": {
        "secretName": "s"}}]})), False),
    (lambda j: j["spec"].update(runtimePatches=_secret_patch({"volumes": [{"name": "v", "projected": {
        "sources": [{"secret": {"name": "s"}}]}}]})), False),
    (lambda j: j["spec"].update(runtimePatches=_secret_patch({"containers": [{"name": "node", "envFrom": [
        {"secretRef": {"name": "s"}}]}]})), False),
    (lambda j: j["spec"].update(runtimePatches=_secret_patch({"volumes": [{"name": "d", "persistentVolumeClaim": {
        "claimName": "datasets"}}]})), True),
])
def test_ci_trainjobs_reference_no_secret(change: Any, allowed: bool) -> None:
    policy = _policy("trainyard-no-token-secrets")
    job = _trainjob()
    change(job)
    for user in (CI_USER, CI_GROUP):
        assert (denials(policy, job, "trainjobs", "vision", user=user) == []) is allowed
    assert denials(policy, job, "trainjobs", "vision") == []  # engineers may read their Secrets


def test_nobody_creates_service_account_token_secrets() -> None:
    policy = _policy("trainyard-no-token-secrets")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t", "namespace": "vision", "annotations": {
        "kubernetes.io/service-account.name": "default"}}, "type": "kubernetes.io/service-account-token"}
    assert denials(policy, secret, "secrets", "vision")
    plain = {**secret, "type": "Opaque"}
    assert denials(policy, plain, "secrets", "vision") == []
    del plain["type"]
    assert denials(policy, plain, "secrets", "vision") == []


def _marker(namespace: str = "vision") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trainyard-backup-marker",
                                                                  "namespace": namespace}, "data": {"namespace": "x"}}


@pytest.mark.parametrize(("user", "allowed"), [
    ({"username": "oidc:alice", "groups": ["oidc:vision-eng"]}, False),
    ({"username": "oidc:bob", "groups": ["oidc:nlp-read"]}, False),
    (CI_USER, False),
    ({"username": "system:serviceaccount:vision:default", "groups": ["system:serviceaccounts:vision"]}, False),
    ({"username": "system:serviceaccount:velero:velero", "groups": ["system:serviceaccounts:velero"]}, True),
    ({"username": "oidc:admin", "groups": ["oidc:platform-admins"]}, True),
])
def test_tenants_cannot_touch_the_drill_evidence(user: dict[str, Any], allowed: bool) -> None:
    policy = _policy("trainyard-drill-evidence")
    for operation in ("CREATE", "UPDATE", "DELETE"):
        obj = None if operation == "DELETE" else _marker()
        got = denials(policy, obj, "configmaps", "vision", operation, user=user, old=_marker())
        assert (got == []) is allowed, operation
    other = _marker()
    other["metadata"]["name"] = "my-config"
    assert denials(policy, other, "configmaps", "vision", user=user) == []
