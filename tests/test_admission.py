"""The in-cluster admission policies: what each stack declares, bound to team namespaces only, with the
queues, GPU namespaces and registries that the rest of the stack implies."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infra.apiserver.schema import check_core
from infra.platform.admission import fabric_runtimes
from infra.platform.models.serving_policy import SERVING_POLICY
from infra.platform.web import binder as web_binder
from infra.spec import SpecError, validate
from infra.spec.policy import allowed, qualified
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw

POLICIES = {"trainyard-queue-required", "trainyard-pod-security", "trainyard-allowed-registries",
            "trainyard-gpu-quota", "trainyard-no-token-secrets", "trainyard-drill-evidence",
            "trainyard-pipeline-steps"}


def _policies(capture: Any) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p["spec"] for p in kube_objects(capture, "ValidatingAdmissionPolicy")}


def _variable(spec: dict[str, Any], name: str) -> Any:
    import json

    expression = next(v["expression"] for v in spec["variables"] if v["name"] == name)
    return json.loads(expression)


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_is_bound_to_team_namespaces_only(stack: str) -> None:
    capture = capture_of(stack)
    # The web binder's policy judges one account wherever it writes (infra/platform/web/binder.py), not tenants.
    policies = {name: spec for name, spec in _policies(capture).items() if name != web_binder.NAME}
    bindings = [b for b in kube_objects(capture, "ValidatingAdmissionPolicyBinding")
                if b["metadata"]["name"] != web_binder.NAME]
    expected = POLICIES | ({"trainyard-fabric-request"} if fabric_runtimes(platform_of(stack)) else set()) | (
        {SERVING_POLICY} if platform_of(stack).models is not None else set())
    assert set(policies) == expected
    assert {b["spec"]["policyName"] for b in bindings} == expected
    for binding in bindings:
        assert binding["spec"]["validationActions"] == ["Deny"]
        # every namespace with the team label, the restore drill's copies included: no exemption
        assert binding["spec"]["matchResources"] == {"namespaceSelector": {"matchExpressions": [
            {"key": "trainyard.io/team", "operator": "Exists"}]}}
    team_namespaces = {ns["metadata"]["name"] for ns in kube_objects(capture, "Namespace")
                       if "trainyard.io/team" in ns["metadata"].get("labels", {})}
    assert team_namespaces == {ns for team in platform_of(stack).teams for ns in team.namespaces}


@pytest.mark.parametrize("stack", STACKS)
def test_policies_pass_the_strict_schema(stack: str) -> None:
    capture = capture_of(stack)
    version = platform_of(stack).spec.versions.kubernetes
    for obj in kube_objects(capture, "ValidatingAdmissionPolicy") + kube_objects(capture,
                                                                                  "ValidatingAdmissionPolicyBinding"):
        assert check_core(obj, version) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("stack", STACKS)
def test_queue_names_are_the_local_queues_of_each_namespace(stack: str) -> None:
    capture = capture_of(stack)
    queues = _variable(_policies(capture)["trainyard-queue-required"], "queues")
    declared: dict[str, list[str]] = {}
    for queue in kube_objects(capture, "LocalQueue"):
        declared.setdefault(queue["metadata"]["namespace"], []).append(queue["metadata"]["name"])
    for team in platform_of(stack).teams:  # the LocalQueue that `trainyard accept` creates for its run
        declared[f"{team.name}-accept"] = [team.queue]
    assert {ns: sorted(names) for ns, names in queues.items()} == {ns: sorted(n) for ns, n in declared.items()}


@pytest.mark.parametrize("stack", STACKS)
def test_every_expression_uses_only_declared_variables(stack: str) -> None:
    for name, spec in _policies(capture_of(stack)).items():
        declared = {v["name"] for v in spec.get("variables", [])}
        for validation in spec["validations"]:
            used = set(re.findall(r"variables\.(\w+)", validation["expression"]))
            assert used <= declared, (name, used - declared)
            assert validation["expression"].count("(") == validation["expression"].count(")")


def test_gpu_namespaces_are_those_of_teams_with_gpu_quota() -> None:
    raw = raw_platform("onprem-lab")
    raw["teams"]["etl"] = {"quota": {"cpu": {"cpu": 8, "memory": "32Gi"}}, "namespaces": ["etl", "etl-dev"]}
    spec = _policies(run_raw("onprem-lab", raw))["trainyard-gpu-quota"]
    gpu = set(_variable(spec, "gpuNamespaces"))
    assert not gpu & {"etl", "etl-dev"}
    assert {"vision", "nlp", "speech", "speech-eval"} <= gpu


def _admits(spec: dict[str, Any], image: str) -> bool:
    """What the rendered registry pattern says of an image (Python's re and RE2 agree on it: only escapes,
    a group, alternatives and a character class)."""
    return re.search(_variable(spec, "allowedImages"), qualified(image)) is not None


def test_registries_default_to_the_runtimes_images() -> None:
    spec = _policies(capture_of("local"))["trainyard-allowed-registries"]
    images = [c["image"] for runtime in platform_of("local").runtimes
              for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
              for c in job["template"]["spec"]["template"]["spec"]["containers"]]
    assert images and all(_admits(spec, image) for image in images)
    for refused in ("evil.example.com/pytorch/pytorch:2", "pytorch/pytorch-nightly:2", "dockerXio/pytorch/pytorch:2"):
        assert not _admits(spec, refused), refused


@pytest.mark.parametrize(("image", "admitted"), [
    ("registry.example.com:5000/ml/trainer:1", True),
    ("registry.example.com:5000/ml:1", True),  # the prefix is a repository itself
    ("registry.example.com:5000/ml@sha256:" + "a" * 64, True),
    ("registry.example.com:5000/mlx/trainer:1", False),  # a prefix ends at a path boundary
    ("registryXexample.com:5000/ml/trainer:1", False),  # a dot is a dot
    ("registry.example.com:50001/ml/trainer:1", False),
    ("nvcr.io/nvidia/pytorch:24.01-py3", True),
    ("evil.nvcr.io/nvidia/pytorch:1", False),  # anchored at the start
])
def test_declared_registries_are_added(declared_policy: dict[str, Any], image: str, admitted: bool) -> None:
    assert _admits(declared_policy, image) is admitted
    assert allowed(image, ["registry.example.com:5000/ml", "nvcr.io/nvidia"]) is admitted  # the spec agrees


@pytest.fixture(scope="module")
def declared_policy() -> dict[str, Any]:
    raw = raw_platform("local")
    raw["policy"] = {"allowedRegistries": ["registry.example.com:5000/ml", "nvcr.io/nvidia"]}
    return _policies(run_raw("local", raw))["trainyard-allowed-registries"]


@pytest.mark.parametrize("prefix", ["pytorch", "https://nvcr.io", "NVCR.IO/nvidia", ""])
def test_bad_registry_prefix_is_bad_input(prefix: str) -> None:
    raw = raw_platform("local")
    raw["policy"] = {"allowedRegistries": [prefix]}
    with pytest.raises(SpecError) as error:
        validate(raw, "local")
    assert "policy.allowedRegistries" in str(error.value)


@pytest.mark.parametrize(("image", "expected"), [
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("pytorch/pytorch:2.10", "docker.io/pytorch/pytorch:2.10"),
    ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/pytorch:25.01-py3"),
    ("localhost:5000/x:1", "localhost:5000/x:1"),
    ("localhost/x:1", "localhost/x:1"),
])
def test_images_are_qualified_as_the_runtime_resolves_them(image: str, expected: str) -> None:
    assert qualified(image) == expected
