"""`trainyard admit` answers for pipelines as for every other workload, on every stack: a Workflow whose step asks
for a GPU (an Argo template, or a KFP task with an accelerator) is refused by `trainyard-pipeline-steps` with
its reason, the same Workflow without the GPU is admitted; a GPU step pod is refused (`trainyard-queue-required`),
the same pod without it admitted; the TrainJob a step submits as its run's ServiceAccount is admitted on its
team's queue and refused on another team's queue or in another team's namespace."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.admit import answer
from infra.apiserver.identity import resolve
from infra.apiserver.schema import CrdIndex
from infra.commands import main
from infra.platform.admission_steps import STEP_ACCOUNT
from tests import pipelines as p
from tests.conftest import ALL_STACKS, CRDS, capture_of, kube_objects, platform_of

pytestmark = pytest.mark.usefixtures("repo_runs")

STEPS = "ValidatingAdmissionPolicy 'trainyard-pipeline-steps' denied request: "
GPU_STEP = STEPS + "a pipeline step may not request GPUs"
KFP_STEP = STEPS + "a KFP task may not set an accelerator"
GPU_POD = ("ValidatingAdmissionPolicy 'trainyard-queue-required' denied request: a Pod that requests GPUs must be "
           "created by a Job that Kueue admitted")


@pytest.fixture(scope="module", params=ALL_STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _crds(stack: str) -> CrdIndex:
    """The pinned CRDs, and Argo's and KFP's from the vendored release where the stack renders none (as the
    Kubeflow Pipelines install does): a Workflow is checked against the CRD the cluster would hold."""
    index = CrdIndex(CRDS, platform_of(stack).spec.versions.crd_dirs())
    if not any(c["spec"]["group"] == "argoproj.io" for c in kube_objects(capture_of(stack),
                                                                         "CustomResourceDefinition")):
        index.install(p.vendored_crds())
    return index


def _lines(stack: str, *objects: dict[str, Any], as_: str = "platform") -> list[str]:
    lines, refused = answer(platform_of(stack), capture_of(stack), [copy.deepcopy(o) for o in objects],
                            _crds(stack), as_)
    kept = [line for line in lines if not line.startswith(("not checked", "warning"))]
    assert refused == sum(line.startswith("refused") for line in {x.split(":")[0] for x in kept})
    return kept


def _namespace(stack: str, team: int = 0) -> str:
    return platform_of(stack).teams[team].namespaces[0]


def _template(stack: str, gpus: int | str | None = None, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"name": "main", "container": p.container(p.image(platform_of(stack)), gpus, resource)}


def test_a_workflow_without_gpus_is_admitted_in_a_team_namespace(stack: str) -> None:
    ns = _namespace(stack)
    assert _lines(stack, p.workflow(ns, _template(stack))) == [f"admitted Workflow/{ns}/prepare"]
    assert _lines(stack, p.workflow(ns, _template(stack, 0))) == [f"admitted Workflow/{ns}/prepare"]  # zero GPUs


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"])
def test_a_workflow_whose_template_asks_for_a_gpu_is_refused_with_the_rule_and_its_reason(stack: str,
                                                                                         resource: str) -> None:
    ns = _namespace(stack)
    lines = _lines(stack, p.workflow(ns, _template(stack, 1, resource)))
    assert len(lines) == 1 and lines[0].startswith(f"refused Workflow/{ns}/prepare: admission-policy: {GPU_STEP}")
    assert "\n" not in lines[0] and "create a TrainJob labelled kueue.x-k8s.io/queue-name" in lines[0]


def test_a_kfp_run_is_refused_with_an_accelerator_and_admitted_without(stack: str) -> None:
    ns = _namespace(stack)
    name = f"Workflow/{ns}/train-pipeline-x7k2p"
    assert _lines(stack, p.kfp_run(ns)) == [f"admitted {name}"]
    lines = _lines(stack, p.kfp_run(ns, p.GPU_ACCELERATOR))
    assert len(lines) == 1 and lines[0].startswith(f"refused {name}: admission-policy: {KFP_STEP}")


def test_templates_schedules_and_recurring_runs_are_judged_as_their_workflows(stack: str) -> None:
    ns = _namespace(stack)
    gpu, cpu = _template(stack, 1), _template(stack)
    template = p.workflow(ns, gpu, name="train", kind="WorkflowTemplate")
    assert _lines(stack, template)[0].startswith(f"refused WorkflowTemplate/{ns}/train: admission-policy: {GPU_STEP}")
    assert _lines(stack, p.cron_workflow(ns, gpu))[0].startswith(
        f"refused CronWorkflow/{ns}/nightly: admission-policy: {GPU_STEP}")
    assert _lines(stack, p.cron_workflow(ns, cpu)) == [f"admitted CronWorkflow/{ns}/nightly"]
    assert _lines(stack, p.scheduled_workflow(ns, p.kfp_run(ns, p.GPU_ACCELERATOR)))[0].startswith(
        f"refused ScheduledWorkflow/{ns}/nightly: admission-policy: {KFP_STEP}")
    assert _lines(stack, p.scheduled_workflow(ns, p.kfp_run(ns))) == [f"admitted ScheduledWorkflow/{ns}/nightly"]


def test_a_gpu_step_pod_is_refused_and_the_same_pod_without_it_admitted(stack: str) -> None:
    ns = _namespace(stack)
    picture = p.image(platform_of(stack))
    assert _lines(stack, p.step_pod(ns, picture)) == [f"admitted Pod/{ns}/prepare-main-1234"]
    lines = _lines(stack, p.step_pod(ns, picture, gpus=1))
    assert any(line.startswith(f"refused Pod/{ns}/prepare-main-1234: admission-policy: {GPU_POD}") for line in lines)


def test_a_steps_trainjob_is_admitted_on_its_teams_queue_only(stack: str) -> None:
    platform = platform_of(stack)
    team = platform.teams[0]
    ns, step = team.namespaces[0], f"pipeline-step:{team.name}"
    assert _lines(stack, p.step_trainjob(ns, team.local_queues[0]), as_=step) == [f"admitted TrainJob/{ns}/train-step"]
    other = next((t.local_queues[0] for t in platform.teams if t.name != team.name), "nobody")
    lines = _lines(stack, p.step_trainjob(ns, other), as_=step)
    assert any(line.startswith(f"refused TrainJob/{ns}/train-step: admission-policy: ValidatingAdmissionPolicy "
                               "'trainyard-queue-required' denied request: a TrainJob must carry the label") for
               line in lines), lines


def test_a_step_cannot_submit_into_another_teams_namespace(stack: str) -> None:
    platform = platform_of(stack)
    if len(platform.teams) < 2:
        pytest.skip("one team: no other team's namespace")  # local
    team, other = platform.teams[0], platform.teams[1]
    ns = other.namespaces[0]
    lines = _lines(stack, p.step_trainjob(ns, other.local_queues[0]), as_=f"pipeline-step:{team.name}")
    assert lines == [f'refused TrainJob/{ns}/train-step: rbac: trainjobs.trainer.kubeflow.org "train-step" is '
                     f'forbidden: User "system:serviceaccount:{team.namespaces[0]}:{STEP_ACCOUNT}" cannot create '
                     f'resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace "{ns}"']
    assert _lines(stack, p.step_trainjob(ns, other.local_queues[0]), as_=f"pipeline-step:{other.name}") == [
        f"admitted TrainJob/{ns}/train-step"]


def test_a_kind_no_crd_defines_is_refused_as_the_api_server_does() -> None:
    lines, refused = answer(platform_of("onprem-lab"), capture_of("onprem-lab"), [
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "vision"}}],
        CrdIndex(CRDS, platform_of("onprem-lab").spec.versions.crd_dirs()), "platform")
    assert refused == 1 and lines[0] == ('refused Widget/vision/w: schema: no matches for kind "Widget" in version '
                                         '"example.com/v1": the stack installs no CRD that defines it')



def test_the_pipeline_personas_are_the_identities_kfp_and_argo_run_as(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    platform = platform_of("onprem-lab")
    assert resolve(platform, "pipelines", [])[1].user == "system:serviceaccount:kubeflow:ml-pipeline"
    assert resolve(platform, "workflow-controller", [])[1].user == p.ARGO_CONTROLLER
    assert resolve(platform, "pipeline-step:nlp", [])[1].user == f"system:serviceaccount:nlp:{STEP_ACCOUNT}"
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(p.kfp_run("vision")), encoding="utf-8")
    for bad, why in (("pipelines:vision", "pipelines is not a team's persona"),
                     ("pipeline-step:nobody", "the stack has no team 'nobody'")):
        assert main(["admit", "onprem-lab", str(manifest), "--as", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err
