"""Pod security, registries and GPU namespaces (trainyard-pod-security, -allowed-registries, -gpu-quota), from both
sides, with the policies built now from the stack's spec: each escape refused in every workload kind and its safe
neighbour admitted; each allowed registry's images admitted, as the container runtime names them, and a near miss
refused; GPUs admitted only where a team's quota or serving budget has them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infra.platform.admission import (
    ALLOWED_CAPABILITIES,
    gpu_namespaces,
    platform_images,
    policies,
    registry_pattern,
)
from infra.spec import validate
from infra.spec.runtimes import pod_specs as runtime_pod_specs
from infra.spec.versions import AWS_CLI_IMAGE
from infra.vocabulary import GPU_QUOTA_POLICY, POD_SECURITY_POLICY, REGISTRY_POLICY
from tests.admitting import by, cluster, job, jobset, messages, patched, pod, refusals, runtime, trainjob
from tests.cel import denials
from tests.conftest import platform_of, raw_platform

STACK = "onprem-lab"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"
SAFE: dict[str, Any] = {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "image": IMAGE}]}


def _workloads(pod_spec: dict[str, Any], namespace: str = "vision") -> dict[str, dict[str, Any]]:
    """The same pod spec in every workload kind the policies judge."""
    patching = trainjob(namespace, "vision", IMAGE, runtimePatches=patched(pod_spec))
    del patching["spec"]["trainer"]["resourcesPerNode"]
    return {"pods": pod(namespace, IMAGE, **pod_spec), "jobs": job(namespace, "vision", pod_spec),
            "jobsets": jobset(namespace, "vision", pod_spec), "trainingruntimes": runtime(namespace, pod_spec),
            "trainjobs": patching}


def _container(**fields: Any) -> dict[str, Any]:
    return {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "image": IMAGE, **fields}]}


ESCAPES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (what, refused pod spec, its admitted neighbour)
    ("privileged", _container(securityContext={"privileged": True}), _container(securityContext={"privileged": False})),
    ("capability", _container(securityContext={"capabilities": {"add": ["NET_RAW"]}}),
     _container(securityContext={"capabilities": {"add": list(ALLOWED_CAPABILITIES), "drop": ["ALL"]}})),
    ("capability among allowed",
     _container(securityContext={"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_PTRACE"]}}),
     _container(securityContext={"capabilities": {"drop": ["ALL"]}})),
    ("hostPort", _container(ports=[{"containerPort": 80, "hostPort": 80}]),
     _container(ports=[{"containerPort": 80, "hostPort": 0}, {"containerPort": 81}])),
    ("root user", _container(securityContext={"runAsUser": 0}), _container(securityContext={"runAsUser": 1000})),
    ("root user of the pod", {**SAFE, "securityContext": {"runAsNonRoot": True, "runAsUser": 0}},
     {**SAFE, "securityContext": {"runAsNonRoot": True, "runAsUser": 1}}),
    ("root allowed by the container", _container(securityContext={"runAsNonRoot": False}),
     _container(securityContext={"runAsNonRoot": True})),
    ("hostNetwork", {**SAFE, "hostNetwork": True}, {**SAFE, "hostNetwork": False}),
    ("hostPID", {**SAFE, "hostPID": True}, {**SAFE, "hostPID": False}),
    ("hostIPC", {**SAFE, "hostIPC": True}, {**SAFE, "hostIPC": False}),
    ("hostPath", {**SAFE, "volumes": [{"name": "h", "hostPath": {"path": "/"}}]},
     {**SAFE, "volumes": [{"name": "e", "emptyDir": {}}]}),
    ("priority class", {**SAFE, "priorityClassName": "system-node-critical"}, {**SAFE, "priorityClassName": ""}),
    ("init container", {**SAFE, "initContainers": [{"name": "i", "image": IMAGE, "securityContext": {
        "privileged": True}}]}, {**SAFE, "initContainers": [{"name": "i", "image": IMAGE}]}),
    ("ephemeral container", {**SAFE, "ephemeralContainers": [{"name": "e", "image": IMAGE, "securityContext": {
        "runAsUser": 0}}]}, {**SAFE, "ephemeralContainers": [{"name": "e", "image": IMAGE}]}),
]


@pytest.mark.parametrize(("what", "refused", "admitted"), ESCAPES, ids=[e[0] for e in ESCAPES])
def test_each_escape_is_refused_in_every_workload_kind(what: str, refused: dict[str, Any],
                                                       admitted: dict[str, Any]) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    for kind, obj in _workloads(admitted).items():
        assert refusals(platform, obj, state=state) == [], (what, kind)
    for kind, obj in _workloads(refused).items():
        found = messages(refusals(platform, obj, state=state), POD_SECURITY_POLICY)
        # where the user reads it: the kind, every forbidden thing, and what to do instead
        assert found == [
            f"{kind}: in team namespaces no privileged container, host namespace (hostNetwork, hostPID, hostIPC), "
            "hostPath volume, hostPort, added capability (beyond NET_BIND_SERVICE), root user (set runAsNonRoot: "
            "true) or priorityClassName (pick a Kueue priority with the label kueue.x-k8s.io/priority-class)"
        ], (what, kind)


@pytest.mark.parametrize(("pod_security", "container", "complete", "patch"), [
    (None, None, False, True),  # nothing said: the runtime's runAsNonRoot holds for a patch, not for a whole pod
    ({"runAsNonRoot": True}, None, True, True),
    (None, {"runAsNonRoot": True}, True, True),
    ({"runAsNonRoot": False}, {"runAsNonRoot": True}, True, True),  # the container's word wins
    ({"runAsNonRoot": True}, {"runAsNonRoot": False}, False, False),
    ({"runAsNonRoot": False}, None, False, False),
    ({"runAsUser": 0, "runAsNonRoot": True}, {"runAsUser": 1000}, True, True),
    ({"runAsUser": 1000, "runAsNonRoot": True}, {"runAsUser": 0}, False, False),
    ({"runAsUser": 0}, None, False, False),
])
def test_the_user_is_read_from_the_container_then_the_pod(pod_security: dict[str, Any] | None,
                                                          container: dict[str, Any] | None, complete: bool,
                                                          patch: bool) -> None:
    """`complete`: a Pod, Job, JobSet or namespaced runtime is admitted; `patch`: a TrainJob's runtime patch (merged
    into its ClusterTrainingRuntime, which says runAsNonRoot) is."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": IMAGE}]}
    if pod_security is not None:
        spec["securityContext"] = pod_security
    if container is not None:
        spec["containers"][0]["securityContext"] = container
    policy = policies(platform_of(STACK))[POD_SECURITY_POLICY]
    for kind, obj in _workloads(spec).items():
        expected = patch if kind == "trainjobs" else complete
        assert (denials(policy, obj, kind, "vision") == []) is expected, (kind, pod_security, container)


def test_pod_security_judges_every_workload_kind_on_create_and_update() -> None:
    rules = policies(platform_of(STACK))[POD_SECURITY_POLICY]["matchConstraints"]["resourceRules"]
    assert {(r["apiGroups"][0], r["resources"][0], tuple(r["operations"])) for r in rules} == {
        ("", "pods", ("CREATE", "UPDATE")), ("batch", "jobs", ("CREATE", "UPDATE")),
        ("jobset.x-k8s.io", "jobsets", ("CREATE", "UPDATE")),
        ("trainer.kubeflow.org", "trainingruntimes", ("CREATE", "UPDATE")),
        ("trainer.kubeflow.org", "trainjobs", ("CREATE", "UPDATE"))}


# --- registries ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def declared() -> Any:
    """onprem-lab with declared prefixes of each shape: a host with a port and a path, localhost, Docker Hub."""
    raw = raw_platform(STACK)
    raw["policy"] = {"allowedRegistries": ["registry.example.com:5000/ml", "localhost/team",
                                           "docker.io/library/busybox"]}
    return validate(raw, STACK)


@pytest.mark.parametrize(("image", "allowed"), [
    ("registry.example.com:5000/ml/trainer:1", True),
    ("registry.example.com:5000/ml:1", True),
    ("registry.example.com:5000/ml@sha256:" + "a" * 64, True),
    ("registry.example.com:5000/mlx/trainer:1", False),
    ("registryXexample.com:5000/ml/trainer:1", False),
    ("registry.example.com:5001/ml/trainer:1", False),
    ("localhost/team/x:1", True),  # localhost is a registry host: not docker.io/localhost/...
    ("localhost/other/x:1", False),
    ("busybox:1.37", True),  # docker.io/library/busybox
    ("library/busybox:1.37", True),
    ("docker.io/library/busybox:1.37", True),
    ("docker.io/busybox:1.37", False),  # the runtime resolves no such short form here: refused
    ("alpine:3.20", False),  # docker.io/library/alpine
    ("busybox/busybox:1", False),  # docker.io/busybox/busybox
    (AWS_CLI_IMAGE, True),  # the documented publish step's client, always admitted
    ("nvcr.io/nvidia/pytorch:25.08-py3", False),  # declared prefixes replace the stack's own
])
def test_images_are_admitted_by_their_qualified_name(declared: Any, image: str, allowed: bool) -> None:
    state = cluster(declared)
    for obj in (pod("vision", image), trainjob("vision", "vision", image)):
        found = by(REGISTRY_POLICY, refusals(declared, obj, state=state))
        assert (found == []) is allowed, (image, obj["kind"], found)
        if not allowed:
            # every allowed prefix, sorted: the declared ones and the platform's own repositories
            assert "denied request: images must come from an allowed registry: docker.io/amazon/aws-cli, " in found[0]
            assert ", docker.io/library/busybox, " in found[0] and ", localhost/team, " in found[0]
            assert found[0].endswith(", registry.example.com:5000/ml"), found[0]


def test_every_image_the_platform_runs_in_team_namespaces_is_admitted() -> None:
    """The runtimes' images, the publish step's client and the models namespaces' registry and predictor images, at
    their pinned tags, though the stack's prefixes cover none of the Docker Hub ones."""
    platform = platform_of(STACK)
    state = cluster(platform)
    images = platform_images(platform)
    assert AWS_CLI_IMAGE in images and any("kserve" in image for image in images)
    assert any("model-registry" in image for image in images)
    for image in images:
        obj = pod("vision-models", image)
        assert by(REGISTRY_POLICY, refusals(platform, obj, state=state)) == [], image
    # the same repositories at another pinned tag, but not unpinned
    repository = AWS_CLI_IMAGE.rpartition(":")[0]
    for image, allowed in ((f"{repository}:2.0.0", True), (f"{repository}:latest", False), (repository, False)):
        found = by(REGISTRY_POLICY, refusals(platform, pod("vision", image),
                                             state=state))
        assert (found == []) is allowed, image


def test_without_models_the_serving_images_are_not_admitted() -> None:
    raw = raw_platform(STACK)
    del raw["models"]
    raw["teams"]["vision"].pop("serving")
    platform = validate(raw, STACK)
    predictor = next(image for image in platform_images(platform_of(STACK)) if "kserve" in image)
    assert predictor not in platform_images(platform)
    obj = pod("vision", predictor)
    assert by(REGISTRY_POLICY, refusals(platform, obj))


@pytest.mark.parametrize(("image", "pinned"), [
    (IMAGE, True), ("nvcr.io/nvidia/pytorch:latest", False), ("nvcr.io/nvidia/pytorch", False),
    ("nvcr.io/nvidia/pytorch@sha256:" + "b" * 64, True), ("nvcr.io/nvidia/pytorch@md5:00", False),
])
def test_images_are_pinned_in_every_workload_kind(image: str, pinned: bool) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    spec = {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "image": image}]}
    for kind, obj in {**_workloads(spec), "trainer": trainjob("vision", "vision", image)}.items():
        found = by(REGISTRY_POLICY, refusals(platform, obj, state=state))
        assert (found == []) is pinned, (image, kind, found)
        if not pinned:
            assert found == [f"admission-policy: ValidatingAdmissionPolicy '{REGISTRY_POLICY}' denied request: images "
                             "must be pinned: an exact tag (not latest) or an @sha256 digest"], (kind, found)


def test_a_trainer_without_an_image_runs_its_runtimes() -> None:
    platform = platform_of(STACK)
    assert refusals(platform, trainjob("vision", "vision")) == []
    imageless = {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c"}]}
    assert refusals(platform, trainjob("vision", "vision", runtimePatches=patched(imageless))) == []


def test_registry_pattern_needs_a_prefix_and_escapes_it() -> None:
    with pytest.raises(ValueError, match=r"^no allowed registry: the stack's runtimes give at least their own$"):
        registry_pattern([])
    assert registry_pattern(["A.b:1/c-d_e", "x"]) == r"^(?:A\.b\:1\/c\-d\_e|x)[/:@]"


# --- GPU namespaces ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_teams() -> Any:
    """onprem-lab with a CPU-only team, and a CPU-only team that serves on GPUs."""
    raw = raw_platform(STACK)
    raw["teams"]["etl"] = {"quota": {"cpu": {"cpu": 8, "memory": "32Gi"}}}
    raw["teams"]["tabular"] = {"quota": {"cpu": {"cpu": 8, "memory": "32Gi"}},
                               "serving": {"pool": "l40s", "gpus": 1, "cpu": 2, "memory": "4Gi"}}
    return validate(raw, STACK)


def test_gpu_namespaces_are_those_with_a_gpu_quota_or_gpu_serving(cpu_teams: Any) -> None:
    assert gpu_namespaces(cpu_teams) == ["nlp", "nlp-accept", "nlp-models", "speech", "speech-accept", "speech-eval",
                                         "speech-models", "tabular-models", "vision", "vision-accept",
                                         "vision-models"]
    raw = raw_platform(STACK)
    del raw["models"]
    raw["teams"]["vision"].pop("serving")
    assert "vision-models" not in gpu_namespaces(validate(raw, STACK))


@pytest.mark.parametrize(("namespace", "allowed"), [
    ("etl", False), ("etl-models", False), ("tabular", False), ("tabular-models", True), ("vision", True),
    ("speech-eval", True)])
def test_gpus_are_refused_where_no_team_quota_has_them(cpu_teams: Any, namespace: str, allowed: bool) -> None:
    state = cluster(cpu_teams)
    gpu = {"securityContext": {"runAsNonRoot": True}, "containers": [
        {"name": "c", "image": IMAGE, "resources": {"requests": {"nvidia.com/gpu": 1}}}]}
    objects = {**_workloads(gpu, namespace), "trainer": trainjob(namespace, None, IMAGE)}
    for kind, obj in objects.items():
        found = by(GPU_QUOTA_POLICY, refusals(cpu_teams, obj, state=state))
        assert (found == []) is allowed, (namespace, kind, found)
        if not allowed:
            assert messages(found, GPU_QUOTA_POLICY) == [
                "this namespace's team has no GPU quota: request no GPUs here, or give the team a GPU quota"]
    cpu = {"securityContext": {"runAsNonRoot": True}, "containers": [
        {"name": "c", "image": IMAGE, "resources": {"limits": {"cpu": 1}}}]}
    cpu_job = trainjob(namespace, None, IMAGE)
    cpu_job["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"cpu": 4}}
    for kind, obj in {**_workloads(cpu, namespace), "trainer": cpu_job}.items():
        assert by(GPU_QUOTA_POLICY, refusals(cpu_teams, obj, state=state)) == [], (namespace, kind)


@pytest.mark.parametrize("patch", [
    {"manager": "me"},
    {"manager": "me", "trainingRuntimeSpec": {}},
    {"manager": "me", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}},
    {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {}}}},
    {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}}},
    {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"metadata": {"labels": {"a": "b"}}}}]}}}},
    {"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": {"a": "b"}}}}}}]}}}},
])
def test_a_runtime_patch_that_patches_no_pod_spec_passes(patch: dict[str, Any]) -> None:
    """Every part of a TrainJob's runtime patch down to the pod spec is optional (Trainer 2.2's schema): a patch
    that stops short of it has nothing to judge, for tenants and CI alike."""
    platform = platform_of(STACK)
    state = cluster(platform)
    job_ = trainjob("vision", "vision", IMAGE, runtimePatches=[patch])
    assert refusals(platform, job_, state=state) == []
    assert refusals(platform, job_, "system:serviceaccount:vision:trainyard-ci", (), state=state) == []


def test_every_runtime_image_is_admitted_whatever_the_declared_registries(declared: Any) -> None:
    """The runtimes' images (read from the runtimes themselves, init containers included) are the platform's own:
    admitted though the declared prefixes cover none of them."""
    state = cluster(declared)
    images = {c["image"] for r in declared.runtimes for spec in runtime_pod_specs(r)
              for field in ("initContainers", "containers") for c in spec.get(field, [])}
    assert len(images) > 5 and any("initializer" in image for image in images)
    for image in sorted(images):
        assert by(REGISTRY_POLICY, refusals(declared, pod("vision", image), state=state)) == [], image


def test_one_gpu_of_quota_makes_a_gpu_namespace() -> None:
    raw = raw_platform(STACK)
    raw["teams"]["tiny"] = {"quota": {"l40s": 1}}
    raw["teams"]["none"] = {"quota": {"l40s": 0, "cpu": {"cpu": 1, "memory": "1Gi"}}}
    namespaces = gpu_namespaces(validate(raw, STACK))
    assert "tiny" in namespaces and "none" not in namespaces


def test_the_message_names_every_allowed_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.platform import admission

    monkeypatch.setattr(admission, "ALLOWED_CAPABILITIES", ("NET_BIND_SERVICE", "SYS_NICE"))
    policy = admission.pod_security_policy()
    nice = pod("vision", IMAGE, **_container(securityContext={"capabilities": {"add": ["SYS_NICE"]}}))
    assert denials(policy, nice, "pods", "vision") == []
    raw_ = pod("vision", IMAGE, **_container(securityContext={"capabilities": {"add": ["NET_RAW"]}}))
    found = denials(policy, raw_, "pods", "vision")
    assert len(found) == 1 and "added capability (beyond NET_BIND_SERVICE, SYS_NICE), root user" in found[0], found


def test_every_step_of_a_path_is_guarded_before_the_next_is_read() -> None:
    """cel-go (the API server) fails `has(v.a.b)` when `v.a` is missing, where celpy and the offline evaluator answer
    false: so the partial runtime patches above pass on the cluster only if each step is guarded on its own."""
    from infra.platform.admission_cel import every_pod_spec

    expression = every_pod_spec(("a", "*", "b", "c"), "P")
    assert expression.startswith("(has(object.a) ? object.a.all("), expression
    inner = r"\(has\((\w+)\.b\) && has\(\1\.b\.c\) \? \[\1\.b\.c\]\.all\(s, P\) : true\)"  # whatever its name
    assert re.search(inner, expression), expression
