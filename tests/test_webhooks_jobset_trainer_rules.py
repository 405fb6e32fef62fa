"""JobSet 0.12.0's and Trainer 2.2.1's webhooks, field by field, from the upstream source: kubernetes-sigs/jobset
v0.12.0 `pkg/webhooks/jobset_webhook.go` (ValidateCreate after Default: InPlaceRestart gate off, dependsOn, the
subdomain as DNS-1123 subdomain and DNS-1035 label, managedBy, the replicas x parallelism product, groupName) and
`pkg/webhooks/pod_webhook.go` (leaderPodForFollower); kubeflow/trainer v2.2.1 `pkg/webhooks/trainingruntime_webhook.go`
(validateReplicatedJobs: expectedContainerNames per ancestor), `pkg/webhooks/trainjob_webhook.go` (the runtime
registry key), `pkg/runtime/framework/plugins/{torch,flux,jobset}` Validate and `pkg/runtime/runtime.go`
GetNumGPUPerNode. Each field: a valid value admitted, the nearest invalid one refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.apiserver.state import ClusterState
from infra.apiserver.webhooks.jobset_v0_12 import exclusive_placement, jobset
from infra.apiserver.webhooks.trainer_v2_2 import runtime, torchtune_model, trainjob
from infra.spec import runtimes as rt
from tests.kueue_cluster import MANAGED

STATE = ClusterState(MANAGED)
MAX_INT32 = 2**31 - 1


def lines(found: list[Any]) -> list[str]:
    return [f"{r.field}: {r.message}".removeprefix(": ") for r in found]


def _jobset(*jobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "v"},
            "spec": {"replicatedJobs": list(jobs) or [_job("w")], **spec}}


def _job(name: str, replicas: int = 1, **template: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "template": {"spec": template}}


def test_in_place_restart_is_refused_while_its_gate_is_off() -> None:
    assert lines(jobset(_jobset(failurePolicy={"restartStrategy": "InPlaceRestart"}), STATE)) == [
        "spec.failurePolicy.restartStrategy: InPlaceRestart restart strategy cannot be set when InPlaceRestart "
        "feature gate is disabled"]
    assert jobset(_jobset(failurePolicy={"restartStrategy": "Recreate"}), STATE) == []


def test_a_job_depends_only_on_jobs_before_it() -> None:
    first, second, third = _job("a"), _job("b"), _job("c")
    third["dependsOn"] = [{"name": "a", "status": "Ready"}, {"name": "b", "status": "Complete"}]
    assert jobset(_jobset(first, second, third), STATE) == []
    second["dependsOn"] = [{"name": "c", "status": "Ready"}]
    assert lines(jobset(_jobset(first, second, third), STATE)) == [
        "spec.replicatedJobs[1].dependsOn: replicatedJob: b cannot depend on replicatedJob: c"]


@pytest.mark.parametrize(("subdomain", "refused"), [("train", False), ("t" * 63, False), ("", False),
                                                    ("t" * 64, True), ("my.train", True), ("1train", True),
                                                    ("Train", True)])
def test_the_subdomain_is_both_a_dns_subdomain_and_a_dns_label(subdomain: str, refused: bool) -> None:
    found = lines(jobset(_jobset(network={"subdomain": subdomain}), STATE))
    assert bool(found) is refused
    assert all(line.startswith("spec.network.subdomain: ") for line in found)


@pytest.mark.parametrize(("manager", "refused"), [("example.com/kueue", False), ("kueue.x-k8s.io/multikueue", False),
                                                  ("kueue", True), ("example.com/", True), ("/kueue", True)])
def test_managed_by_is_a_domain_prefixed_path(manager: str, refused: bool) -> None:
    found = lines(jobset(_jobset(managedBy=manager), STATE))
    assert bool(found) is refused and all(line.startswith("spec.managedBy: ") for line in found)


def test_managed_by_is_at_most_63_bytes() -> None:
    assert jobset(_jobset(managedBy="example.com/" + "m" * 51), STATE) == []
    assert lines(jobset(_jobset(managedBy="example.com/" + "m" * 52), STATE)) == [
        "spec.managedBy: may not be more than 63 bytes"]


@pytest.mark.parametrize(("replicas", "parallelism", "refused"), [
    (1, MAX_INT32, False), (MAX_INT32, 1, False), (2, MAX_INT32 // 2, False), (2, MAX_INT32 // 2 + 1, True),
    (MAX_INT32 + 1, 1, True)])
def test_replicas_times_parallelism_fits_an_int32(replicas: int, parallelism: int, refused: bool) -> None:
    found = [line for line in lines(jobset(_jobset(_job("w", replicas, parallelism=parallelism)), STATE))
             if "product" in line]
    assert found == ([f"spec.replicatedJobs[0]: the product of replicas and parallelism must not exceed {MAX_INT32} "
                      "for replicatedJob 'w'"] if refused else [])


def test_parallelism_defaults_to_one_in_the_product() -> None:
    assert not any("product" in line for line in lines(jobset(_jobset(_job("w", MAX_INT32)), STATE)))


@pytest.mark.parametrize(("group", "refused"), [("default", False), ("g" * 63, False), ("g" * 64, True),
                                                ("Group", True), ("1g", True)])
def test_a_group_name_is_a_dns_label(group: str, refused: bool) -> None:
    job = _job("w")
    job["groupName"] = group
    found = lines(jobset(_jobset(job), STATE))
    assert bool(found) is refused and all(line.startswith("spec.replicatedJobs[0].groupName: ") for line in found)


def test_generated_names_use_the_last_job_index() -> None:
    """GenJobName(js, job, replicas-1): 'js-w-9' fits with 10 replicas; a name that is not a DNS label is refused
    with the name it would generate."""
    assert jobset(_jobset(_job("w", 10)), STATE) == []
    bad = _jobset(_job("W_", 2))
    assert lines(jobset(bad, STATE))[0].startswith("spec.replicatedJobs[0].name: 'js-W_-1': ")


# --- exclusive placement (pod_webhook.go) --------------------------------------------------------------------------

def _pod(name: str, index: str, **annotations: str) -> dict[str, Any]:
    base = {"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "w",
            "jobset.sigs.k8s.io/job-index": "0"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "v", "labels": dict(base),
        "annotations": {**base, "alpha.jobset.sigs.k8s.io/exclusive-topology": "rack",
                        "batch.kubernetes.io/job-completion-index": index, **annotations},
        "ownerReferences": [{"uid": "u", "controller": True}]},
        "spec": {"nodeSelector": {"rack": "r1"}, "nodeName": "n1"}}


def test_only_followers_of_exclusive_jobsets_without_the_node_selector_strategy_are_checked() -> None:
    follower = _pod("js-w-0-1", "1")
    assert lines(exclusive_placement(follower, STATE)) == [
        "expected 1 leader pod (js-w-0-0), but got 0. this is an expected, transient error"]
    strategy = _pod("js-w-0-1", "1", **{"alpha.jobset.sigs.k8s.io/node-selector": "true"})
    assert exclusive_placement(strategy, STATE) == []
    not_exclusive = copy.deepcopy(follower)
    del not_exclusive["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"]
    assert exclusive_placement(not_exclusive, STATE) == []
    no_jobset = copy.deepcopy(follower)
    del no_jobset["metadata"]["annotations"]["jobset.sigs.k8s.io/jobset-name"]
    assert exclusive_placement(no_jobset, STATE) == []


@pytest.mark.parametrize("missing", ["jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                     "jobset.sigs.k8s.io/job-index"])
def test_a_follower_names_its_leader_by_three_labels(missing: str) -> None:
    follower = _pod("js-w-0-1", "1")
    del follower["metadata"]["labels"][missing]
    assert lines(exclusive_placement(follower, STATE)) == [f"pod missing label: {missing}"]


def test_the_leader_is_one_pod_of_the_same_job_in_the_same_namespace() -> None:
    follower, leader = _pod("js-w-0-1", "1"), _pod("js-w-0-0", "0")
    assert exclusive_placement(follower, ClusterState([leader])) == []
    elsewhere = copy.deepcopy(leader)
    elsewhere["metadata"]["namespace"] = "other"
    assert lines(exclusive_placement(follower, ClusterState([elsewhere]))) == [
        "expected 1 leader pod (js-w-0-0), but got 0. this is an expected, transient error"]
    assert lines(exclusive_placement(follower, ClusterState([leader, copy.deepcopy(leader)]))) == [
        "expected 1 leader pod (js-w-0-0), but got 2. this is an expected, transient error"]
    orphan = copy.deepcopy(leader)
    orphan["metadata"]["ownerReferences"] = [{"uid": "u", "controller": False}]
    assert lines(exclusive_placement(follower, ClusterState([orphan]))) == [
        'leader pod "js-w-0-0" has no owner reference']
    lone = copy.deepcopy(follower)
    lone["metadata"]["ownerReferences"] = []
    assert lines(exclusive_placement(lone, ClusterState([leader]))) == ["follower pod has no owner reference"]


# --- Trainer --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("ancestor", "container"), [("trainer", "node"), ("model-initializer", "model-initializer"),
                                                     ("dataset-initializer", "dataset-initializer")])
def test_each_ancestor_job_has_its_own_container_and_one_replica(ancestor: str, container: str) -> None:
    def runtime_with(name: str, replicas: int) -> dict[str, Any]:
        job = {"name": "j", "replicas": replicas, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}},
            "spec": {"template": {"spec": {"containers": [{"name": "sidecar"}, {"name": name}]}}}}}
        return {"kind": "TrainingRuntime", "spec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    assert runtime(runtime_with(container, 1), STATE) == []
    assert lines(runtime(runtime_with("other", 2), STATE)) == [
        "spec.template.spec.replicatedJobs[0].replicas: always must be 1",
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: must contain the required "
        f"container for the ancestor: {ancestor}"]


def test_a_job_of_no_known_ancestor_is_not_checked() -> None:
    job = {"name": "j", "replicas": 3, "template": {"metadata": {"labels": {
        "trainer.kubeflow.org/trainjob-ancestor-step": "launcher"}}}}
    assert runtime({"spec": {"template": {"spec": {"replicatedJobs": [job, {"name": "k", "replicas": 2}]}}}},
                   STATE) == []


@pytest.mark.parametrize(("name", "model"), [("torchtune-llama3.3-70b", "llama3_3/70B"), ("tune-a-b-c", ""),
                                             ("torchtune", ""), ("a-b", "")])
def test_the_torchtune_model_is_read_from_exactly_three_name_parts(name: str, model: str) -> None:
    assert torchtune_model(name) == model


def _trainjob(runtime_name: str, kind: str | None = None, group: str | None = None, **trainer: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": runtime_name}
    ref |= {"kind": kind} if kind else {}
    ref |= {"apiGroup": group} if group else {}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "vision"}, "spec": {"runtimeRef": ref, "trainer": trainer}}


def test_a_namespaced_runtime_is_found_in_the_trainjobs_namespace_only() -> None:
    namespaced = rt.read("torch-distributed")
    namespaced["kind"] = "TrainingRuntime"
    namespaced["metadata"]["namespace"] = "vision"
    assert trainjob(_trainjob("torch-distributed", "TrainingRuntime"), ClusterState([namespaced])) == []
    namespaced["metadata"]["namespace"] = "nlp"
    assert lines(trainjob(_trainjob("torch-distributed", "TrainingRuntime"), ClusterState([namespaced]))) == [
        "spec.runtimeRef: TrainingRuntime 'torch-distributed' not found: specified trainingRuntime must be created "
        "before the TrainJob is created"]
    assert lines(trainjob(_trainjob("torch-distributed", group="example.com"), ClusterState([namespaced]))) == [
        "unsupported runtime: ClusterTrainingRuntime.example.com"]


def test_every_torch_reserved_env_is_listed_sorted() -> None:
    env = [{"name": n} for n in ("PET_NODE_RANK", "OK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE",
                                 "PET_NNODES")]
    assert lines(trainjob(_trainjob("torch-distributed", env=env), ClusterState([rt.read("torch-distributed")]))) == [
        "spec.trainer.env: must not have reserved envs, invalid envs configured: [PET_MASTER_ADDR PET_MASTER_PORT "
        "PET_NNODES PET_NODE_RANK PET_NPROC_PER_NODE]"]


def _flux_runtime(processes: int | None) -> dict[str, Any]:
    flux = rt.read("torch-distributed")
    flux["metadata"]["name"] = "flux-run"
    flux["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {} if processes is None else {"numProcPerNode": processes}}
    return flux


@pytest.mark.parametrize(("processes", "refused"), [(1, False), (None, False), (0, True), (-1, True)])
def test_flux_runs_at_least_one_process_per_node(processes: int | None, refused: bool) -> None:
    found = lines(trainjob(_trainjob("flux-run"), ClusterState([_flux_runtime(processes)])))
    assert found == ([f"spec.trainer.numProcPerNode: Invalid value: {processes}: must be greater than or equal to 1 "
                      "for Flux TrainJob"] if refused else [])


def test_a_runtime_patch_may_not_set_env_on_the_node_or_initializer_containers() -> None:
    tune = rt.read("torchtune-llama3.2-1b")
    def patched(job: str, container: str, key: str = "containers") -> dict[str, Any]:
        patch = {"manager": "example.com/team", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": job, "template": {"spec": {"template": {"spec": {
                key: [{"name": container, "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}
        obj = _trainjob("torchtune-llama3.2-1b")
        obj["spec"]["runtimePatches"] = [patch]
        return obj
    for job in ("node", "model-initializer", "dataset-initializer"):
        container = job
        assert lines(trainjob(patched(job, container), ClusterState([tune]))) == [
            "spec.runtimePatches: must not have envs for the dataset-initializer, model-initializer, node containers"]
    # the runtime info has the patches merged (trainingruntime.go newRuntimeInfo -> mergeRuntimePatches), so a
    # patch's own new container exists there; a job the runtime lacks does not
    assert trainjob(patched("node", "sidecar", "initContainers"), ClusterState([tune])) == []
    assert lines(trainjob(patched("launcher", "launcher"), ClusterState([tune]))) == [
        "spec.runtimePatches: must not have replicated job that doesn't exist in the runtime job template"]


@pytest.mark.parametrize(("resources", "single_device"), [
    ({"requests": {"nvidia.com/gpu": 1}}, True), ({"limits": {"nvidia.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": 0}, "limits": {"nvidia.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": "500m"}}, True), ({"requests": {"example.com/Big-GPU": 1}}, True),
    ({"requests": {"cpu": 1}, "limits": {"amd.com/gpu": 1}}, True),
    ({"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 1}}, False),
    ({"requests": {"nvidia.com/gpu": "1001m"}}, False), ({"requests": {"cpu": 1}}, False), ({}, False)])
def test_gpus_per_node_from_requests_else_limits_rounded_up(resources: dict[str, Any], single_device: bool) -> None:
    """runtime.go GetNumGPUPerNode: the first resource whose name contains "gpu" (any case) in the requests, else
    in the limits when the requests give 0, as Quantity.Value() rounds (up). One GPU selects the single-device
    QLoRA recipe (torchtune.go getRecipeAndConfig), which Llama 3.2 needs; none (0) does not."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"],
                    resourcesPerNode=resources)
    found = trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")]))
    assert (found == []) is single_device


def test_jobset_policy_and_coordinator_refusals_say_what_upstream_says() -> None:
    """The exact texts of jobset_webhook.go: success-policy targets, the rule-name pattern, and the coordinator's
    endpoint label value with every problem joined by ', '."""
    obj = _jobset(_job("w", 1, completions=1), successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]},
                  failurePolicy={"rules": [{"name": "1rule", "action": "FailJobSet"}]},
                  coordinator={"replicatedJob": "w"}, network={"subdomain": "s" * 62 + "-"})
    found = [line for line in lines(jobset(obj, STATE)) if not line.startswith("spec.network")]
    assert found == [
        "spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name 'x' does not appear in "
        ".spec.ReplicatedJobs",
        "spec.failurePolicy.rules[0].name: invalid failure policy rule name '1rule', a failure policy rule name must "
        "start with an alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and "
        "must end with an alphanumeric character or '_'",
        f'spec.coordinator: spec will lead to invalid label value "js-w-0-0.{"s" * 62}-" for coordinator label '
        '"jobset.sigs.k8s.io/coordinator" (long JobSet / ReplicatedJob / SubDomain name?): must be no more than 63 '
        "characters, a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character"]


def _tune_runtime(*jobs: tuple[str, dict[str, str], list[tuple[str, int | None]]]) -> dict[str, Any]:
    """A torchtune Llama 3.2 1B runtime of the given jobs: (name, labels, [(container, GPUs or None)])."""
    def container(name: str, count: int | None) -> dict[str, Any]:
        return {"name": name} if count is None else {"name": name, "resources": {"limits": {"nvidia.com/gpu": count}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torchtune-llama3.2-1b"}, "spec": {"mlPolicy": {"torch": {}}, "template": {"spec": {
                "replicatedJobs": [{"name": name, "template": {"metadata": {"labels": labels}, "spec": {"template": {
                    "spec": {"containers": [container(*c) for c in containers]}}}}}
                                   for name, labels, containers in jobs]}}}}


TRAINER_LABEL = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


@pytest.mark.parametrize(("jobs", "one_gpu"), [
    ([("node", {}, [("node", 1)])], True), ([("node", {}, [("node", 2)])], False),
    ([("trainer", TRAINER_LABEL, [("node", 1)])], True), ([("other", {}, [("node", 1)])], False),
    ([("node", {}, [("sidecar", 1), ("node", 2)])], False), ([("node", {}, [("node", None), ("node", 1)])], True),
    ([("trainer", TRAINER_LABEL, [("sidecar", 1)]), ("node", {}, [("node", 1)])], True),
    ([("trainer", {"trainer.kubeflow.org/trainjob-ancestor-step": "model-initializer"}, [("node", 1)])], False)])
def test_the_runtimes_gpus_are_its_trainer_jobs_node_container(jobs: list[Any], one_gpu: bool) -> None:
    """runtime.go ExtractResourcePerNodeFromRuntime, read when the TrainJob sets no resourcesPerNode: the first job
    named `node` or labelled as the trainer ancestor whose `node` container has resources. One GPU there selects the
    single-device QLoRA recipe Llama 3.2 needs; otherwise (none found: 0) QLoRA is refused on both fields."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"])
    found = trainjob(job, ClusterState([_tune_runtime(*jobs)]))
    assert lines(found) == ([] if one_gpu else [
        "spec.trainer.numProcPerNode: must be auto or 1 for llama3_2/1B model when using QLoRA",
        "spec.trainer.resourcesPerNode: must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"])


def test_an_initializer_job_needs_its_container_and_patches_add_to_what_was_found() -> None:
    """jobset.go Validate: a configured initializer's job must hold the container of its name; a runtime patch's
    manager is a domain-prefixed path, refused beside the other findings; env on an init container named like an
    ancestor container is not the env rule's business (it reads containers only)."""
    tune = rt.read("torchtune-llama3.2-1b")
    model_job = next(j for j in tune["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "model-initializer")
    model_job["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "fetch"
    job = _trainjob("torchtune-llama3.2-1b")
    job["spec"]["initializer"] = {"model": {"storageUri": "hf://m"}, "dataset": {"storageUri": "hf://d"}}
    job["spec"]["runtimePatches"] = [{"manager": "team", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"initContainers": [
            {"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}]
    assert lines(trainjob(job, ClusterState([tune]))) == [
        "spec.runtimeRef: must have container with name - model-initializer in the model-initializer job",
        "spec.runtimePatches[0].manager: must be a domain-prefixed path (such as \"acme.io/foo\")"]


def test_jobset_refusals_accumulate_in_upstreams_order() -> None:
    """ValidateCreate appends every finding in its order: restart strategy, first job's dependsOn, subdomain,
    managedBy, then each replicated job."""
    first = _job("w", 2, parallelism=MAX_INT32)
    first["dependsOn"] = []
    obj = _jobset(first, failurePolicy={"restartStrategy": "InPlaceRestart"}, network={"subdomain": "Bad"},
                  managedBy="kueue")
    assert [line.split(":")[0] for line in lines(jobset(obj, STATE))] == [
        "spec.failurePolicy.restartStrategy", "spec.replicatedJobs[0].dependsOn", "spec.network.subdomain",
        "spec.network.subdomain", "spec.managedBy", "spec.replicatedJobs[0]"]


@pytest.mark.parametrize(("replicas", "completions", "name_length", "refused"), [
    (10, 10, 51, False), (10, 10, 52, True), (11, 10, 50, False), (11, 10, 51, True), (10, 11, 50, False),
    (10, 11, 51, True)])
def test_generated_pod_names_use_the_last_job_and_pod_index(replicas: int, completions: int, name_length: int,
                                                            refused: bool) -> None:
    """GenPodName(js, job, replicas-1, completions-1) + '-abcde' is a DNS label of at most 63 characters: with 10
    replicas and 10 completions `<name>-w-9-9-abcde` is the name plus 12; a two-digit index adds one."""
    obj = _jobset(_job("w", replicas, completions=completions))
    obj["metadata"]["name"] = "j" * name_length
    found = [line for line in lines(jobset(obj, STATE)) if "pod names" in line]
    assert found == (["spec.replicatedJobs[0].name: JobSet name is too long, pod names generated for this JobSet will "
                      "exceed 63 characters"] if refused else [])


def test_a_generated_name_that_is_no_dns_label_is_refused_with_the_job_name() -> None:
    """jobset_webhook.go reports both the job-name and the pod-name problem with the longest job name as the value."""
    assert lines(jobset(_jobset(_job("W", 2, completions=3)), STATE)) == [
        f"spec.replicatedJobs[0].name: 'js-W-1': {problem}" for problem in (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character",) * 2]


def test_a_coordinator_on_a_job_without_replicas_or_template_fields() -> None:
    """Replicas default to 1, so job index 1 is out of range; an empty template has no completions."""
    assert lines(jobset(_jobset(_job("w", completions=2) | {"replicas": 1}, coordinator={"replicatedJob": "w",
                                                                                         "jobIndex": 1}), STATE)) == [
        "spec.coordinator: coordinator job index 1 is invalid for replicatedJob w"]
    unreplicated = {"name": "w", "template": {"spec": {"completions": 2}}}
    assert lines(jobset(_jobset(unreplicated, coordinator={"replicatedJob": "w", "jobIndex": 1}), STATE)) == [
        "spec.coordinator: coordinator job index 1 is invalid for replicatedJob w"]
    assert lines(jobset(_jobset({"name": "w", "template": {}}, coordinator={"replicatedJob": "w"}), STATE)) == [
        "spec.coordinator: job for coordinator pod must be indexed completion mode, and completions number must be "
        "set"]


def test_mpi_launcher_rule_needs_two_nodes_asked_for() -> None:
    """mpi.go Validate: numNodes (default 1) of at least 2 with runLauncherAsNode and no launcher job is refused."""
    runtime_ = rt.read("deepspeed-distributed")
    runtime_["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = True
    jobs = runtime_["spec"]["template"]["spec"]["replicatedJobs"]
    runtime_["spec"]["template"]["spec"]["replicatedJobs"] = [j for j in jobs if j["name"] != "launcher"]
    assert trainjob(_trainjob("deepspeed-distributed"), ClusterState([runtime_])) == []
    assert lines(trainjob(_trainjob("deepspeed-distributed", numNodes=2), ClusterState([runtime_]))) == [
        "spec.trainer.numNodes: must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have "
        "either launcher and node"]


def test_torch_refusals_accumulate() -> None:
    """torch.go Validate then validateTorchTune: the reserved envs, then the node count, then the QLoRA rules."""
    job = _trainjob("torchtune-llama3.2-1b", command=["tune", "run"], args=["model.quantize_base=True"], numNodes=2,
                    env=[{"name": "PET_NNODES"}], resourcesPerNode={"limits": {"nvidia.com/gpu": 2}})
    assert [line.split(":")[0] for line in lines(trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")])))] == [
        "spec.trainer.env", "spec.trainer.numNodes"]
    job["spec"]["trainer"]["numNodes"] = 1
    assert [line.split(":")[0] for line in lines(trainjob(job, ClusterState([rt.read("torchtune-llama3.2-1b")])))] == [
        "spec.trainer.env", "spec.trainer.numProcPerNode", "spec.trainer.resourcesPerNode"]
