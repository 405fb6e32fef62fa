"""infra/vocabulary.py sits at the bottom of the import graph, and the names it holds are the ones the
spec, the admission generator, the pack and the charts use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from infra.offline.schema import ManifestLoader
from infra.platform.trainer import JOBSET_CONTROLLER, JOBSET_RELEASE, NAMESPACE, TRAINER_CONTROLLER, TRAINER_RELEASE
from infra.vocabulary import PACK_RULES
from policies.rules import POLICY_NAMES

from .conftest import ROOT

CHARTS = ROOT.parent / "shared" / "charts"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(("." * node.level) + node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_the_vocabulary_imports_nothing_of_ours() -> None:
    ours = {"infra", "policies", "runtimes", "tests"}
    imported = _imports(ROOT / "infra" / "vocabulary.py")
    assert not {name for name in imported if name.split(".")[0] in ours or name.startswith(".")}


def test_the_spec_imports_neither_the_pack_nor_the_platform() -> None:
    for path in sorted((ROOT / "infra" / "spec").glob("*.py")):
        for name in _imports(path):
            assert not name.startswith(("policies", "infra.platform", "infra.offline")), (path.name, name)


def test_the_pack_rules_are_the_vocabulary_names() -> None:
    assert set(PACK_RULES) == POLICY_NAMES


def _service_accounts(archive: str, release: str, values: dict[str, object]) -> set[str]:
    helm_python = pytest.importorskip("helm_python")
    path = CHARTS / archive
    if not path.is_file():
        pytest.skip(f"{path} not present")
    chart = helm_python.Chart.load(str(path))
    rendered = chart.render(values, name=release, namespace=NAMESPACE, is_install=True)
    return {f"system:serviceaccount:{NAMESPACE}:{doc['metadata']['name']}" for text in rendered.values()
            for doc in yaml.load_all(text, Loader=ManifestLoader) if doc and doc.get("kind") == "ServiceAccount"}


def test_the_exempt_controllers_are_the_charts_service_accounts() -> None:
    """The queue policy exempts requests by these users: they must be the accounts the charts run as."""
    assert TRAINER_CONTROLLER in _service_accounts("kubeflow-trainer-2.2.1.tgz", TRAINER_RELEASE,
                                                   {"jobset": {"install": False}})
    assert JOBSET_CONTROLLER in _service_accounts("jobset-0.12.0.tgz", JOBSET_RELEASE, {})
