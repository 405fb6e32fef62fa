"""A cloud in one place: every cluster kind the spec accepts has its facts (infra/spec/clouds) and its cluster
code (infra/cluster, CLOUD_COMPONENTS), and no other module keeps a table keyed by cloud."""

from __future__ import annotations

import ast
import importlib
from typing import get_args

import pytest

from infra.cluster import CLOUD_COMPONENTS
from infra.kit.paths import ROOT
from infra.spec.clouds import CLOUD_STORAGE, CLOUDS, MACHINES
from infra.spec.cluster import ClusterSpec
from infra.spec.storage.model import Profile

CLOUD_NAMES = frozenset({"eks", "gke", "aks", "aws", "gcp", "azure"})
# The places that may key by cloud: the facts and each cloud's own cluster code, and the one cluster registry.
FACT_HOMES = ("infra/spec/clouds/", *(f"infra/cluster/{kind}/" for kind in CLOUDS))
REGISTRIES = {("infra/cluster/__init__.py", "CLOUD_COMPONENTS")}
ON_PREM_PROFILES = ("rook-ceph", "nfs")


def test_every_cluster_kind_has_facts_and_a_component() -> None:
    kinds = set(ClusterSpec.model_fields)
    assert set(CLOUDS) == kinds, "one CloudFacts per key of cluster:"
    assert set(CLOUD_COMPONENTS) == kinds, "one cluster component per key of cluster:"
    for kind, facts in CLOUDS.items():
        assert facts.kind == kind
        module, component = CLOUD_COMPONENTS[kind]
        assert module.split(".")[0] == kind, "a kind's cluster code lives in its own folder"
        assert hasattr(importlib.import_module(f"infra.cluster.{module}"), component)


def test_cloud_kinds_have_a_catalogue_and_storage_and_existing_has_neither() -> None:
    for kind, facts in CLOUDS.items():
        if facts.cloud is None:
            assert not facts.machines and facts.storage is None, kind
            continue
        assert facts.machines and facts.storage is not None, kind
        assert {m.cloud for m in facts.machines} == {facts.cloud}, f"{kind}: machines of another cloud"
        assert facts.storage_profile == facts.storage.profile
        assert all(capability in facts.provides for capability in ("network-policy", "workload-identity")), kind
    assert len(MACHINES) == sum(len(f.machines) for f in CLOUDS.values()), "a machine name is in two clouds"


def test_storage_profiles_are_the_on_prem_ones_and_the_clouds() -> None:
    assert set(get_args(Profile)) == {*ON_PREM_PROFILES, *CLOUD_STORAGE}
    assert {f.storage_profile for f in CLOUDS.values()} <= set(get_args(Profile))


def cloud_tables(source: str) -> list[tuple[int, str | None]]:
    """(line, assigned name) of every dict literal (or dict(...) call) keyed by two or more cloud names."""
    tree = ast.parse(source)
    owner: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in (t for t in targets if isinstance(t, ast.Name)):
                owner |= {id(inner): target.id for inner in ast.walk(node.value)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            keys = {k.arg for k in node.keywords if k.arg}
        else:
            continue
        if len(keys & CLOUD_NAMES) >= 2:
            found.append((node.lineno, owner.get(id(node))))
    return found


@pytest.mark.parametrize(("source", "tables"), [
    ('FORMS = {"gke": 1, "aks": 2}', [(1, "FORMS")]),
    ('PLUGINS: dict[str, str] = {"aws": "a", "azure": "b", "nfs": "c"}', [(1, "PLUGINS")]),
    ("def f():\n    return dict(eks=1, gcp=2)[k]", [(2, None)]),
    ('ONE = {"gke": 1, "existing": 2}', []),  # one cloud name: a fact of that cloud, not a table of clouds
    ('NOT = {"rook-ceph": 1, "nfs": 2}', []),
])
def test_the_scan_finds_tables_keyed_by_two_clouds_and_no_fewer(source: str, tables: list[tuple[int, str | None]],
                                                                 ) -> None:
    assert cloud_tables(source) == tables


def test_no_table_keyed_by_cloud_outside_the_clouds_and_their_cluster_code() -> None:
    offenders = []
    for path in sorted((ROOT / "infra").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(FACT_HOMES):
            continue
        offenders += [f"{where}:{line} {name or ''}" for line, name in cloud_tables(path.read_text())
                      if (where, name) not in REGISTRIES]
    assert not offenders, f"tables keyed by cloud belong in infra/spec/clouds/<cloud>.py: {offenders}"


def test_the_registries_are_found_by_the_scan() -> None:
    """The allowed registry is allowed by name: the scan does see it (so a second table beside it fails)."""
    source = (ROOT / "infra/cluster/__init__.py").read_text()
    assert [name for _, name in cloud_tables(source)] == ["CLOUD_COMPONENTS"]
