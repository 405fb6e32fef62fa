"""The check catalogue (infra/checks/catalogue.py): stable ids, every check registered once, every entry
documented, docs/checks.md current, and run_checks running every entry."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import infra.checks
from infra.checks import catalogue
from infra.checks.catalogue import CHECKS, LIVE_CHECKS, STACK_CHECKS, Entry, run_checks
from infra.checks.context import Context, StackContext
from infra.commands.docs import generated, run
from infra.docs.checks import checks_page
from infra.spec import Finding
from tests.conftest import ROOT, capture_of, platform_of

# Every id ever given. An id never changes once given: renaming or removing a check's id fails here; a new check
# adds its id.
KNOWN_IDS = {
    "capacity-fits-pool", "quota-resources-offered", "lending-limits", "borrowing-limits", "flavor-taints-tolerated",
    "pools-priced", "runtime-resources-covered", "runtime-reachable", "prerequisites-provided", "policy-pack",
    "chart-values-accepted", "chart-hooks-covered", "schema", "own-admission", "declared-once", "images-pinned",
    "driver-image-known",
    "fabric-reaches-pods", "ci-runner-reaches-endpoint",
    "crd-needs-stated", "capacity-after-daemonsets",
    "backup-schedule-coverage", "data-volumes-retained", "buckets-versioned",
    "backup-credentials-declared", "backups-off-cluster", "alert-rules-valid", "dashboards-valid",
    "chart-alert-rules-parse", "chart-dashboards-parse", "alert-runbooks-absolute", "alert-routing",
    "managed-prometheus-identity", "team-data-identity", "team-store-egress", "webhook-firewall",
    "filestore-network", "ingress-class-served",
    "burst-data-declared", "burst-data-location", "multikueue-worker-kubeconfig", "multikueue-worker-rbac",
    "multikueue-worker-mirror", "burst-data-egress", "burst-data-registries",
    "live-gpu-capacity", "live-operators-available", "live-cluster-queues-active", "live-persona-access",
    "live-scrape-targets-up", "live-alert-series", "live-prerequisites", "live-multikueue-active", "live-burst-secrets",
    "live-front-door", "live-pipelines-api",
}
KEBAB = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
LIVE_MODULES = ("infra.live.verify", "infra.live.hybrid", "infra.live.prerequisites", "infra.live.frontdoor",
                "infra.live.pipelines")
ENTRIES: list[Any] = [*CHECKS, *STACK_CHECKS, *LIVE_CHECKS]


def _context_type(function: Callable[..., Any]) -> str | None:
    """'Context' or 'StackContext' when `function` takes exactly one such parameter (annotations are strings
    here: the modules use `from __future__ import annotations`)."""
    parameters = list(inspect.signature(function).parameters.values())
    if len(parameters) == 1 and parameters[0].annotation in ("Context", "StackContext"):
        return str(parameters[0].annotation)
    return None


def check_functions(module: types.ModuleType) -> list[Callable[..., Any]]:
    """The public checks a module defines: named check_*, or taking a Context or StackContext alone."""
    return [obj for name, obj in vars(module).items()
            if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
            and (name.startswith("check_") or _context_type(obj) is not None)]


def _check_modules() -> list[types.ModuleType]:
    names = [info.name for info in pkgutil.iter_modules(infra.checks.__path__)]
    return [importlib.import_module(f"infra.checks.{name}") for name in names]


def _resolve(where: str) -> Any:
    module, _, function = where.partition(":")
    return getattr(importlib.import_module(module), function, None)


# --- ids ----------------------------------------------------------------------------------------------------------

def test_ids_are_unique_kebab_case() -> None:
    ids = [entry.id for entry in ENTRIES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert [i for i in ids if not KEBAB.fullmatch(i)] == []
    assert not KEBAB.fullmatch("Capacity_fits") and not KEBAB.fullmatch("capacity--fits")


def test_ids_are_stable() -> None:
    ids = {entry.id for entry in ENTRIES}
    assert KNOWN_IDS - ids == set(), "an id was renamed or removed: ids never change once given"
    assert ids - KNOWN_IDS == set(), "a new check: add its id to KNOWN_IDS"


# --- registration -------------------------------------------------------------------------------------------------

def test_every_check_function_is_in_the_catalogue_once() -> None:
    registered: list[Callable[..., Any]] = [*(e.run for e in CHECKS), *(e.run for e in STACK_CHECKS)]
    found = [function for module in _check_modules() for function in check_functions(module)]
    assert found, "no check found: the collector is broken"
    assert [f"{f.__module__}.{f.__name__}" for f in found if registered.count(f) != 1] == []
    assert sorted(f"{f.__module__}.{f.__name__}" for f in registered if f not in found) == []


def test_an_unregistered_check_is_found() -> None:
    """The collector sees a new check by name or by signature, and not a helper."""
    module = types.ModuleType("infra.checks.new")
    source = ("def check_new(ctx: Context) -> list: return []\n"
              "def new_rule(stack: StackContext) -> list: return []\n"
              "def helper(ctx: Context, extra: int) -> list: return []\n"
              "def _private(ctx: Context) -> list: return []\n")
    exec(compile("from __future__ import annotations\n" + source, "new.py", "exec"), vars(module))
    assert [f.__name__ for f in check_functions(module)] == ["check_new", "new_rule"]


def test_each_scope_has_one_signature() -> None:
    assert [e.id for e in CHECKS if _context_type(e.run) != "Context"] == []
    assert [e.id for e in STACK_CHECKS if _context_type(e.run) != "StackContext"] == []


def test_every_live_check_is_listed_once() -> None:
    """Each entry names a function of infra/live that exists; each public *_findings function there is listed."""
    assert [e.where for e in LIVE_CHECKS if not callable(_resolve(e.where))] == []
    public = sorted(f"{name}:{function}" for name in LIVE_MODULES
                    for function, obj in vars(importlib.import_module(name)).items()
                    if inspect.isfunction(obj) and obj.__module__ == name and function.endswith("_findings")
                    and not function.startswith("_"))
    assert sorted(e.where for e in LIVE_CHECKS) == public


def test_every_entry_has_phase_level_and_doc() -> None:
    for entry in ENTRIES:
        assert entry.phase in ("spec", "render", "objects", "live"), entry.id
        assert (entry.phase == "live") == (entry in LIVE_CHECKS), entry.id
        assert entry.level in ("error", "warning"), entry.id
        assert entry.doc.strip() and "\n" not in entry.doc and "|" not in entry.doc, entry.id


# --- docs/checks.md -----------------------------------------------------------------------------------------------

def test_checks_page_is_current_and_lists_every_entry() -> None:
    page = checks_page()
    assert (ROOT / "docs" / "checks.md").read_text(encoding="utf-8") == page, "run `trainyard docs` and commit"
    for entry in ENTRIES:
        assert f"| `{entry.id}` | {entry.phase} | {entry.level} | {entry.doc} |" in page


def test_docs_check_fails_on_a_stale_checks_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stacks").mkdir()
    assert tmp_path / "docs" / "checks.md" in generated(tmp_path, [])
    assert run(tmp_path, None, check=False) == 0
    assert run(tmp_path, None, check=True) == 0
    page = tmp_path / "docs" / "checks.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `schema` |", "| `schemas` |"), encoding="utf-8")
    capsys.readouterr()
    assert run(tmp_path, None, check=True) == 1
    assert "stale: docs/checks.md" in capsys.readouterr().out


# --- run_checks ---------------------------------------------------------------------------------------------------

def _counted(entries: tuple[Entry[Any], ...], calls: dict[str, int]) -> tuple[Entry[Any], ...]:
    def counting(entry: Entry[Any]) -> Entry[Any]:
        def run_it(ctx: Any) -> list[Finding]:
            calls[entry.id] = calls.get(entry.id, 0) + 1
            return [Finding("fake", entry.id, "found")]
        return replace(entry, run=run_it)
    return tuple(counting(entry) for entry in entries)


@pytest.mark.parametrize(("stack", "clusters"), [("local", 1), ("hybrid-burst", 2)])
def test_run_checks_runs_every_entry(stack: str, clusters: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {}
    fake: Entry[Context] = Entry("fake-new-check", "objects", "error", "a check added later", lambda ctx: [])
    monkeypatch.setattr(catalogue, "CHECKS", _counted((*CHECKS, fake), calls))
    monkeypatch.setattr(catalogue, "STACK_CHECKS", _counted(STACK_CHECKS, calls))
    found = run_checks(platform_of(stack), capture_of(stack), None)
    assert calls == {**{e.id: clusters for e in (*CHECKS, fake)}, **{e.id: 1 for e in STACK_CHECKS}}
    # each cluster check's finding, named by cluster in a stack of several; each stack check's once
    assert len(found) == clusters * (len(CHECKS) + 1) + len(STACK_CHECKS)


def test_stack_checks_are_quiet_on_a_single_cluster_stack() -> None:
    stack = StackContext(platform_of("local"), capture_of("local"))
    assert catalogue.run_entries(STACK_CHECKS, stack) == []
