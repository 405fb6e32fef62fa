"""examples/: a typical project per runtime, valid against the pinned CRDs and Kubernetes schemas, and
consistent with the onprem-lab stack it is written for (namespace, queue, priorities, runtimes, pools,
storage classes)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

from infra.apiserver.admit import answer
from infra.apiserver.schema import CrdIndex, check_core, check_custom, is_custom
from infra.platform.admission import WORKLOADS, policies
from infra.spec import runtimes as rt
from infra.spec.base import parse_quantity
from tests.cel import denials
from tests.conftest import ROOT, capture_of, kube_objects, platform_of
from tests.test_runtimes import restricted_problems

EXAMPLES = ROOT / "examples"
# examples/pipelines is a KFP pipeline and examples/serving an InferenceService, not projects of this shape:
# tests/test_example_pipeline.py and tests/test_serving.py hold them.
PROJECTS = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and p.name not in ("pipelines", "serving"))
STACK = "onprem-lab"
POOL_LABEL = "trainyard.io/pool"


def documents(project: str) -> list[dict[str, Any]]:
    return [d for path in sorted((EXAMPLES / project).glob("*.yaml"))
            for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def one(project: str, kind: str) -> dict[str, Any]:
    found = [d for d in documents(project) if d["kind"] == kind]
    assert len(found) == 1, f"{project}: {len(found)} {kind}"
    return found[0]


@cache
def rendered() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, namespace, name) -> the object the onprem-lab stack declares."""
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
            for o in kube_objects(capture_of(STACK))}


def patch_pods(trainjob: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for patch in trainjob["spec"].get("runtimePatches", []):
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            yield job["name"], job["template"]["spec"]["template"]["spec"]


def test_every_runtime_has_an_example() -> None:
    used = {one(p, "TrainJob")["spec"]["runtimeRef"]["name"] for p in PROJECTS}
    assert {name for name in rt.available() if any(u == name or u.startswith(f"{name}-") for u in used)} == \
        set(rt.available())


@pytest.mark.parametrize("project", PROJECTS)
def test_every_manifest_validates_against_the_pinned_schemas(project: str, crds_dir: Path) -> None:
    index = CrdIndex(crds_dir, platform_of(STACK).spec.versions.crd_dirs())
    kinds = []
    for document in documents(project):
        kinds.append(document["kind"])
        problems = check_custom(document, index) if is_custom(document, index) else check_core(document, "1.34")
        assert problems == [], (document["kind"], problems)
    assert {"TrainJob", "PersistentVolumeClaim", "Job"} <= set(kinds) and kinds.count("PersistentVolumeClaim") == 2
    trainjob = one(project, "TrainJob")
    assert TrainerV1alpha1TrainJob.from_dict(trainjob).to_dict() == trainjob


@pytest.mark.parametrize("project", PROJECTS)
def test_the_trainjob_fits_the_stack(project: str) -> None:
    trainjob, objects = one(project, "TrainJob"), rendered()
    namespace, labels = trainjob["metadata"]["namespace"], trainjob["metadata"]["labels"]
    assert ("LocalQueue", namespace, labels["kueue.x-k8s.io/queue-name"]) in objects
    assert ("WorkloadPriorityClass", "", labels["kueue.x-k8s.io/priority-class"]) in objects
    runtime = objects[("ClusterTrainingRuntime", "", trainjob["spec"]["runtimeRef"]["name"])]
    containers = {job["name"]: {c["name"] for c in job["template"]["spec"]["template"]["spec"]["containers"]}
                  for job in rt.replicated_jobs(runtime)}
    for job, pod in patch_pods(trainjob):
        assert {c["name"] for c in pod["containers"]} <= containers[job], job
        assert {m["name"] for c in pod["containers"] for m in c["volumeMounts"]} <= {v["name"] for v in pod["volumes"]}
        if POOL_LABEL in pod.get("nodeSelector", {}):
            assert ("ResourceFlavor", "", pod["nodeSelector"][POOL_LABEL]) in objects


def admissible_pools(trainjob: dict[str, Any]) -> list[str]:
    """The pools of the TrainJob's queue that Kueue may admit it to: tolerated taints, matching node selector."""
    objects = rendered()
    queue = objects[("ClusterQueue", "", trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"])]
    runtime = objects[("ClusterTrainingRuntime", "", trainjob["spec"]["runtimeRef"]["name"])]
    selectors = [pod.get("nodeSelector", {}) for pod in rt.pod_specs(runtime)]
    selectors += [pod.get("nodeSelector", {}) for _, pod in patch_pods(trainjob)]
    pinned = {s[POOL_LABEL] for s in selectors if POOL_LABEL in s}
    pools = []
    for entry in queue["spec"]["resourceGroups"][0]["flavors"]:
        taints = objects[("ResourceFlavor", "", entry["name"])]["spec"].get("nodeTaints", [])
        if (not pinned or entry["name"] in pinned) and all(rt.tolerates(runtime, t) for t in taints):
            pools.append(entry["name"])
    return pools


def _queue_holds(queue: dict[str, Any], pool: str, resource: str) -> Decimal:
    """The most of a resource the ClusterQueue can hold on a pool: nominal plus its borrowing limit, if any."""
    entry = next(f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == pool)
    quota = next((r for r in entry["resources"] if r["name"] == resource), None)
    if quota is None or "borrowingLimit" not in quota:
        return Decimal("Infinity")
    return parse_quantity(str(quota["nominalQuota"])) + parse_quantity(str(quota["borrowingLimit"]))


@pytest.mark.parametrize("project", PROJECTS)
def test_the_queue_covers_what_the_trainjob_requests_on_a_pool_that_holds_it(project: str) -> None:
    trainjob, platform = one(project, "TrainJob"), platform_of(STACK)
    queue = rendered()[("ClusterQueue", "", trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"])]
    resources = trainjob["spec"]["trainer"]["resourcesPerNode"]
    # Kueue leaves fabric devices out (queueing.excludeResourcePrefixes): they come with the node.
    excluded = platform.queueing.exclude_resource_prefixes
    per_node = {name: parse_quantity(str(v)) for name, v in {**resources.get("limits", {}),
                                                             **resources["requests"]}.items()
                if not name.startswith(excluded)}
    assert set(per_node) <= set(queue["spec"]["resourceGroups"][0]["coveredResources"])
    nodes = trainjob["spec"]["trainer"].get("numNodes", 1)
    holding = [pool for pool in admissible_pools(trainjob)
               if all(nodes * amount <= platform.flavor(pool).capacity.get(name, 0)
                      and nodes * amount <= _queue_holds(queue, pool, name)
                      and amount * platform.pool(pool).node_count <= platform.flavor(pool).capacity.get(name, 0)
                      for name, amount in per_node.items())]
    assert holding, f"{project}: {nodes} nodes x {per_node} fit no pool it may be admitted to"


@pytest.mark.parametrize("project", PROJECTS)
def test_volumes_use_the_stacks_classes_and_are_the_ones_mounted(project: str) -> None:
    objects = rendered()
    claims = {d["metadata"]["name"]: d for d in documents(project) if d["kind"] == "PersistentVolumeClaim"}
    for claim in claims.values():
        assert ("StorageClass", "", claim["spec"]["storageClassName"]) in objects
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    mounted = {v["persistentVolumeClaim"]["claimName"] for _, pod in patch_pods(one(project, "TrainJob"))
               for v in pod["volumes"] if "persistentVolumeClaim" in v}
    published = {v["persistentVolumeClaim"]["claimName"]
                 for v in one(project, "Job")["spec"]["template"]["spec"]["volumes"]}
    assert mounted == set(claims) and published < set(claims)
    config_maps = {v["configMap"]["name"] for _, pod in patch_pods(one(project, "TrainJob"))
                   for v in pod["volumes"] if "configMap" in v}
    assert config_maps == {d["metadata"]["name"] for d in documents(project) if d["kind"] == "ConfigMap"}


@pytest.mark.parametrize("project", PROJECTS)
def test_the_publish_job_is_a_restricted_kueue_job_on_cpu(project: str) -> None:
    job, objects = one(project, "Job"), rendered()
    pod = job["spec"]["template"]["spec"]
    assert restricted_problems(pod) == []
    queue = objects[("ClusterQueue", "", job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"])]
    untainted = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]
                 if not objects[("ResourceFlavor", "", f["name"])]["spec"].get("nodeTaints")]
    assert "tolerations" not in pod and untainted  # Kueue can admit it only to an untainted (CPU) pool
    assert job["metadata"]["labels"]["app.kubernetes.io/part-of"] == one(project, "TrainJob")["metadata"]["name"]


@pytest.mark.parametrize("project", PROJECTS)
def test_every_project_lives_in_one_namespace(project: str) -> None:
    assert {d["metadata"]["namespace"] for d in documents(project)} == \
        {one(project, "TrainJob")["metadata"]["namespace"]}


@pytest.mark.parametrize("project", PROJECTS)
def test_every_manifest_passes_the_stacks_admission_policies(project: str) -> None:
    """What a team applies is what the cluster admits: each object of the project against every policy that
    matches its kind, evaluated as the API server would."""
    plurals = {workload.kind: plural for plural, workload in WORKLOADS.items()}
    for obj in documents(project):
        resource = plurals.get(obj["kind"])
        if resource is None:
            continue
        for name, policy in policies(platform_of(STACK)).items():
            matched = {r for rule in policy["matchConstraints"]["resourceRules"] for r in rule["resources"]}
            if resource in matched:
                assert denials(policy, obj, resource, obj["metadata"]["namespace"]) == [], (obj["kind"], name)


ALL = ["local", "onprem-lab", "aws-prod", "gcp-prod", "azure-prod", "hybrid-burst"]


def _on_stack(project: str, stack: str) -> list[dict[str, Any]]:
    """The project as a team of the stack applies it: in `vision` where the stack has it, else its first team."""
    platform = platform_of(stack)
    team = next((t for t in platform.teams if t.name == "vision"), platform.teams[0])
    text = "\n---\n".join(p.read_text(encoding="utf-8") for p in sorted((EXAMPLES / project).glob("*.yaml")))
    return [d for d in yaml.safe_load_all(text.replace("vision", team.name)) if d]


def _applies(project: str, stack: str) -> bool:
    """Where the example applies: the stack's queues cover (or Kueue leaves out) every resource its TrainJob asks
    a node for, and its runtime is installed."""
    platform = platform_of(stack)
    trainjob = one(project, "TrainJob")
    per_node = trainjob["spec"]["trainer"].get("resourcesPerNode", {})
    names = {*per_node.get("requests", {}), *per_node.get("limits", {})}
    covered = set(platform.covered_resources)
    return trainjob["spec"]["runtimeRef"]["name"] in {r["metadata"]["name"] for r in platform.runtimes} and all(
        n in covered or n.startswith(platform.queueing.exclude_resource_prefixes) for n in names)


@pytest.mark.parametrize("stack", ALL)
def test_admit_admits_every_example_as_the_engineer_of_its_team(stack: str, crds_dir: Path) -> None:
    """`trainyard admit`, one project at a time, as the team's ml-engineer (RBAC, admission, quota, queues)."""
    platform = platform_of(stack)
    index = CrdIndex(crds_dir, platform.spec.versions.crd_dirs())
    applied = [p for p in PROJECTS if _applies(p, stack)]
    assert "cpu-batch" in applied  # with its scheduled variant, on every stack
    for project in applied:
        lines, refused = answer(platform, capture_of(stack), _on_stack(project, stack), index)
        assert refused == 0, (project, [line for line in lines if line.startswith("refused")])
    assert any(d["kind"] == "CronJob" for d in _on_stack("cpu-batch", stack))
