"""The capacity rules pinned from both sides (infra/spec/queues/capacity.py), on pools, quotas, queues and runtimes
built by hand: guarantees at a pool's allocatable pass and one unit past are refused (with and without serving
budgets, autoscaled or not, allocatable below the nodes' capacity or not), a GPU pool no queue lists is stranded
unless it offers nothing, quota names a pool does not offer, lending above the guarantee, borrowing with nothing to
borrow, taints no runtime tolerates (each effect), resources no queue covers (all queues, some, excluded prefixes)
and runtimes a queue cannot reach (taints, node selectors). No engine: the stack is onprem-lab's spec, its facts
replaced; every figure is worked out here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest

from infra.spec import Platform, validate
from infra.spec.derive import TeamFacts
from infra.spec.queues.borrowing import DEFAULT_BORROWING_LIMIT
from infra.spec.queues.capacity import (
    borrowing_findings,
    lending_findings,
    pool_fit_findings,
    quota_resource_findings,
    runtime_reach_findings,
    runtime_resource_findings,
    toleration_findings,
)
from infra.spec.queues.flavors import Flavor
from infra.spec.queues.queueing import QueueFlavor, QueueingFacts, TeamQueue
from tests.conftest import raw_platform

GPU = "nvidia.com/gpu"
GI = 2**30
LAB = "onprem-lab"  # its spec: team vision's serving budget is on pool `cpu`, nlp and speech have none
Amounts = Mapping[str, int | Decimal]


def _decimals(amounts: Amounts) -> Mapping[str, Decimal]:
    return MappingProxyType({r: Decimal(v) for r, v in amounts.items()})


def _flavor(name: str, capacity: Amounts, *, allocatable: Amounts | None = None, max_capacity: Amounts | None = None,
            taints: Sequence[Mapping[str, str]] = (), labels: Mapping[str, str] | None = None,
            gpus: tuple[str, ...] = (GPU,)) -> Flavor:
    return Flavor(name, name, MappingProxyType(dict(labels or {})), tuple(taints), (), _decimals(capacity), gpus,
                  MappingProxyType({}), "reserved", max_capacity=_decimals(max_capacity or {}),
                  allocatable=_decimals(capacity if allocatable is None else allocatable))


def _entry(flavor: str, nominal: Amounts, *, borrowing: Mapping[str, int | None] | None = None,
           lending: Mapping[str, int | None] | None = None, limit_from: str = DEFAULT_BORROWING_LIMIT) -> QueueFlavor:
    def given(values: Mapping[str, int | None] | None) -> Mapping[str, Decimal | None]:
        return MappingProxyType({r: None if v is None else Decimal(v) for r, v in (values or {}).items()})
    return QueueFlavor(flavor, _decimals(nominal), given(borrowing), given(lending), limit_from)


def _queue(team: str, *entries: QueueFlavor, covered: tuple[str, ...] = (GPU, "cpu", "memory")) -> TeamQueue:
    return TeamQueue(team, covered, entries, MappingProxyType({}))


def _team(name: str, quota: Mapping[str, Amounts]) -> TeamFacts:
    return TeamFacts(name, (name,), name, MappingProxyType({f: _decimals(a) for f, a in quota.items()}),
                     MappingProxyType({}), Decimal(1), MappingProxyType({}))


@pytest.fixture(scope="module")
def lab() -> Platform:
    return validate(raw_platform(LAB), LAB)


def _platform(lab: Platform, flavors: Sequence[Flavor], queues: Sequence[TeamQueue] = (), *,
              runtimes: Sequence[Mapping[str, Any]] = (), serving: Mapping[str, Amounts] | None = None,
              shared: Mapping[str, Amounts] | None = None, exclude: tuple[str, ...] = ()) -> Platform:
    """onprem-lab's spec with these pools, queues (each team's quota is its queue's nominal amounts) and runtimes."""
    sums: dict[str, dict[str, Decimal]] = {f.name: {} for f in flavors}
    for queue in queues:
        for entry in queue.flavors:
            for resource, amount in entry.nominal.items():
                sums[entry.flavor][resource] = sums[entry.flavor].get(resource, Decimal(0)) + amount
    teams = tuple(_team(q.team, {e.flavor: e.nominal for e in q.flavors}) for q in queues)
    platform = dataclasses.replace(
        lab, flavors=tuple(flavors), teams=teams, quota_sums=sums, runtimes=tuple(runtimes),
        serving_sums={pool: _decimals(a) for pool, a in (serving or {}).items()})
    platform.__dict__["queueing"] = QueueingFacts(
        priorities=MappingProxyType({}), flavor_order=(), topologies=(), queues=tuple(queues),
        shared_pool={pool: _decimals(a) for pool, a in (shared or {}).items()}, exclude_resource_prefixes=exclude)
    return platform


def _lines(findings: Sequence[Any]) -> list[str]:
    return [f.line() for f in findings]


# --- guarantees fit the pool ---------------------------------------------------------------------------------------

def _fit(lab: Platform, gpus: int, **flavor: Any) -> list[str]:
    """Pool l40s of 16 GPUs (unless changed); teams a and b guarantee 8 and gpus - 8; a serving budget of 0."""
    pool = _flavor("l40s", {GPU: 16}, **flavor)
    queues = [_queue("a", _entry("l40s", {GPU: 8})), _queue("b", _entry("l40s", {GPU: gpus - 8}))]
    return _lines(pool_fit_findings(_platform(lab, [pool], queues, serving={"l40s": {GPU: 0}})))


def test_guarantees_at_the_pools_allocatable_pass_and_one_gpu_past_is_refused_with_the_figures(lab: Platform) -> None:
    assert _fit(lab, 16) == []
    assert _fit(lab, 17) == ["[error] capacity: flavor l40s: teams guarantee 17 nvidia.com/gpu but the pool offers 16: "
                             "lower a team quota or add nodes"]


def test_the_guarantee_is_held_to_the_allocatable_and_names_what_the_nodes_keep(lab: Platform) -> None:
    """The nodes hold 16 GPUs but their kubelet keeps 1: 15 fit, 16 do not, and the message says why."""
    assert _fit(lab, 15, allocatable={GPU: 15}) == []
    assert _fit(lab, 16, allocatable={GPU: 15}) == [
        "[error] capacity: flavor l40s: teams guarantee 16 nvidia.com/gpu but the pool offers 15 allocatable (16 less "
        "what the kubelet and the platform's DaemonSets keep): lower a team quota or add nodes"]


def test_nodes_above_an_autoscaled_pools_minimum_are_named_as_only_borrowable(lab: Platform) -> None:
    """16 GPUs at the minimum node count, 17 at the maximum: the guarantee is held to 16. A maximum equal to the
    minimum is not autoscaling."""
    assert _fit(lab, 16, max_capacity={GPU: 17}) == []
    assert _fit(lab, 17, max_capacity={GPU: 17}) == [
        "[error] capacity: flavor l40s: teams guarantee 17 nvidia.com/gpu but the pool offers 16 at its minimum node "
        "count (nodes above the minimum are only borrowable): lower a team quota or add nodes"]
    assert _fit(lab, 17, max_capacity={GPU: 16}) == _fit(lab, 17)


def test_every_resource_of_the_pool_is_held_to_its_own_allocatable_and_memory_is_told_in_gi(lab: Platform) -> None:
    """cpu 64 (allocatable 63.5), memory 256Gi; a resource nobody guarantees counts as 0."""
    pool = _flavor("cpu", {"cpu": 64, "memory": 256 * GI, GPU: 0}, allocatable={"cpu": Decimal("63.5"),
                                                                                 "memory": 256 * GI, GPU: 0})

    def lines(cpu: str, memory: int) -> list[str]:
        queues = [_queue("a", _entry("cpu", {"cpu": Decimal(cpu), "memory": memory}))]
        return _lines(pool_fit_findings(_platform(lab, [pool], queues)))
    assert lines("63.5", 256 * GI) == []
    assert lines("63.6", 257 * GI) == [
        "[error] capacity: flavor cpu: teams guarantee 63.6 cpu but the pool offers 63.5 allocatable (64 less what the "
        "kubelet and the platform's DaemonSets keep): lower a team quota or add nodes",
        "[error] capacity: flavor cpu: teams guarantee 257Gi memory but the pool offers 256Gi: lower a team quota or "
        "add nodes"]
    assert lines("64.000", 256 * GI) == [
        "[error] capacity: flavor cpu: teams guarantee 64 cpu but the pool offers 63.5 allocatable (64 less what the "
        "kubelet and the platform's DaemonSets keep): lower a team quota or add nodes"]


def test_memory_the_kubelet_keeps_is_told_in_gi_too(lab: Platform) -> None:
    pool = _flavor("cpu", {"cpu": 64, "memory": 256 * GI}, allocatable={"cpu": 64, "memory": 250 * GI}, gpus=())

    def lines(memory: int) -> list[str]:
        return _lines(pool_fit_findings(_platform(lab, [pool], [_queue("a", _entry("cpu", {"memory": memory}))])))
    assert lines(250 * GI) == []
    assert lines(251 * GI) == [
        "[error] capacity: flavor cpu: teams guarantee 251Gi memory but the pool offers 250Gi allocatable (256Gi less "
        "what the kubelet and the platform's DaemonSets keep): lower a team quota or add nodes"]


def test_a_serving_budget_counts_beside_the_quotas_at_the_edge_and_names_the_budgets_team(lab: Platform) -> None:
    """Pool cpu is vision's serving pool in onprem-lab: 14 guaranteed + 2 served fit 16 GPUs, 3 served do not; an
    over-guaranteed pool with a budget is told once, as the budget's finding."""
    pool = _flavor("cpu", {GPU: 16})

    def lines(gpus: int, served: int) -> list[str]:
        queues = [_queue("a", _entry("cpu", {GPU: gpus}))]
        return _lines(pool_fit_findings(_platform(lab, [pool], queues, serving={"cpu": {GPU: served}})))
    assert lines(14, 2) == [] and lines(16, 0) == []
    past = ("[error] capacity: teams.vision.serving: on pool cpu, the teams' Kueue quotas (14) plus the serving "
            "budgets (3) ask 17 nvidia.com/gpu but the pool offers 16: lower a serving budget or a team quota, or add "
            "nodes")
    assert lines(14, 3) == [past]
    assert lines(17, 1) == [past.replace("(14)", "(17)").replace("(3) ask 17", "(1) ask 18")]


def test_a_memory_budget_is_told_in_gi_at_every_figure(lab: Platform) -> None:
    pool = _flavor("cpu", {"memory": 256 * GI}, gpus=())

    def lines(served: int) -> list[str]:
        queues = [_queue("a", _entry("cpu", {"memory": 250 * GI}))]
        return _lines(pool_fit_findings(_platform(lab, [pool], queues, serving={"cpu": {"memory": served}})))
    assert lines(6 * GI) == []
    assert lines(8 * GI) == [
        "[error] capacity: teams.vision.serving: on pool cpu, the teams' Kueue quotas (250Gi) plus the serving budgets "
        "(8Gi) ask 258Gi memory but the pool offers 256Gi: lower a serving budget or a team quota, or add nodes"]


def test_a_gpu_pool_no_queue_lists_is_stranded_unless_it_offers_no_gpu(lab: Platform) -> None:
    """Pools t4 (1 GPU) and a10 (0 at the minimum of an autoscaled pool that grows to 4) are listed by no queue,
    nor is a pool of 0 GPUs; b lists them with no guarantee: not stranded (b may borrow them)."""
    pools = [_flavor("l40s", {GPU: 16}), _flavor("t4", {GPU: 1}), _flavor("a10", {GPU: 0}, max_capacity={GPU: 4}),
             _flavor("empty", {GPU: 0}), _flavor("cpu", {"cpu": 8}, gpus=())]
    alone = [_queue("a", _entry("l40s", {GPU: 16}))]
    stranded = ("[warning] capacity: flavor {}: {} nvidia.com/gpu stranded: no team queue lists this pool; give a "
                "team a quota on it")
    assert _lines(pool_fit_findings(_platform(lab, pools, alone))) == [stranded.format("t4", 1),
                                                                       stranded.format("a10", 4)]
    listed = [*alone, _queue("b", _entry("t4", {GPU: 0}), _entry("a10", {GPU: 0}))]
    assert pool_fit_findings(_platform(lab, pools, listed)) == []


# --- quota names, lending, borrowing --------------------------------------------------------------------------------

def test_a_quota_on_a_resource_the_pool_does_not_offer_is_refused_unless_it_is_zero(lab: Platform) -> None:
    pool = _flavor("l40s", {"memory": GI, GPU: 16, "cpu": 8})

    def lines(mig: int) -> list[str]:
        queues = [_queue("a", _entry("l40s", {GPU: 8, "nvidia.com/mig-1g.10gb": mig}))]
        return _lines(quota_resource_findings(_platform(lab, [pool], queues)))
    assert lines(0) == []
    assert lines(1) == ["[error] capacity: flavor l40s: team a is guaranteed 1 nvidia.com/mig-1g.10gb, which this pool "
                        "does not offer (it offers cpu, memory, nvidia.com/gpu): quota the pool's own resources"]


def test_a_lending_limit_up_to_the_guarantee_passes_and_one_past_is_refused(lab: Platform) -> None:
    """a is guaranteed 8 GPUs and no cpu on l40s; no limit is no limit."""
    def lines(lending: Mapping[str, int | None]) -> list[str]:
        queues = [_queue("a", _entry("l40s", {GPU: 8}, lending=lending))]
        return _lines(lending_findings(_platform(lab, [_flavor("l40s", {GPU: 16, "cpu": 8})], queues)))
    assert lines({GPU: 8}) == lines({GPU: None}) == lines({"cpu": 0}) == []
    assert lines({GPU: 9}) == [
        "[error] capacity: flavor l40s: team a lends up to 9 nvidia.com/gpu but is guaranteed only 8: a lendingLimit "
        "must not exceed the nominal quota"]
    assert lines({"cpu": 1}) == ["[error] capacity: flavor l40s: team a lends up to 1 cpu but is guaranteed only 0: a "
                            "lendingLimit must not exceed the nominal quota"]


def _borrowing(lab: Platform, limit: int | None, lent: int, shared: int = 0,
               limit_from: str = "teams.b.quota.l40s.borrowingLimit") -> list[Any]:
    """a keeps all but `lent` of its 8 GPUs on l40s, `shared` more are nobody's; b may borrow `limit`."""
    queues = [_queue("a", _entry("l40s", {GPU: 8}, lending={GPU: lent})),
              _queue("b", _entry("l40s", {GPU: 8}, borrowing={GPU: limit}, limit_from=limit_from))]
    return borrowing_findings(_platform(lab, [_flavor("l40s", {GPU: 16 + shared})], queues,
                                        shared={"l40s": {GPU: shared}}))


def test_a_declared_borrowing_limit_with_nothing_to_borrow_is_warned(lab: Platform) -> None:
    assert _lines(_borrowing(lab, 3, 0)) == [
        "[warning] capacity: flavor l40s: team b may borrow 3 nvidia.com/gpu but nothing in cohort trainyard can lend "
        "it: every unit is guaranteed and kept (lendingLimit 0); the borrowingLimit has no effect"]


@pytest.mark.parametrize(("limit", "lent", "shared", "limit_from"), [
    (3, 1, 0, "teams.b.borrowingLimit"), (3, 0, 1, "teams.b.borrowingLimit"), (0, 0, 0, "teams.b.borrowingLimit"),
    (None, 0, 0, "teams.b.borrowingLimit"), (3, 0, 0, DEFAULT_BORROWING_LIMIT)])
def test_borrowing_is_not_warned_with_one_gpu_to_borrow_no_limit_or_the_platforms_default(
        lab: Platform, limit: int | None, lent: int, shared: int, limit_from: str) -> None:
    assert _borrowing(lab, limit, lent, shared, limit_from) == []


# --- taints and runtimes ---------------------------------------------------------------------------------------------

def _runtime(name: str, *pods: Mapping[str, Any]) -> dict[str, Any]:
    jobs = [{"template": {"spec": {"template": {"spec": dict(pod)}}}} for pod in pods]
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {"replicatedJobs": jobs}}}}


def _pod(*tolerations: Mapping[str, str], selector: Mapping[str, str] | None = None,
         requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None,
         init: bool = False) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": dict(requests or {}), "limits": dict(limits or {})}}
    pod: dict[str, Any] = {"tolerations": [dict(t) for t in tolerations]}
    if selector is not None:  # most runtimes' pods set no node selector at all
        pod["nodeSelector"] = dict(selector)
    pod["initContainers" if init else "containers"] = [container]
    return pod


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _tainted(lab: Platform, taints: Sequence[Mapping[str, str]], runtimes: Sequence[Mapping[str, Any]],
             gpus: int = 8) -> list[str]:
    """Team a holds `gpus` on the tainted l40s, after an entry with no guarantee on an untainted pool."""
    queues = [_queue("a", _entry("t4", {GPU: 0, "cpu": 0}), _entry("l40s", {GPU: gpus, "cpu": 0}))]
    pools = [_flavor("t4", {GPU: 4, "cpu": 8}), _flavor("l40s", {GPU: 16, "cpu": 8}, taints=taints)]
    return _lines(toleration_findings(_platform(lab, pools, queues, runtimes=runtimes)))


def test_a_quota_on_a_pool_whose_taint_no_runtime_tolerates_is_refused_per_admitting_effect(lab: Platform) -> None:
    """NoSchedule and NoExecute keep Kueue from admitting; PreferNoSchedule does not. One runtime tolerating the
    taint is enough."""
    taints = [GPU_TAINT, {"key": "spot", "effect": "NoExecute"}, {"key": "soft", "value": "x",
                                                                   "effect": "PreferNoSchedule"}]
    plain = _runtime("plain", _pod())
    message = ("[error] capacity: flavor l40s: team a has a quota here but no runtime (plain, gpu) tolerates the "
               "pool's taint {}, so Kueue admits none of its jobs to this pool: enable a runtime for this kind of pool "
               "or change the pool's taints")
    assert _tainted(lab, taints, [plain, _runtime("gpu", _pod(GPU_TOLERATION))]) == [
        message.format("spot:NoExecute")]
    assert _tainted(lab, taints, [plain, _runtime("gpu", _pod(GPU_TOLERATION, {"key": "spot", "operator": "Exists"}))
                                  ]) == []
    assert _tainted(lab, taints[:1], [plain, _runtime("gpu", _pod())]) == [
        message.format("nvidia.com/gpu=present:NoSchedule")]


def test_an_untolerated_taint_is_refused_only_where_the_team_has_a_guarantee_and_named_with_no_runtime(
        lab: Platform) -> None:
    assert _tainted(lab, [GPU_TAINT], [], gpus=0) == []
    assert _tainted(lab, [GPU_TAINT], [], gpus=1) == [
        "[error] capacity: flavor l40s: team a has a quota here but no runtime (none) tolerates the pool's taint "
        "nvidia.com/gpu=present:NoSchedule, so Kueue admits none of its jobs to this pool: enable a runtime for this "
        "kind of pool or change the pool's taints"]


def _covered(lab: Platform, runtimes: Sequence[Mapping[str, Any]], *covers: tuple[str, ...],
             exclude: tuple[str, ...] = ()) -> list[str]:
    teams = "abc"[:len(covers)]
    queues = [_queue(team, _entry("l40s", {GPU: 1}), covered=c) for team, c in zip(teams, covers, strict=True)]
    pool = _flavor("l40s", {GPU: 16, "cpu": 8})
    return _lines(runtime_resource_findings(_platform(lab, [pool], queues, runtimes=runtimes, exclude=exclude)))


RDMA = "rdma/ib"


def test_a_resource_no_queue_covers_is_refused_and_one_some_queues_miss_is_warned_per_team(lab: Platform) -> None:
    """The largest request of any container counts, in init containers and from limits too."""
    runtimes = [_runtime("torch", _pod(requests={"cpu": "1"}), _pod(limits={GPU: "8"}, init=True)),
                _runtime("rdma", _pod(requests={RDMA: "1"}))]
    assert _covered(lab, runtimes, (GPU, "cpu", RDMA), (GPU, "cpu", RDMA)) == []
    assert _covered(lab, runtimes, (GPU, "cpu"), ("cpu",), (GPU, "cpu")) == [
        "[warning] capacity: runtime torch: requests nvidia.com/gpu, which the queues of b do not cover: their jobs "
        "on this runtime stay pending",
        "[error] capacity: runtime rdma: requests rdma/ib, which no ClusterQueue covers: Kueue would never admit its "
        "jobs; add a pool that offers it or drop the runtime from trainer.runtimes"]
    assert _covered(lab, runtimes, ("cpu",), ("cpu", RDMA), ("cpu",)) == [
        "[error] capacity: runtime torch: requests nvidia.com/gpu, which no ClusterQueue covers: Kueue would never "
        "admit its jobs; add a pool that offers it or drop the runtime from trainer.runtimes",
        "[warning] capacity: runtime rdma: requests rdma/ib, which the queues of a, c do not cover: their jobs on "
        "this runtime stay pending"]


def test_an_excluded_resource_prefix_is_never_reported_and_no_queue_means_no_finding(lab: Platform) -> None:
    """The excluded resource sorts before the uncovered one, which is still reported."""
    runtimes = [_runtime("rdma", _pod(requests={RDMA: "1", "cpu": "1", "vendor.io/x": "1"}))]
    uncovered = ("[error] capacity: runtime rdma: requests {}, which no ClusterQueue covers: Kueue would never admit "
                 "its jobs; add a pool that offers it or drop the runtime from trainer.runtimes")
    assert _covered(lab, runtimes, ("cpu",), exclude=("rdma/",)) == [uncovered.format("vendor.io/x")]
    both = [uncovered.format(r) for r in (RDMA, "vendor.io/x")]
    assert _covered(lab, runtimes, ("cpu",), exclude=("rdma/x",)) == both
    assert _covered(lab, runtimes) == []


def _reach(lab: Platform, *runtimes: Mapping[str, Any]) -> list[str]:
    """a lists the tainted, labelled GPU pool; b only the plain CPU pool; c both."""
    pools = [_flavor("l40s", {GPU: 16}, taints=[GPU_TAINT, {"key": "soft", "effect": "PreferNoSchedule"}],
                     labels={"pool": "l40s", "gpu": "l40s"}),
             _flavor("cpu", {"cpu": 8}, labels={"pool": "cpu"}, gpus=())]
    queues = [_queue("a", _entry("l40s", {GPU: 1})), _queue("b", _entry("cpu", {"cpu": 1})),
              _queue("c", _entry("cpu", {"cpu": 1}), _entry("l40s", {GPU: 1}))]
    return _lines(runtime_reach_findings(_platform(lab, pools, queues, runtimes=runtimes)))


def _shut_out(team: str, *names: str) -> str:
    return (f"[warning] capacity: team {team}: its queue lists no pool that {len(names)} runtime(s) may run on (taints "
            f"or node selector): {', '.join(names)}; its jobs on them stay pending: give it a quota (0 to borrow) on "
            "such a pool, or set queueing.borrowAnyPool")


def test_a_queue_that_lists_no_pool_a_runtime_may_run_on_is_warned(lab: Platform) -> None:
    """A runtime reaches a pool when every pod tolerates its admitting taints and no node selector contradicts
    the pool's labels (a label the pool does not set is no contradiction)."""
    tolerant = _runtime("tolerant", _pod(GPU_TOLERATION))
    anywhere = _runtime("anywhere", _pod(GPU_TOLERATION, selector={"zone": "any"}))
    assert _reach(lab, tolerant, anywhere) == []
    picky = _runtime("picky", _pod(GPU_TOLERATION, selector={"gpu": "l40s", "pool": "l40s"}))
    untolerant = _runtime("untolerant", _pod(selector={"pool": "l40s"}), _pod())
    # untolerant's pods each reach one pool, none both: it runs nowhere
    assert _reach(lab, picky, untolerant) == [_shut_out("a", "untolerant"), _shut_out("b", "picky", "untolerant"),
                                              _shut_out("c", "untolerant")]
    half = _runtime("half", _pod(GPU_TOLERATION), _pod())
    elsewhere = _runtime("elsewhere", _pod(GPU_TOLERATION, selector={"pool": "h100"}))
    assert _reach(lab, half, elsewhere) == [_shut_out("a", "half", "elsewhere"), _shut_out("b", "elsewhere"),
                                            _shut_out("c", "elsewhere")]
