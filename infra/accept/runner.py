"""The acceptance runner: each check in turn under its time limit, its outcome and evidence recorded.

A check is a function of a Run; it raises Failed (or TimeLimit, through Run.wait) to fail, returns a one-line
summary to pass, and raises Skipped when the stack offers nothing to check. Every wait goes through the Run's
clock, so tests drive time instead of sleeping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from infra.accept.kube import Kube
    from infra.live.frontdoor import Web
    from infra.live.pipelines import PipelinesApi
    from infra.spec import Platform

T = TypeVar("T")
Status = Literal["passed", "failed", "skipped"]
POLL_SECONDS = 5.0
RUN_LABEL = "trainyard.io/acceptance-run"  # on what a run makes outside its own namespace (and on the namespace)


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class WallClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Failed(Exception):
    """The check ran and the platform did not do what it should."""


class TimeLimit(Failed):
    """The check's time limit passed while it waited."""


class Skipped(Exception):
    """Nothing to check on this stack (e.g. no pool with several nodes), said why."""


@dataclass
class Result:
    name: str
    status: Status
    seconds: float
    limit_seconds: float
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """What a check works with: the stack's facts, the cluster, the namespace and team queue it uses, the clock,
    the deadline of the check in progress and the evidence it gathers."""

    platform: Platform
    kube: Kube
    namespace: str
    team: str
    clock: Clock
    drain_node: str | None = None
    stamp: str = ""  # UTC time of the run, for names of objects outside the namespace (the drill Job)
    commit: str = ""  # the repository commit under test (what a pipeline run records as its code)
    render: Callable[[], Any] | None = None  # the stack's offline render (the access matrix), made on demand
    web: Web | None = None  # HTTPS to the front door (None: the real one, infra/live/frontdoor.py)
    pipelines: PipelinesApi | None = None  # the Pipelines REST API (None: the real one, infra/live/pipelines.py)
    deadline: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)

    def wait(self, what: str, probe: Callable[[], T | None], poll: float = POLL_SECONDS) -> T:
        """Poll until probe() returns something other than None; TimeLimit when the check's deadline passes."""
        while True:
            found = probe()
            if found is not None:
                return found
            if self.clock.now() + poll > self.deadline:
                raise TimeLimit(f"time limit reached while waiting for {what}")
            self.clock.sleep(poll)

    def hold(self, seconds: float, probe: Callable[[], str | None], poll: float = POLL_SECONDS) -> None:
        """Watch for `seconds`: probe() returns a reason to fail as soon as something goes wrong."""
        until = self.clock.now() + seconds
        if until > self.deadline:
            raise TimeLimit(f"the {seconds:.0f}s observation does not fit in the time limit")
        while True:
            problem = probe()
            if problem is not None:
                raise Failed(problem)
            if self.clock.now() >= until:
                return
            self.clock.sleep(min(poll, until - self.clock.now()))


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Run], str]
    limit_seconds: float
    about: str
    disruptive: bool = False  # runs only when asked for by name (--only)


def run_check(check: Check, run: Run) -> Result:
    started = run.clock.now()
    run.deadline = started + check.limit_seconds
    run.evidence = {}
    status: Status
    try:
        summary, status = check.run(run), "passed"
    except Skipped as reason:
        summary, status = str(reason), "skipped"
    except Failed as reason:
        summary, status = str(reason), "failed"
    except Exception as error:  # the API refused or the cluster vanished mid-check: the check did not pass
        summary, status = f"{type(error).__name__}: {_first_line(error)}", "failed"
    return Result(check.name, status, round(run.clock.now() - started, 1), check.limit_seconds, summary,
                  run.evidence)


def _first_line(error: Exception) -> str:
    """The API server's own message for a refused request (ApiException carries it in its JSON body)."""
    body, status = getattr(error, "body", None), getattr(error, "status", None)
    if status is not None:
        try:
            message = json.loads(body).get("message", "") if body else ""
        except ValueError:
            message = str(body)
        return f"HTTP {status} {getattr(error, 'reason', '')}: {message}".rstrip(": ")
    text = str(error).strip()
    return text.splitlines()[0] if text else "no message"
