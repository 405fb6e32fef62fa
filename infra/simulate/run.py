"""`trainyard simulate`: a trace through the stack's queues, and with a base revision through the base's queues too
(the base's stack file, read by this code: the difference is the configuration's), the report written or
printed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from infra.review.diff import base_tree
from infra.simulate import report, trace
from infra.simulate.engine import simulate
from infra.simulate.queues import Model, build
from infra.spec import SpecError, load_file, stack_path


def model_of(root: Path, stack: str) -> Model:
    path = stack_path(stack, root)
    return build(load_file(path if path.is_absolute() else root / path))


def base_model(root: Path, stack: str, base_ref: str) -> Model | None:
    """The base revision's queues, or None when that revision has no such stack or it does not load (said)."""
    path = stack_path(stack, root)
    path = path if path.is_absolute() else root / path
    if not path.resolve().is_relative_to(root.resolve()):
        raise SpecError("--base", f"{path} is outside this repository: --base compares a stack of the repository")
    with base_tree(root, base_ref) as tree:
        base_file = tree / path.resolve().relative_to(root.resolve())
        if not base_file.is_file():
            print(f"# {base_ref} has no {base_file.name}; comparing with no queues", file=sys.stderr)
            return None
        try:
            return build(load_file(base_file))
        except SpecError as error:
            print(f"# {base_ref}'s {base_file.name} does not load ({error}); comparing with no queues",
                  file=sys.stderr)
            return None


def _empty(stack: str) -> dict[str, Any]:
    return {"stack": stack, "jobs": 0, "span_seconds": 0, "teams": {}, "pools": {}}


def run(root: Path, stack: str, trace_file: Path, base_ref: str | None, out: Path | None,
        only_if_changed: bool) -> int:
    model = model_of(root, stack)
    jobs = trace.read(trace_file, model)
    result = report.build(model, simulate(model, jobs))
    changes = None
    if base_ref is not None:
        base = base_model(root, stack, base_ref)
        if only_if_changed and base == model:
            print(f"# {model.stack}: the queues are the same at {base_ref}; nothing simulated")
            return 0
        base_result = report.build(base, simulate(base, jobs)) if base is not None else _empty(model.stack)
        changes = report.difference(base_result, result)
        result = {**result, "base": {"ref": base_ref, "report": base_result}, "difference": changes}
    text = report.markdown(result, changes, base_ref or "")
    if out is None:
        sys.stdout.write(text)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(report.to_json(result), encoding="utf-8")
    if changes is not None:
        lines = [f"#### {model.stack}", "", *report.difference_markdown(changes, base_ref or ""), ""]
        (out / "difference.md").write_text("\n".join(lines), encoding="utf-8")
    print(f"# {model.stack}: {len(jobs)} jobs simulated; report in {out}")
    return 0


def generate(root: Path, stack: str, rates: list[str], hours: float, seed: int, trace_file: Path) -> int:
    model = model_of(root, stack)
    if hours <= 0:
        raise SpecError("--hours", f"{hours} is not a duration: give the trace's length in hours, above 0")
    jobs = trace.generate(model, trace.parse_rates(rates, model), hours, seed)
    trace_file.write_text(trace.write(jobs), encoding="utf-8")
    print(f"# {model.stack}: {len(jobs)} jobs written to {trace_file}")
    return 0
