"""Borrowing inside a cohort pinned from both sides (infra/spec/queues/borrowing.py), on queues built by hand: what
the others lend a team (lending limits, nominal quotas, the shared pool, each pool apart), the default borrowing
limit (GPUs or a percentage, rounded down), each entry's reach, and the refusal of a team that reaches a whole pool
others queue for, one GPU under the bound and at it, with each origin of the limit named. No stack, no engine.

The numbers are worked out by hand here: h100 holds 32 GPUs (4 nobody is guaranteed), l40s 16."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType

import pytest

from infra.spec.queues.borrowing import DEFAULT_BORROWING_LIMIT, bounded, default_limit, whole_pool_problem
from infra.spec.queues.queueing import QueueFlavor, QueueingFacts, TeamQueue

GPU = "nvidia.com/gpu"
Amounts = Mapping[str, int]


def _entry(flavor: str, nominal: Amounts, limit: int | None = None, lending: Amounts | None = None,
           limit_from: str = DEFAULT_BORROWING_LIMIT, gpus: tuple[str, ...] = (GPU,)) -> QueueFlavor:
    return QueueFlavor(flavor, MappingProxyType({r: Decimal(v) for r, v in nominal.items()}),
                       MappingProxyType({gpu: None if limit is None else Decimal(limit) for gpu in gpus}),
                       MappingProxyType({r: Decimal(v) for r, v in (lending or {}).items()}), limit_from)


def _queue(team: str, *entries: QueueFlavor, covered: tuple[str, ...] = (GPU,)) -> TeamQueue:
    return TeamQueue(team, covered, entries, MappingProxyType({}))


def _shared(**pools: Amounts) -> Mapping[str, Mapping[str, Decimal]]:
    return {flavor: {r: Decimal(v) for r, v in amounts.items()} for flavor, amounts in pools.items()}


def _facts(queues: list[TeamQueue], shared: Mapping[str, Mapping[str, Decimal]],
           setting: int | str) -> QueueingFacts:
    return QueueingFacts(priorities=MappingProxyType({}), flavor_order=(), topologies=(),
                         queues=bounded(queues, shared, setting), shared_pool=shared, exclude_resource_prefixes=())


@pytest.mark.parametrize(("setting", "lendable", "limit"), [
    (5, "3", 5), (0, "8", 0), ("50%", "7", 3), ("50%", "8", 4), ("100%", "7", 7), ("99%", "16", 15), ("1%", "99", 0),
    ("1%", "100", 1)])
def test_the_default_limit_is_the_gpus_given_or_the_percentage_of_the_lendable_rounded_down(
        setting: int | str, lendable: str, limit: int) -> None:
    found = default_limit(setting, Decimal(lendable))
    assert found == Decimal(limit) and found == found.to_integral_value()


def _cohort() -> list[TeamQueue]:
    """a: h100 12 (and 10 cpu), l40s 8; b: h100 16 lending 4, l40s 8 lending 2, its own limit 3 on h100;
    c: h100 0 (it only borrows), a team-wide limit 5."""
    return [_queue("a", _entry("h100", {GPU: 12, "cpu": 10}), _entry("l40s", {GPU: 8}), covered=(GPU, "cpu")),
            _queue("b", _entry("h100", {GPU: 16, "cpu": 20}, 3, {GPU: 4}, "teams.b.quota.h100.borrowingLimit"),
                   _entry("l40s", {GPU: 8}, None, {GPU: 2})),
            _queue("c", _entry("h100", {GPU: 0}, 5, None, "teams.c.borrowingLimit"))]


def test_each_entry_borrows_its_limit_of_what_the_others_lend_and_reaches_its_quota_plus_that() -> None:
    """h100 lends 4 shared + a's 12 + b's lending 4 + c's 0: a may borrow 20 - 12 = 8, of which 50% is 4; b 16 (its
    limit 3 bounds it); c all 20 (its limit 5). l40s lends a's 8 + b's 2: a 2 (50%: 1), b 8 (50%: 4). CPU has no
    borrowing limit: a borrows every lendable CPU of h100 (b's 20), none on l40s (nobody has CPU quota there)."""
    queues = _facts(_cohort(), _shared(h100={GPU: 4}), "50%").queues
    found = {(q.team, e.flavor): (dict(e.borrowing), dict(e.reach)) for q in queues for e in q.flavors}
    assert found == {
        ("a", "h100"): ({GPU: 4}, {GPU: 16, "cpu": 30}), ("a", "l40s"): ({GPU: 1}, {GPU: 9, "cpu": 0}),
        ("b", "h100"): ({GPU: 3}, {GPU: 19}), ("b", "l40s"): ({GPU: 4}, {GPU: 12}),
        ("c", "h100"): ({GPU: 5}, {GPU: 5})}
    assert [e.limit_from for q in queues for e in q.flavors] == [
        DEFAULT_BORROWING_LIMIT, DEFAULT_BORROWING_LIMIT, "teams.b.quota.h100.borrowingLimit",
        DEFAULT_BORROWING_LIMIT, "teams.c.borrowingLimit"]


def test_a_limit_above_what_the_others_lend_reaches_only_what_they_lend() -> None:
    """A default of 100 GPUs is more than any pool lends: each entry reaches its quota plus all it can borrow."""
    queues = _facts(_cohort(), _shared(h100={GPU: 4}), 100).queues
    reach = {(q.team, e.flavor): e.reach[GPU] for q in queues for e in q.flavors}
    assert reach == {("a", "h100"): 20, ("a", "l40s"): 10, ("b", "h100"): 19, ("b", "l40s"): 16, ("c", "h100"): 5}
    assert {(q.team, e.flavor): e.borrowing[GPU] for q in queues for e in q.flavors}[("a", "h100")] == 100


def test_a_pool_no_queue_lists_lends_and_holds_its_shared_part_only() -> None:
    facts = _facts(_cohort(), _shared(h100={GPU: 4}, a100={GPU: 8}), "50%")
    b = facts.queue("b")
    assert facts.cohort.lendable("a100", GPU, b) == 8 and facts.cohort.capacity("a100", GPU) == 8
    assert facts.cohort.lendable("t4", GPU, b) == 0 and facts.cohort.capacity("t4", GPU) == 0
    assert facts.cohort.others("a100", "b") == [] and facts.cohort.others("h100", "b") == ["a", "c"]
    assert facts.cohort.capacity("h100", GPU) == 32 and facts.cohort.capacity("l40s", GPU) == 16


# --- a whole pool others queue for --------------------------------------------------------------------------------

def _problem(limit: int | None, limit_from: str, setting: int | str = "50%", others: tuple[str, ...] = ("a",),
             nominal: int = 16, shared: int = 4) -> str | None:
    """b on h100: the shared GPUs, b's quota and a's (the rest of 32) make the pool; other teams list it with no
    quota, and borrow nothing. b may borrow what a and the shared part lend: 16 by default."""
    queues = [_queue(team, _entry("h100", {GPU: 32 - nominal - shared if team == "a" else 0}, 0)) for team in others]
    queues.append(_queue("b", _entry("h100", {GPU: nominal}, limit, None, limit_from)))
    return whole_pool_problem(_facts(queues, _shared(h100={GPU: shared}), setting), setting)


REACH = "lets team b reach all 32 nvidia.com/gpu of pool h100 (16 guaranteed + 16 borrowed), which team(s)"


def test_a_declared_limit_one_under_the_bound_passes_and_at_it_is_refused_at_its_path() -> None:
    path = "teams.b.quota.h100.borrowingLimit"
    assert _problem(15, path) is None
    assert _problem(16, path) == f"{path}: 16 {REACH} a queue for too: set it to at most 15"
    assert _problem(16, path, others=("a", "c")) == f"{path}: 16 {REACH} a, c queue for too: set it to at most 15"


def test_a_team_wide_limit_is_refused_with_the_pools_own_limit_as_the_other_fix() -> None:
    path = "teams.b.borrowingLimit"
    assert _problem(15, path) is None
    assert _problem(16, path) == (f"{path}: 16 {REACH} a queue for too: set it to at most 15, or give quota.h100 "
                                  "its own borrowingLimit")


@pytest.mark.parametrize(("setting", "refused"), [("99%", False), ("100%", True), (15, False), (16, True)])
def test_the_default_is_refused_as_written_and_names_the_teams_own_limit_as_the_other_fix(
        setting: int | str, refused: bool) -> None:
    found = _problem(None, DEFAULT_BORROWING_LIMIT, setting)
    assert found == (f"{DEFAULT_BORROWING_LIMIT}: {setting} {REACH} a queue for too: use a percentage below 100% "
                     "or fewer GPUs, or give team b a borrowingLimit of at most 15" if refused else None)


def test_a_guarantee_of_the_whole_pool_is_refused_at_the_quota_and_one_gpu_less_is_not() -> None:
    """b guaranteed every GPU (a lists h100 with no quota, nothing is shared): nothing to borrow, the quota is the
    problem; with 31 of 32 and the limit at 0 b stays under the pool."""
    found = _problem(0, "teams.b.quota.h100.borrowingLimit", nominal=32, shared=0, others=("c",))
    assert found == ("teams.b.quota.h100: 32 lets team b reach all 32 nvidia.com/gpu of pool h100 (32 guaranteed + 0 "
                     "borrowed), which team(s) c queue for too: lower the quota so the others can run there, or take "
                     "the pool out of their quotas")
    assert _problem(0, "teams.b.quota.h100.borrowingLimit", nominal=31, shared=1, others=("c",)) is None


def test_a_pool_nobody_else_lists_or_with_no_gpu_may_be_reached_whole() -> None:
    """Kueue lends a flavor only to queues that list it: a pool b alone lists is b's. A pool of no GPU (every quota
    0, nothing shared) is reached whole by reaching nothing."""
    assert _problem(16, "teams.b.quota.h100.borrowingLimit", others=()) is None
    assert _problem(None, DEFAULT_BORROWING_LIMIT, "100%", others=("c",), nominal=0, shared=0) is None


M1, M3 = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"


def test_each_gpu_resource_of_a_pool_is_a_pool_of_its_own() -> None:
    """A MIG pool: 16 1g slices (a's) and 4 3g ones (a's 2, 2 shared). b has 2 1g slices and no 3g quota, and may
    borrow 8 of each: it stays under the 1g slices (10 of 18) but reaches all 4 3g ones (0 guaranteed + 4)."""
    a = _queue("a", _entry("mig", {M1: 16, M3: 2}, 0, None, "teams.a.quota.mig.borrowingLimit", (M1, M3)),
               covered=(M1, M3))

    def problem(b_limit: int) -> str | None:
        b = _queue("b", _entry("mig", {M1: 2}, b_limit, None, "teams.b.quota.mig.borrowingLimit", (M1, M3)),
                   covered=(M1, M3))
        return whole_pool_problem(_facts([a, b], _shared(mig={M3: 2}), "50%"), "50%")
    assert problem(3) is None
    assert problem(8) == (f"teams.b.quota.mig.borrowingLimit: 8 lets team b reach all 4 {M3} of pool mig (0 "
                          "guaranteed + 4 borrowed), which team(s) a queue for too: set it to at most 3")
