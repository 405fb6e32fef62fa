"""The layers of docs/architecture.md as import contracts (pyproject.toml [tool.importlinter], run by `make lint`):
each contract is shown failing on a forbidden import added to a copy of the tree, and no module of infra/ or
policies/ is part of an import cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from infra.kit.paths import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# Per contract id: imports that break it, as (module file that gains the line, the module it imports).
FORBIDDEN: dict[str, list[tuple[str, str]]] = {
    "layers": [
        ("infra/kit/naming.py", "infra.spec.base"),  # the bottom kit reads no spec
        ("infra/spec/base.py", "infra.platform.tenancy"),  # the spec builds no resources
        ("infra/cluster/existing/cluster.py", "infra.platform.kueue"),  # cluster and platform never meet
        ("infra/platform/kueue.py", "infra.cluster.eks.cluster"),
        ("infra/offline/engine.py", "infra.checks.catalogue"),  # the engine knows no checks
        ("infra/apiserver/vap.py", "infra.review.summary"),
        ("infra/checks/schema_probe.py", "infra.commands.common"),  # nothing imports the command layer
        ("infra/vocabulary.py", "infra.kit.naming"),
    ],
    "cloud-sdks": [("infra/platform/storage.py", "pulumi_aws"), ("infra/offline/plan.py", "pulumi_gcp")],
    "pulumi-free": [("infra/spec/pools.py", "pulumi_kubernetes"), ("infra/apiserver/cel.py", "pulumi_kubernetes")],
}


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(tree / "pyproject.toml")], cwd=tree,
                          capture_output=True, text=True, check=False, env={"PYTHONPATH": str(tree)})


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("tree")
    for package in ("infra", "policies"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_every_contract_has_a_forbidden_import_to_try() -> None:
    assert {contract["id"] for contract in CONFIG["contracts"]} == set(FORBIDDEN)


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    done = _lint(tree)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"Contracts: {len(CONFIG['contracts'])} kept, 0 broken." in done.stdout


@pytest.mark.parametrize("contract", sorted(FORBIDDEN))
def test_a_forbidden_import_breaks_its_contract(tree: Path, tmp_path: Path, contract: str) -> None:
    broken = tmp_path / "tree"
    shutil.copytree(tree, broken)
    for file, imported in FORBIDDEN[contract]:
        module = broken / file
        text = module.read_text(encoding="utf-8") if module.exists() else ""
        module.write_text(f"{text}\nimport {imported}  # forbidden\n", encoding="utf-8")
    done = _lint(broken)
    assert done.returncode == 1, done.stdout[-3000:]
    for file, imported in FORBIDDEN[contract]:
        importer = file.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {imported}" in done.stdout, (importer, imported, done.stdout[-3000:])


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("infra", "policies", cache_dir=None, exclude_type_checking_imports=True)


def test_no_import_cycle_in_infra_or_policies(graph: grimp.ImportGraph) -> None:
    assert cycles(graph) == []


def test_a_cycle_is_found(graph: grimp.ImportGraph) -> None:
    graph.add_import(importer="infra.spec.base", imported="infra.spec.teams")  # teams imports base already
    try:
        assert any({"infra.spec.base", "infra.spec.teams"} <= set(component) for component in cycles(graph))
    finally:
        graph.remove_import(importer="infra.spec.base", imported="infra.spec.teams")


FOLDER_LIMIT = 22  # "about 20": past it, a folder wants sub-packages named for what they hold


def test_no_folder_holds_more_than_about_twenty_modules() -> None:
    crowded = {str(folder.relative_to(ROOT)): count for package in ("infra", "policies")
               for folder in [ROOT / package, *(ROOT / package).rglob("*")]
               if folder.is_dir() and (count := len(list(folder.glob("*.py")))) > FOLDER_LIMIT}
    assert crowded == {}, f"split these folders into named sub-packages: {crowded}"
