"""`trainyard admit STACK FILE...`: every example project is admitted on onprem-lab; one violating case per
rule family is refused with the rule and its reason; bad input is one line and exit 2."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.admit import answer
from infra.apiserver.schema import CrdIndex
from infra.commands import main
from tests.conftest import CRDS, ROOT, capture_of, platform_of

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

STACK = "onprem-lab"
EXAMPLE = ROOT / "examples" / "torch-distributed" / "trainjob.yaml"


@pytest.fixture(scope="module")
def crds() -> CrdIndex:
    return CrdIndex(CRDS, platform_of(STACK).spec.versions.crd_dirs())


def _answer(crds: CrdIndex, *objects: dict[str, Any], as_: str | None = None) -> list[str]:
    lines, refused = answer(platform_of(STACK), capture_of(STACK), list(objects), crds, as_)
    assert refused == sum(1 for line in {x.split(":")[0] for x in lines} if line.startswith("refused"))
    return [line for line in lines if not line.startswith("not checked")]


def _example() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))


def test_every_example_is_admitted_on_onprem_lab(capsys: pytest.CaptureFixture[str]) -> None:
    """One project at a time, as its team applies it (all of them at once exceed the namespace's storage quota)."""
    for project in sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir()):
        serving = project.name == "serving"  # an InferenceService, in the models namespace of a stack with `models`
        if serving and platform_of(STACK).models is None:
            continue
        # the pipeline's YAML is a KFP pipeline, not Kubernetes objects: its TrainJob alone is what the cluster gets
        files = sorted(str(p) for p in project.glob("*.yaml") if p.name != "train_pipeline.yaml")
        assert main(["admit", STACK, *files, "--crds", str(CRDS)]) == 0, project.name
        out = capsys.readouterr().out
        assert "refused" not in out.replace(", 0 refused", "")
        assert out.count("admitted TrainJob/") == (0 if serving else 1)


def test_all_examples_at_once_exceed_the_namespace_storage_quota(crds: CrdIndex) -> None:
    claims = [d for p in sorted((ROOT / "examples").glob("*/volumes.yaml"))
              for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
    lines = _answer(crds, *claims)
    assert any("quota: exceeded quota: team-quota, requested: requests.storage=" in line for line in lines)


def test_the_example_as_is_is_admitted(crds: CrdIndex) -> None:
    assert _answer(crds, _example()) == ["admitted TrainJob/vision/resnet-imagenet"]


def test_schema_family(crds: CrdIndex) -> None:
    job = _example()
    job["spec"]["trainer"]["numNodez"] = 2
    assert any(line.startswith("refused TrainJob/vision/resnet-imagenet: schema: spec.trainer.numNodez: not in the CRD")
               for line in _answer(crds, job))


def test_crd_cel_family(crds: CrdIndex) -> None:
    job = _example()
    job["metadata"]["name"] = "ResNet"
    assert "refused TrainJob/vision/ResNet: crd-cel: metadata.name must match RFC 1035 DNS label format" in \
        _answer(crds, job)


def test_webhook_family(crds: CrdIndex) -> None:
    job = _example()
    job["spec"]["runtimeRef"]["name"] = "torch-distributed-h200"
    assert _answer(crds, job)[0] == (
        "refused TrainJob/vision/resnet-imagenet: webhook:trainer: spec.runtimeRef: ClusterTrainingRuntime "
        "'torch-distributed-h200' not found: specified clusterTrainingRuntime must be created before the TrainJob "
        "is created")


def test_admission_policy_family(crds: CrdIndex) -> None:
    job = _example()
    job["spec"]["trainer"]["image"] = "quay.io/someone/python:3.12"
    assert any("admission-policy: ValidatingAdmissionPolicy 'trainyard-allowed-registries' denied request" in line
               for line in _answer(crds, job))


def test_pod_security_family(crds: CrdIndex) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug", "namespace": "vision"},
           "spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:25.08-py3"}]}}
    # engineers create no Pods (RBAC); the platform identity meets Pod Security like anyone
    assert any(line.startswith("refused Pod/vision/debug: pod-security: violates PodSecurity \"restricted:latest\"")
               for line in _answer(crds, pod, as_="platform"))


def test_queue_family(crds: CrdIndex) -> None:
    job = _example()
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "vision-big"
    assert any("queue: metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue 'vision-big' does not exist in "
               "namespace vision" in line for line in _answer(crds, job))


def test_an_undeclared_namespace_is_refused(crds: CrdIndex) -> None:
    job = _example()
    job["metadata"]["namespace"] = "nowhere"
    assert any('namespace: metadata.namespace: namespaces "nowhere" not found' in line for line in _answer(crds, job))


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read it"),
    ("a: [1, 2\n", "not valid YAML at line"),
    # a "billion laughs" document: nine levels of ten aliases each (10^9 values once expanded)
    ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)), "expands to more than"),
    ("a: &a [*a]\n", "recursive alias at line 1"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {x: \"a\x01b\"}\n", "U+0001 is a control character"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, name: d}\n", "metadata.name: given twice"),
    ("just text\n", "document 1: not a Kubernetes object"),
    ("apiVersion: v1\nkind: Pod\n", "document 1: not a Kubernetes object"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None,
                                          message: str) -> None:
    path = tmp_path / "m.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert main(["admit", STACK, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(path) in err


# Malformed objects a tenant may submit: each is refused (or admitted, for a null that only unsets a field), never an
# internal error. The API server validates the schema first and then calls no webhook; a null field is unset.
MALFORMED: list[tuple[str, Any, str]] = [
    ("spec", 5, "schema: spec: 5 is not of type 'object'"),
    ("spec.runtimeRef", "torch-distributed", "schema: spec.runtimeRef"),
    ("spec.trainer.numNodes", "two", "schema: spec.trainer.numNodes"),
    ("metadata.labels", ["a"], "schema: metadata.labels: must be a mapping of strings to strings"),
    ("metadata.annotations", {"a": 1}, "schema: metadata.annotations"),
]


def _with(job: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    target = job
    for key in parents:
        target = target[key]
    target[last] = value
    return job


@pytest.mark.parametrize(("path", "value", "refusal"), MALFORMED, ids=[case[0] for case in MALFORMED])
def test_a_malformed_trainjob_is_refused_by_its_schema_and_reaches_no_webhook(crds: CrdIndex, path: str, value: Any,
                                                                              refusal: str) -> None:
    lines = _answer(crds, _with(_example(), path, value))
    assert any(line.startswith(f"refused TrainJob/vision/resnet-imagenet: {refusal}") for line in lines), lines
    assert not any(": webhook" in line or ": queue" in line for line in lines), lines


def test_without_its_crd_a_malformed_trainjob_is_refused_as_undecodable() -> None:
    lines = _answer(None, _with(_example(), "spec.runtimeRef", "torch-distributed"))  # type: ignore[arg-type]
    assert lines[0].startswith("refused TrainJob/vision/resnet-imagenet: decode: a field has the wrong type"), lines


def test_a_null_field_is_an_unset_one(crds: CrdIndex) -> None:
    job = _with(_example(), "spec.trainer.resourcesPerNode", None)
    assert _answer(crds, job) == _answer(crds, _with(_example(), "spec.trainer.resourcesPerNode", {}))
