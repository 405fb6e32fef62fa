"""The acceptance report: `acceptance-<stack>.json` (for machines) and `acceptance-<stack>.md` (for the handover)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from infra.accept.runner import Result

MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}


def document(header: dict[str, Any], results: list[Result], problem: str | None) -> dict[str, Any]:
    return {**header, "cannot_run": problem, "checks": [asdict(r) for r in results],
            "totals": {status: sum(1 for r in results if r.status == status) for status in MARK}}


def _evidence(value: Any, depth: int = 0) -> list[str]:
    pad = "  " * depth
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines += [f"{pad}- {key}:", *_evidence(item, depth + 1)]
            else:
                lines.append(f"{pad}- {key}: {item if item not in (None, [], {}) else '-'}")
        return lines
    if isinstance(value, list):
        return [f"{pad}- `{item}`" if not isinstance(item, dict | list) else "\n".join(_evidence(item, depth + 1))
                for item in value]
    return [f"{pad}- {value}"]


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Acceptance report: stack `{report['stack']}`", "",
             "| | |", "|---|---|"]
    lines += [f"| {key} | {report[key]} |" for key in ("date", "context", "server", "commit", "team", "namespace")]
    lines += [f"| versions | {', '.join(f'{k} {v}' for k, v in report['versions'].items())} |", ""]
    if report["cannot_run"]:
        lines += [f"**Cannot run** (exit 2): {report['cannot_run']}", ""]
    totals = report["totals"]
    lines += [f"Result: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped.", ""]
    if report["checks"]:
        lines += ["| check | result | seconds | limit (s) | summary |", "|---|---|---|---|---|"]
        lines += [f"| {c['name']} | {MARK[c['status']]} | {c['seconds']} | {c['limit_seconds']:.0f} | "
                  f"{c['summary'].replace('|', '/')} |" for c in report["checks"]]
        lines.append("")
    for check in report["checks"]:
        lines += [f"## {check['name']}: {MARK[check['status']]}", "", check["summary"], ""]
        if check["evidence"]:
            lines += ["Evidence:", "", *_evidence(check["evidence"]), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write(directory: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"acceptance-{report['stack']}"
    as_json, as_markdown = stem.with_suffix(".json"), stem.with_suffix(".md")
    as_json.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    as_markdown.write_text(markdown(report), encoding="utf-8")
    return as_markdown, as_json
