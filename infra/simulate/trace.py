"""Job traces: reading the CSV (`submit,team,pool,gpus,pods,duration,priority`, every mistake named by line and
column) and writing a synthetic one from stated rates, seeded so that the same arguments give the same bytes.

`gpus` is per pod, as a pod spec requests them: a job asks Kueue for gpus x pods units of the pool's GPU resource,
all at once (all-or-nothing admission), and each pod must fit on one node of the pool."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.simulate.queues import DEFAULT_RESOURCE, Model
from infra.spec import SpecError

HEADER = ("submit", "team", "pool", "gpus", "pods", "duration", "priority")


@dataclass(frozen=True)
class Job:
    line: int  # its line in the trace: the job's name, the last tie-break
    submit: int  # seconds from the trace start
    team: str
    pool: str | None  # None: any pool the team's queue lists, in order
    gpus: int  # per pod
    pods: int
    duration: int  # seconds, once admitted
    priority: str | None  # a WorkloadPriorityClass name

    @property
    def demand(self) -> int:
        return self.gpus * self.pods


def _whole(text: str, where: str, least: int, what: str) -> int:
    if not text.isdigit() or int(text) < least:
        raise SpecError(where, f"'{text}' is not {what}: give whole seconds or units, at least {least}")
    return int(text)


def _row(fields: Mapping[str, str], line: int, model: Model, name: str) -> Job:
    def at(column: str) -> str:
        return f"{name}: line {line}, column {column}"

    team = fields["team"]
    if team not in model.queues:
        raise SpecError(at("team"), f"'{team}' is not a team of stack {model.stack}: one of "
                                    f"{', '.join(sorted(model.queues))}")
    pool = fields["pool"] or None
    if pool is not None and pool not in model.pools:
        raise SpecError(at("pool"), f"'{pool}' is not a GPU pool of stack {model.stack}: one of "
                                    f"{', '.join(model.pools)}, or empty for any pool the team's queue lists")
    gpus = _whole(fields["gpus"], at("gpus"), 1, "a number of GPUs per pod (1 or more)")
    if pool is not None and gpus > model.pools[pool].per_node:
        raise SpecError(at("gpus"), f"{gpus} GPUs per pod, but a node of pool {pool} has "
                                    f"{model.pools[pool].per_node}: a pod runs on one node; use more pods")
    priority = fields["priority"] or None
    if priority is not None and priority not in model.priorities:
        raise SpecError(at("priority"), f"'{priority}' is not a WorkloadPriorityClass of stack {model.stack}: one "
                                        f"of {', '.join(sorted(model.priorities))}, or empty")
    return Job(line, _whole(fields["submit"], at("submit"), 0, "seconds from the trace start"), team, pool, gpus,
               _whole(fields["pods"], at("pods"), 1, "a number of pods (1 or more)"),
               _whole(fields["duration"], at("duration"), 1, "a duration in seconds (1 or more)"), priority)


def read(path: Path, model: Model) -> list[Job]:
    """Every job of the trace, checked against the stack; a mistake stops the read naming its line and column."""
    name = str(path)
    if not path.is_file():
        raise SpecError(name, "no such trace file: give a CSV with the header " + ",".join(HEADER))
    text = path.read_text(encoding="utf-8")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != HEADER:
        raise SpecError(f"{name}: line 1", f"the header must be exactly {','.join(HEADER)}")
    jobs = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(HEADER):
            raise SpecError(f"{name}: line {line}", f"{len(row)} columns, expected {len(HEADER)}: "
                                                    f"{','.join(HEADER)}")
        jobs.append(_row({h: cell.strip() for h, cell in zip(HEADER, row, strict=True)}, line, model, name))
    return jobs


def write(jobs: Iterable[Job]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for job in jobs:
        writer.writerow([job.submit, job.team, job.pool or "", job.gpus, job.pods, job.duration, job.priority or ""])
    return out.getvalue()


def parse_rates(values: Sequence[str], model: Model) -> dict[str, float]:
    """`TEAM=JOBS_PER_HOUR` for each team named, `*=JOBS_PER_HOUR` for every team of the stack."""
    rates: dict[str, float] = {}
    for value in values:
        team, _, rate = value.partition("=")
        try:
            jobs = float(rate)
        except ValueError:
            jobs = -1.0
        if not math.isfinite(jobs) or jobs <= 0:
            raise SpecError("--generate", f"'{value}': give TEAM=JOBS_PER_HOUR with a rate above 0, e.g. vision=4")
        if team == "*":
            rates.update(dict.fromkeys(model.queues, jobs))
        elif team in model.queues:
            rates[team] = jobs
        else:
            raise SpecError("--generate", f"'{team}' is not a team of stack {model.stack}: one of "
                                          f"{', '.join(sorted(model.queues))}, or * for every team")
    return rates


# The shapes of synthetic jobs: pods, duration (s); GPUs per pod are drawn from what the pool's nodes hold.
PODS = (1, 1, 1, 2, 4)
DURATIONS = (600, 1800, 3600, 3600, 7200, 14400)
GPUS_PER_POD = (1, 2, 4, 8)


def generate(model: Model, rates: Mapping[str, float], hours: float, seed: int) -> list[Job]:
    """Poisson arrivals per team at its rate over `hours`; each job on one of the team's pools (or on any, one job
    in three), sized to fit what the team can reach there, with a priority of the stack or none."""
    chance = random.Random(seed)
    priorities = [None, *sorted(model.priorities)]
    jobs: list[tuple[int, str, Job]] = []
    for team in sorted(rates):
        queue = model.queues[team]
        pools = [e.flavor for e in queue.entries if model.pools[e.flavor].resource == DEFAULT_RESOURCE] or \
            [e.flavor for e in queue.entries]
        if not pools:
            continue
        clock = 0.0
        while True:
            clock += chance.expovariate(rates[team] / 3600)
            if clock >= hours * 3600:
                break
            pool = chance.choice(pools)
            reach = max(model.reach(team, pool), 1)
            per_node = model.pools[pool].per_node
            gpus = chance.choice([g for g in GPUS_PER_POD if g <= min(per_node, reach)] or [1])
            pods = chance.choice([p for p in PODS if p * gpus <= reach] or [1])
            named = pool if chance.random() >= 1 / 3 or model.pools[pool].resource != DEFAULT_RESOURCE else None
            jobs.append((int(clock), team, Job(0, int(clock), team, named, gpus, pods, chance.choice(DURATIONS),
                                               chance.choice(priorities))))
    jobs.sort(key=lambda item: (item[0], item[1]))
    # Numbered as the lines of the file `write` makes of them (the header is line 1).
    return [dataclasses.replace(job, line=index + 2) for index, (_, _, job) in enumerate(jobs)]
