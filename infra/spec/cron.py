"""Five-field cron schedules (minute hour day-of-month month day-of-week), as Velero Schedules and Kubernetes
CronJobs read them: each field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`, or a comma list of
those; months and weekdays may be named (JAN-DEC, SUN-SAT). A value out of range (hour 25), free text
("every day") or a schedule that never runs (30 February) is refused here instead of after `pulumi up`."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

# (field name, lowest, highest, names in order from `lowest`)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    ("day of week", 0, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)
_PART = re.compile(r"^(\*|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?$")
FORM = "five fields: minute hour day-of-month month day-of-week, e.g. '0 2 * * *' (daily at 02:00)"


def _value(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.upper() in names:
        return low + names.index(text.upper())
    if not text.isdigit():
        raise ValueError(f"{name} '{text}' is not a number")
    if not low <= int(text) <= high:
        raise ValueError(f"{name} {text} is out of range {low}-{high}")
    return int(text)


def _field(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    """The values a field selects."""
    selected: set[int] = set()
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if not match:
            raise ValueError(f"{name} '{part}' is not *, a number, a range a-b or a step */n")
        base, step = match.groups()
        if step is not None and int(step) == 0:
            raise ValueError(f"{name} step '/0' never repeats")
        bounds = [low, high] if base == "*" else [_value(v, name, low, high, names) for v in base.split("-")]
        if len(bounds) == 2 and bounds[0] > bounds[1]:
            raise ValueError(f"{name} range {base} runs backwards")
        # a single value with a step (5/10) runs from it to the field's end, as in robfig/cron
        first, last = bounds[0], (bounds[-1] if step is None or len(bounds) == 2 else high)
        selected.update(range(first, last + 1, int(step or 1)))
    return selected


# The most days each month has (February's in a leap year).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def check_cron(schedule: str) -> str:
    fields = schedule.split()
    if len(fields) != 5:
        raise ValueError(f"'{schedule}' is not a cron schedule: give {FORM}")
    selected = []
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        try:
            selected.append(_field(text, name, low, high, names))
        except ValueError as error:
            raise ValueError(f"'{schedule}': {error}; give {FORM}") from None
    _, _, days, months, _ = selected
    # With day of week `*`, cron (robfig/cron, which Velero and CronJobs use) runs only on the listed days of the
    # month: a day no listed month has (30 February) means the schedule never runs.
    if fields[4] == "*" and min(days) > max(_MONTH_DAYS[month - 1] for month in months):
        raise ValueError(f"'{schedule}' never runs: no month it lists has day {min(days)}; give a day every listed "
                         "month has, e.g. 1")
    return schedule


Cron = Annotated[str, AfterValidator(check_cron)]
