"""Pods read team data as the team data account: the `datasets` ServiceAccount exists in every team namespace,
every runtime (and every example workload) runs as it, and on cloud storage the cluster binds it to the bucket with
what the cloud's mechanism needs on the account and the pods. The check fails when any of that is missing."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from infra.checks.context import Context
from infra.checks.identity import check_team_data_identity, workload_findings
from infra.offline.engine import Capture, Registration
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw
from tests.test_examples import PROJECTS, documents

SA = "datasets"
AKS_LABEL = {"azure.workload.identity/use": "true"}  # what the AKS webhook looks for on pods (upstream)


def _context(stack: str, capture: Capture | None = None) -> Context:
    return Context(platform_of(stack), capture or capture_of(stack), None)


def _team_namespaces(stack: str) -> set[str]:
    return {ns for team in platform_of(stack).teams for ns in team.namespaces}


def _pods(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    return [job["template"]["spec"]["template"] for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_the_check(stack: str) -> None:
    assert check_team_data_identity(_context(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_runtime_pod_runs_as_the_team_data_account_which_every_team_namespace_has(stack: str) -> None:
    capture = capture_of(stack)
    runtimes = kube_objects(capture, "ClusterTrainingRuntime")
    assert runtimes and {pod["spec"].get("serviceAccountName") for r in runtimes for pod in _pods(r)} == {SA}
    accounts = {a["metadata"]["namespace"] for a in kube_objects(capture, "ServiceAccount")
                if a["metadata"]["name"] == SA}
    assert accounts == _team_namespaces(stack)


def test_on_aks_runtime_pods_carry_the_workload_identity_label_and_elsewhere_not() -> None:
    def labels(stack: str) -> list[dict[str, str]]:
        return [pod.get("metadata", {}).get("labels", {}) for r in kube_objects(capture_of(stack),
                                                                                 "ClusterTrainingRuntime")
                for pod in _pods(r)]
    assert all(AKS_LABEL.items() <= found.items() for found in labels("azure-prod"))
    assert not any("azure.workload.identity/use" in found for stack in ("aws-prod", "gcp-prod")
                   for found in labels(stack))


Edit = Callable[[Registration], Registration | None]  # None drops the registration


def _edited(stack: str, edit: Edit) -> Capture:
    capture = capture_of(stack)
    kept = [r for r in (edit(dataclasses.replace(r, inputs=copy.deepcopy(r.inputs))) for r in capture.resources)
            if r is not None]
    assert len(kept) < len(capture.resources) or kept != list(capture.resources), "the edit changed nothing"
    return dataclasses.replace(capture, resources=tuple(kept))


def _drop(type_suffix: str, name: str) -> Edit:
    return lambda r: None if r.type.endswith(type_suffix) and r.name == name else r


def _runtime(name: str, change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(record: Registration) -> Registration:
        if record.name == f"runtime-{name}":
            change(_pods(record.inputs)[0])
        return record
    return edit


def _unannotated(record: Registration) -> Registration:
    if record.name == "sa-vision-datasets":
        record.inputs["metadata"].pop("annotations")
    return record


# (stack, edit, subject of the finding, words of its message)
BROKEN = [
    ("onprem-lab", _runtime("torch-distributed", lambda pod: pod["spec"].pop("serviceAccountName")),
     "ClusterTrainingRuntime torch-distributed", "runs as 'default'"),
    ("aws-prod", _runtime("jax-distributed", lambda pod: pod["spec"].update(serviceAccountName="trainyard-ci")),
     "ClusterTrainingRuntime jax-distributed", "runs as 'trainyard-ci'"),
    ("azure-prod", _runtime("torch-distributed", lambda pod: pod["metadata"]["labels"].clear()),
     "ClusterTrainingRuntime torch-distributed", "azure.workload.identity/use"),
    ("local", _drop("ServiceAccount", "sa-demo-datasets"), "ServiceAccount demo/datasets", "missing"),
    ("aws-prod", _drop("PodIdentityAssociation", "identity-nlp-datasets"), "ServiceAccount nlp/datasets",
     "not bound to the team bucket"),
    ("gcp-prod", _drop("BucketIAMMember", "identity-vision-datasets"), "ServiceAccount vision/datasets",
     "not bound to the team bucket"),
    ("azure-prod", _drop("FederatedIdentityCredential", "identity-nlp-datasets"), "ServiceAccount nlp/datasets",
     "not bound to the team bucket"),
    ("azure-prod", _unannotated, "ServiceAccount vision/datasets", "azure.workload.identity/client-id"),
]


@pytest.mark.parametrize(("stack", "edit", "subject", "words"), BROKEN)
def test_a_workload_or_account_without_the_identity_is_a_finding(stack: str, edit: Edit, subject: str,
                                                                 words: str) -> None:
    findings = check_team_data_identity(_context(stack, _edited(stack, edit)))
    assert len(findings) == 1, findings
    assert findings[0].subject == subject and words in findings[0].message, findings[0]
    assert findings[0].line().startswith("[error] identity: ") and "\n" not in findings[0].line()


def test_the_check_knows_local_team_namespaces() -> None:
    assert "demo" in _team_namespaces("local")  # the name the local case above drops


def _job(namespace: str, account: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if account:
        spec["serviceAccountName"] = account
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": namespace},
            "spec": {"template": {"spec": spec}}}


def _trainjob(account: str | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"serviceAccountName": account} if account else {"volumes": []}
    patch = {"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimePatches": [patch]}}


def test_workloads_in_team_namespaces_must_run_as_the_account_and_others_are_not_judged() -> None:
    assert workload_findings([_job("vision", SA), _job("monitoring", None)], ["vision"], {}) == []
    assert [f.subject for f in workload_findings([_job("vision", None)], ["vision"], {})] == ["Job vision/j"]
    # A TrainJob inherits its runtime's account unless a patch names another one.
    assert workload_findings([_trainjob(None), _trainjob(SA)], ["vision"], AKS_LABEL) == []
    assert [f.message.split(",")[0] for f in workload_findings([_trainjob("default")], ["vision"], {})] == [
        "a pod template runs as 'default'"]
    # On AKS the pods need the label too: a Job without it is refused, with it passes.
    labelled = _job("vision", SA)
    assert len(workload_findings([labelled], ["vision"], AKS_LABEL)) == 1
    labelled["spec"]["template"]["metadata"] = {"labels": dict(AKS_LABEL)}
    assert workload_findings([labelled], ["vision"], AKS_LABEL) == []


@pytest.mark.parametrize("project", PROJECTS)
def test_every_example_workload_runs_as_the_team_data_account(project: str) -> None:
    objs = documents(project)
    namespaces = {o["metadata"]["namespace"] for o in objs}
    assert workload_findings(objs, namespaces, {}) == []
    job = next(o for o in objs if o["kind"] == "Job")
    del job["spec"]["template"]["spec"]["serviceAccountName"]
    assert [f.subject for f in workload_findings(objs, namespaces, {})] == [
        f"Job {job['metadata']['namespace']}/{job['metadata']['name']}"]


def test_a_team_with_two_namespaces_gets_the_account_and_its_binding_in_both() -> None:
    raw = raw_platform("aws-prod")
    raw["teams"]["vision"]["namespaces"] = ["vision", "vision-dev"]
    capture = run_raw("aws-prod", raw)
    bound = {(r.inputs["namespace"], r.inputs["serviceAccount"]) for r in capture.resources
             if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"}
    assert {("vision", SA), ("vision-dev", SA)} <= bound
    accounts = {a["metadata"]["namespace"] for a in kube_objects(capture, "ServiceAccount")
                if a["metadata"]["name"] == SA}
    # and in each team's models namespace (the stack declares `models`)
    assert {"vision", "vision-dev", "nlp", "research", "vision-models", "nlp-models", "research-models"} == accounts
