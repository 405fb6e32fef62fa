"""Borrowing inside a cohort: what the other queues can lend a team on each pool, the default borrowing limit
that bounds it, and the refusal of a team that could reach a whole pool other teams queue for. Sums over every
queue are made once per pool (a platform may hold a thousand teams)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import ROUND_FLOOR, Decimal
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.spec.queues.queueing import QueueFlavor, QueueingFacts, TeamQueue

# Where an entry's GPU borrowingLimit comes from when the team declares none.
DEFAULT_BORROWING_LIMIT = "queueing.defaultBorrowingLimit"


def _lends(entry: QueueFlavor, resource: str) -> Decimal:
    """What one queue entry offers the cohort: its lending limit, else all of its nominal quota."""
    limit = entry.lending.get(resource)
    return limit if limit is not None else entry.nominal.get(resource, Decimal(0))


class Cohort:
    """Sums over every queue of the cohort per (flavor, resource), computed once each, so that asking for every
    team stays linear in the number of teams (a platform may hold a thousand)."""

    def __init__(self, queues: Sequence[TeamQueue], shared_pool: Mapping[str, Mapping[str, Decimal]]) -> None:
        self._shared_pool = shared_pool
        self._entries: dict[str, list[QueueFlavor]] = {}
        self._teams: dict[str, dict[str, None]] = {}
        for queue in queues:
            for entry in queue.flavors:
                self._entries.setdefault(entry.flavor, []).append(entry)
                self._teams.setdefault(entry.flavor, {})[queue.team] = None
        self._lent: dict[tuple[str, str], Decimal] = {}
        self._nominal: dict[tuple[str, str], Decimal] = {}

    def _shared(self, flavor: str, resource: str) -> Decimal:
        return self._shared_pool.get(flavor, {}).get(resource, Decimal(0))

    def lendable(self, flavor: str, resource: str, borrower: TeamQueue) -> Decimal:
        """What the cohort can lend `borrower` on a flavor: the other queues' lendable quota plus the shared pool."""
        key = (flavor, resource)
        if key not in self._lent:
            self._lent[key] = sum((_lends(e, resource) for e in self._entries.get(flavor, ())), Decimal(0))
        own = sum((_lends(e, resource) for e in borrower.flavors if e.flavor == flavor), Decimal(0))
        return self._shared(flavor, resource) + self._lent[key] - own

    def capacity(self, flavor: str, resource: str) -> Decimal:
        """Every queue's nominal quota on the flavor plus the shared pool: the pool's whole capacity."""
        key = (flavor, resource)
        if key not in self._nominal:
            self._nominal[key] = sum((e.nominal.get(resource, Decimal(0)) for e in self._entries.get(flavor, ())),
                                     Decimal(0))
        return self._shared(flavor, resource) + self._nominal[key]

    def others(self, flavor: str, team: str) -> list[str]:
        """The other teams whose queues list the flavor."""
        return [other for other in self._teams.get(flavor, ()) if other != team]


def default_limit(setting: int | str, lendable: Decimal) -> Decimal:
    """`queueing.defaultBorrowingLimit` for one entry: GPUs as given, or the percentage of what it can borrow."""
    if isinstance(setting, int):
        return Decimal(setting)
    return (lendable * int(setting[:-1]) / 100).to_integral_value(rounding=ROUND_FLOOR)


def bounded(queues: Sequence[TeamQueue], shared_pool: Mapping[str, Mapping[str, Decimal]],
             setting: int | str) -> tuple[TeamQueue, ...]:
    """Every GPU entry with a borrowing limit (the declared one, else the default) and its reach. Lendable
    amounts depend on the others' nominal and lending limits only, never on borrowing, so one pass suffices."""
    cohort = Cohort(queues, shared_pool)
    bounded = []
    for queue in queues:
        entries = []
        for entry in queue.flavors:
            borrowing: dict[str, Decimal | None] = {}
            reach: dict[str, Decimal] = {}
            for resource in queue.covered:
                lendable = cohort.lendable(entry.flavor, resource, queue)
                limit = entry.borrowing.get(resource)
                if resource in entry.borrowing and limit is None:
                    limit = default_limit(setting, lendable)
                if resource in entry.borrowing:
                    borrowing[resource] = limit
                borrowed = lendable if limit is None else min(limit, lendable)
                reach[resource] = entry.nominal.get(resource, Decimal(0)) + borrowed
            entries.append(replace(entry, borrowing=MappingProxyType(borrowing), reach=MappingProxyType(reach)))
        bounded.append(replace(queue, flavors=tuple(entries)))
    return tuple(bounded)


def whole_pool_problem(facts: QueueingFacts, setting: int | str) -> str | None:
    """A team must not reach, through Kueue, every GPU of a pool that other teams queue for too: its namespace
    ceiling would be the whole pool. A pool only one queue lists is that team's alone (Kueue lends a flavor
    only to queues that list it), so nobody else loses anything there."""
    cohort = facts.cohort
    for queue in facts.queues:
        for entry in queue.flavors:
            others = cohort.others(entry.flavor, queue.team)
            for resource, limit in entry.borrowing.items():
                total = cohort.capacity(entry.flavor, resource)
                if not others or total == 0 or entry.reach[resource] < total:
                    continue
                nominal = entry.nominal.get(resource, Decimal(0))
                borrowed = entry.reach[resource] - nominal
                where = (f"lets team {queue.team} reach all {total} {resource} of pool {entry.flavor} ({nominal} "
                         f"guaranteed + {borrowed} borrowed), which team(s) {', '.join(others)} queue for too")
                if nominal >= total:
                    return (f"teams.{queue.team}.quota.{entry.flavor}: {nominal} {where}: lower the quota so the "
                            "others can run there, or take the pool out of their quotas")
                bound = total - nominal - 1
                shown: object = limit
                if entry.limit_from == DEFAULT_BORROWING_LIMIT:
                    shown, fix = setting, (f"use a percentage below 100% or fewer GPUs, or give team {queue.team} "
                                           f"a borrowingLimit of at most {bound}")
                elif entry.limit_from == f"teams.{queue.team}.borrowingLimit":
                    fix = f"set it to at most {bound}, or give quota.{entry.flavor} its own borrowingLimit"
                else:
                    fix = f"set it to at most {bound}"
                return f"{entry.limit_from}: {shown} {where}: {fix}"
    return None
