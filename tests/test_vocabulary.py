"""infra/vocabulary.py sits at the bottom of the import graph, and the names it holds are the ones the
spec, the admission generator, the pack and the charts use."""

from __future__ import annotations

import ast
from pathlib import Path

import celpy
import pytest
import yaml

from infra.kit.manifests import ManifestLoader
from infra.platform.trainer import JOBSET_CONTROLLER, JOBSET_RELEASE, NAMESPACE, TRAINER_CONTROLLER, TRAINER_RELEASE
from infra.vocabulary import PACK_RULES, tolerates, tolerates_cel
from policies.rules import POLICY_NAMES
from tests.conftest import ROOT

CHARTS = ROOT.parent / "shared" / "charts"
_ENV = celpy.Environment()


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


TOLERATIONS = [{}, {"operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"},
               {"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Equal"},
               {"key": "nvidia.com/gpu", "value": "present"}, {"key": "nvidia.com/gpu", "value": "present",
                                                              "effect": "NoSchedule"},
               {"key": "nvidia.com/gpu", "value": "other"}, {"key": "other", "operator": "Exists"},
               {"key": "", "operator": "Exists", "effect": ""}, {"value": "present"}]
TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
          {"key": "nvidia.com/gpu", "value": "", "effect": "NoExecute"},
          {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}]


@pytest.mark.parametrize("taint", TAINTS, ids=lambda t: f"{t['key']}={t['value']}:{t['effect']}")
def test_the_cel_toleration_rule_is_the_python_one(taint: dict[str, str]) -> None:
    """The admission policies' CEL twin of `tolerates` answers as Kubernetes' rule does, for every kind of
    toleration: keyless Exists, Exists by key, Equal with and without a value, with and without an effect."""
    program = _ENV.program(_ENV.compile(tolerates_cel("t", "x")))
    for toleration in TOLERATIONS:
        cel = program.evaluate({"t": celpy.json_to_cel(toleration), "x": celpy.json_to_cel(taint)})
        assert bool(cel) == tolerates(toleration, taint), (toleration, taint)
    assert any(tolerates(t, taint) for t in TOLERATIONS) and not all(tolerates(t, taint) for t in TOLERATIONS)
