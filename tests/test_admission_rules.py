"""The queue rule (trainyard-queue-required) and where every admission policy applies, from both sides, with the
policies built now from the stack's spec and admitted or refused by the offline API server (tests/admitting.py):
every team namespace's LocalQueue admitted and another's refused, each controller exempt for what it creates and only
for that, the GPU pools' tolerations and nodeName refused for tenants, the KServe predictor's exemption only where
the team serves, and no policy outside the team-labelled namespaces."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.platform.admission import JOB_CONTROLLER, policies
from infra.platform.models.serving_policy import PREDICTOR_LABEL
from infra.platform.trainer import JOBSET_CONTROLLER, TRAINER_CONTROLLER
from infra.spec.queues.flavors import gpu_taints
from infra.vocabulary import QUEUE_POLICY
from tests.admitting import (
    QUEUE,
    SYSTEM_NAMESPACE,
    by,
    cluster,
    job,
    jobset,
    messages,
    pod,
    refusals,
    trainjob,
)
from tests.cel import denials
from tests.conftest import ALL_STACKS, platform_of

STACK = "onprem-lab"
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3"  # under the stack's nvcr.io/nvidia
GPU = {"limits": {"nvidia.com/gpu": 1}}
GPU_POD_RULE = "a Pod that requests GPUs must be created by a Job that Kueue admitted: submit a TrainJob"
NODE_NAME_RULE = ("a Pod not created by a Kueue-admitted Job must not set nodeName, which skips the scheduler and the "
                  "nodes' NoSchedule taints: let the scheduler place it")
TOLERATION_RULE = "must not tolerate the GPU pools' taints"
# onprem-lab's job namespaces and their LocalQueues, as the queue rule's message lists them
WHERE = ("nlp: nlp; nlp-accept: nlp; nlp-models: nlp; speech: speech; speech-accept: speech; speech-eval: speech; "
         "speech-models: speech; vision: vision; vision-accept: vision; vision-models: vision")


def _spec(**container: Any) -> dict[str, Any]:
    return {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "image": IMAGE, **container}]}


def _queued(kind: str, namespace: str, queue: str | None) -> dict[str, Any]:
    if kind == "trainjobs":
        return trainjob(namespace, queue, IMAGE)
    return (job if kind == "jobs" else jobset)(namespace, queue, _spec())


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_job_namespace_admits_each_of_its_local_queues_and_no_other(stack: str) -> None:
    platform = platform_of(stack)
    state = cluster(platform)
    queues = {ns: set(team.local_queues) for team in platform.teams for ns in team.job_namespaces}
    every = set().union(*queues.values()) | {"nobody"}
    for ns, mine in queues.items():
        for queue in sorted(every):
            found = refusals(platform, trainjob(ns, queue), state=state)
            assert (by(QUEUE_POLICY, found) == []) is (queue in mine), (ns, queue, found)


@pytest.mark.parametrize(("kind", "name"), [("trainjobs", "TrainJob"), ("jobsets", "JobSet"), ("jobs", "Job")])
def test_each_queued_kind_needs_its_label_and_says_which_queues_exist(kind: str, name: str) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    assert refusals(platform, _queued(kind, "vision", "vision"), state=state) == []
    unlabelled = _queued(kind, "vision", None)
    # where the user reads it: the kind, the label and each namespace's queues
    assert messages(refusals(platform, unlabelled, state=state), QUEUE_POLICY) == [
        f"a {name} must carry the label {QUEUE} naming the LocalQueue of its namespace ({WHERE})"]
    # a namespace with several queues lists each (hybrid-burst's teams also have their burst queue)
    burst = platform_of("hybrid-burst")
    found = messages(refusals(burst, _queued(kind, "vision", None)), QUEUE_POLICY)
    assert len(found) == 1 and "; vision: vision, burst; vision-accept: vision, burst; " in found[0], found
    no_labels = copy.deepcopy(unlabelled)
    del no_labels["metadata"]["labels"]  # no labels map at all: the label reads as ''
    assert by(QUEUE_POLICY, refusals(platform, no_labels, state=state)), kind
    assert by(QUEUE_POLICY, refusals(platform, _queued(kind, "vision", "nlp"), state=state)), kind


# Who creates what for a tenant: each controller is exempt for its own kind, and only for it.
CREATED_BY = [
    ("jobsets", TRAINER_CONTROLLER, True), ("jobsets", JOBSET_CONTROLLER, False), ("jobsets", JOB_CONTROLLER[0], False),
    ("jobs", JOBSET_CONTROLLER, True), ("jobs", TRAINER_CONTROLLER, False), ("jobs", JOB_CONTROLLER[1], False),
    ("trainjobs", TRAINER_CONTROLLER, False), ("trainjobs", JOBSET_CONTROLLER, False),
]


@pytest.mark.parametrize(("kind", "user", "exempt"), CREATED_BY)
def test_only_the_creating_controller_skips_the_queue_label(kind: str, user: str, exempt: bool) -> None:
    platform = platform_of(STACK)
    found = by(QUEUE_POLICY, refusals(platform, _queued(kind, "vision", None), user=user,
                                      groups=("system:serviceaccounts",)))
    assert (found == []) is exempt, found


@pytest.mark.parametrize("user", [*JOB_CONTROLLER, JOBSET_CONTROLLER, TRAINER_CONTROLLER, "oidc:alice"])
def test_only_the_job_controller_creates_gpu_pods(user: str) -> None:
    platform = platform_of(STACK)
    state = cluster(platform)
    for field in ("containers", "initContainers"):
        spec = _spec()
        if field == "initContainers":
            spec["initContainers"] = [{"name": "i", "image": IMAGE, "resources": GPU}]
        else:
            spec["containers"][0]["resources"] = GPU
        found = messages(refusals(platform, pod("vision", IMAGE, **spec), user=user, state=state), QUEUE_POLICY)
        assert found == ([] if user in JOB_CONTROLLER else [GPU_POD_RULE]), (field, user, found)
    assert refusals(platform, pod("vision", IMAGE), user=user, state=state) == []  # no GPU: anyone


@pytest.mark.parametrize(("node_name", "allowed"), [(None, True), ("", True), ("gpu-a01", False)])
def test_a_tenant_pod_may_not_name_its_node(node_name: str | None, allowed: bool) -> None:
    platform = platform_of(STACK)
    spec = _spec() | ({} if node_name is None else {"nodeName": node_name})
    found = messages(refusals(platform, pod("vision", IMAGE, **spec)), QUEUE_POLICY)
    assert found == ([] if allowed else [NODE_NAME_RULE])
    if not allowed:
        assert by(QUEUE_POLICY, refusals(platform, pod("vision", IMAGE, **spec), user=JOB_CONTROLLER[0])) == []


def _tolerations(taint: dict[str, str]) -> list[tuple[dict[str, str], bool]]:
    """(toleration, whether it tolerates the GPU taint)."""
    key, value, effect = taint["key"], taint["value"], taint["effect"]
    return [
        ({"key": key, "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # tolerates every taint
        ({"key": key, "operator": "Equal", "value": value}, True),
        ({"key": key, "value": value}, True),  # Equal is the default operator
        ({"key": key, "operator": "Exists", "effect": effect}, True),
        ({"key": key, "operator": "Exists", "effect": ""}, True),
        ({"key": key, "operator": "Equal", "value": value + "x"}, False),
        ({"key": key, "operator": "Exists", "effect": "NoExecute" if effect != "NoExecute" else "NoSchedule"}, False),
        ({"key": key + "x", "operator": "Exists"}, False),
        ({"key": "dedicated", "operator": "Equal", "value": "batch", "effect": effect}, False),
    ]


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_tenant_pods_may_not_tolerate_a_gpu_pool_taint(stack: str) -> None:
    platform = platform_of(stack)
    taints = gpu_taints(platform.flavors)
    assert taints, stack
    policy = policies(platform)[QUEUE_POLICY]
    for toleration, tolerates in _tolerations(taints[0]):
        spec = _spec() | {"tolerations": [toleration]}
        found = denials(policy, pod("vision", IMAGE, **spec), "pods", "vision")
        assert (found != []) is tolerates, (stack, toleration, found)
        if tolerates:
            keys = ", ".join(sorted({t["key"] for t in taints}))
            assert found == [f"a Pod not created by a Kueue-admitted Job must not tolerate the GPU pools' taints "
                             f"({keys}), which would hold GPU nodes' CPU and memory outside the queues: drop the "
                             "toleration, or submit a TrainJob"]
            controller = {"username": JOB_CONTROLLER[1], "groups": []}
            assert denials(policy, pod("vision", IMAGE, **spec), "pods", "vision", user=controller) == []


def test_the_toleration_rule_follows_the_gpu_pools_taints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools without taints: no toleration rule; pools tainted with several keys: each is refused and named."""
    from infra.platform import admission

    platform = platform_of(STACK)
    monkeypatch.setattr(admission, "gpu_taints", lambda flavors: [])
    policy = admission.queue_policy(platform)
    spec = _spec() | {"tolerations": [{"operator": "Exists"}]}
    assert denials(policy, pod("vision", IMAGE, **spec), "pods", "vision") == []
    assert not any(TOLERATION_RULE in v["message"] for v in policy["validations"])
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
              {"key": "amd.com/gpu", "value": "", "effect": "NoSchedule"}]
    monkeypatch.setattr(admission, "gpu_taints", lambda flavors: taints)
    policy = admission.queue_policy(platform)
    for key in ("amd.com/gpu", "nvidia.com/gpu"):
        spec = _spec() | {"tolerations": [{"key": key, "operator": "Exists"}]}
        found = denials(policy, pod("vision", IMAGE, **spec), "pods", "vision")
        assert len(found) == 1 and "taints (amd.com/gpu, nvidia.com/gpu), which" in found[0], found


@pytest.mark.parametrize("kind", ["jobs", "jobsets", "trainjobs"])
def test_the_queue_label_is_kept_on_update_except_by_the_controllers(kind: str) -> None:
    policy = policies(platform_of(STACK))[QUEUE_POLICY]
    before = _queued(kind, "vision", "vision")
    for after, allowed in ((None, False), ("nlp", False), ("vision", True)):
        changed = _queued(kind, "vision", after)
        found = denials(policy, changed, kind, "vision", "UPDATE", old=before)
        assert (found == []) is allowed, (kind, after, found)
        if not allowed:
            assert found == [f"the label {QUEUE} cannot be changed or removed once set: delete and resubmit the job"]
    creator = {"jobs": JOBSET_CONTROLLER, "jobsets": TRAINER_CONTROLLER}.get(kind)
    if creator:  # the controller that made it may relabel what it owns
        user = {"username": creator, "groups": []}
        assert denials(policy, _queued(kind, "vision", None), kind, "vision", "UPDATE", user=user, old=before) == []


def test_an_unlabelled_job_stays_updatable_but_not_creatable() -> None:
    policy = policies(platform_of(STACK))[QUEUE_POLICY]
    bare = _queued("jobs", "vision", None)
    assert denials(policy, bare, "jobs", "vision", "UPDATE", old=bare) == []
    assert denials(policy, bare, "jobs", "vision", "CREATE") != []


def _predictor(namespace: str, labelled: bool = True) -> dict[str, Any]:
    gpu_pod = pod(namespace, IMAGE, **_spec(resources=GPU))
    if labelled:
        gpu_pod["metadata"]["labels"] = {PREDICTOR_LABEL: "llm"}
    return gpu_pod


def test_a_kserve_predictor_is_exempt_only_where_its_team_serves() -> None:
    platform = platform_of(STACK)  # vision serves (on the CPU pool); nlp has no serving budget
    policy = policies(platform)[QUEUE_POLICY]
    assert denials(policy, _predictor("vision-models"), "pods", "vision-models") == []
    assert denials(policy, _predictor("vision-models", labelled=False), "pods", "vision-models")
    assert denials(policy, _predictor("nlp-models"), "pods", "nlp-models")
    assert denials(policy, _predictor("vision"), "pods", "vision")  # a job namespace
    no_labels = _predictor("vision-models")
    del no_labels["metadata"]["labels"]
    assert denials(policy, no_labels, "pods", "vision-models")
    # The exemption is for Pods: a labelled Job in the models namespace still names a queue.
    labelled_job = job("vision-models", None, _spec())
    labelled_job["metadata"]["labels"] = {PREDICTOR_LABEL: "llm"}
    assert denials(policy, labelled_job, "jobs", "vision-models")


def test_no_team_serves_no_predictor_is_exempt() -> None:
    platform = platform_of("aws-prod")
    assert all(team.serving is None for team in platform.models.teams)  # type: ignore[union-attr]
    policy = policies(platform)[QUEUE_POLICY]
    assert denials(policy, _predictor("vision-models"), "pods", "vision-models")


def test_the_policies_apply_in_team_namespaces_and_nowhere_else() -> None:
    """The bindings select the team label: kube-system's own pods (privileged, unqueued, GPU) are not judged, the
    same pod in a team namespace or in a restore drill's labelled copy is."""
    platform = platform_of(STACK)
    state = cluster(platform)
    wild = _spec(image="evil/miner:latest", resources=GPU, securityContext={"privileged": True}) | {"hostNetwork": True}
    assert refusals(platform, pod(SYSTEM_NAMESPACE, IMAGE, **wild), state=state) == []
    assert refusals(platform, job(SYSTEM_NAMESPACE, None, wild), state=state) == []
    for ns in ("vision", "vision-models", "speech-eval"):
        found = refusals(platform, pod(ns, IMAGE, **wild), state=state)
        assert {line.split("'")[1] for line in found} >= {
            "trainyard-queue-required", "trainyard-pod-security", "trainyard-allowed-registries"}, (ns, found)
    drill = copy.deepcopy(state.objects)
    drill.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "vision-drill", "labels": {"trainyard.io/team": "vision"}}})
    from infra.apiserver.state import ClusterState

    found = refusals(platform, job("vision-drill", None, _spec()), state=ClusterState(drill))
    assert by(QUEUE_POLICY, found), found


@pytest.mark.parametrize(("make", "operations"), [
    (lambda: trainjob("vision", None, IMAGE), ("CREATE", "UPDATE")),
    (lambda: job("vision", None, _spec()), ("CREATE", "UPDATE")),
    (lambda: jobset("vision", None, _spec()), ("CREATE", "UPDATE")),
    (lambda: pod("vision", IMAGE, **_spec(resources=GPU)), ("CREATE",)),
])
def test_the_queue_rule_matches_its_kinds_by_their_api_group(make: Any, operations: tuple[str, ...]) -> None:
    platform = platform_of(STACK)
    rules = policies(platform)[QUEUE_POLICY]["matchConstraints"]["resourceRules"]
    obj = make()
    group = obj["apiVersion"].rpartition("/")[0]
    resource = {"TrainJob": "trainjobs", "Job": "jobs", "JobSet": "jobsets", "Pod": "pods"}[obj["kind"]]
    rule = next(r for r in rules if r["resources"] == [resource])
    assert rule == {"apiGroups": [group], "apiVersions": ["*"], "resources": [resource], "operations": list(operations)}
    assert by(QUEUE_POLICY, refusals(platform, obj, operation="CREATE")), resource


def test_pods_are_judged_when_created_only() -> None:
    """Controllers update the pods they run: Kueue removes a GPU pod's scheduling gate once its topology is assigned.
    Such an update, by an account no rule exempts, is admitted; the same pod's creation by it is not."""
    platform = platform_of(STACK)
    gated = pod("vision", IMAGE, **_spec(resources=GPU) | {"tolerations": [{"key": "nvidia.com/gpu",
                                                                            "operator": "Exists"}]})
    kueue = "system:serviceaccount:kueue-system:kueue-controller-manager"
    assert refusals(platform, gated, kueue, ("system:serviceaccounts",), "UPDATE") == []
    assert by(QUEUE_POLICY, refusals(platform, gated, kueue, ("system:serviceaccounts",), "CREATE"))
