"""The component catalogue (infra/components.py): its facts agree with the spec, the versions table and the upstream
CRDs, each namespace is spelled only there, and the layers it serves import it instead of each other."""

from __future__ import annotations

import ast
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from infra import components
from infra.apiserver.schema import CRD_COMPONENTS
from infra.components import COMPONENTS, Helm, Kustomize, Own
from infra.spec.namespaces import RESERVED_NAMESPACES, reserved_problem
from infra.spec.prerequisites import PLATFORM_CRD_GROUPS, capability_problem
from infra.spec.versions import CHART_DIGESTS, PLATFORM_CHARTS, Versions
from tests.conftest import ROOT

SOURCES = sorted([*(ROOT / "infra").rglob("*.py"), *(ROOT / "policies").rglob("*.py")])
CATALOGUE = ROOT / "infra" / "components.py"

# Where a namespace's word names something else: a chart, a Helm release, a CRD directory, a metric source, an
# output key, prose or a CLI. (file, namespace) -> how many string literals may carry it. A new copy of a
# namespace anywhere else (or one more here) fails: read it from infra/components.py instead.
OTHER_MEANINGS = {
    ("infra/spec/versions.py", "gpu-operator"): 1,  # the chart's name
    ("infra/spec/versions.py", "velero"): 3,  # the chart's name; the CRD directory (key and path)
    ("infra/spec/versions.py", "monitoring"): 1,  # the CRD directory's key
    ("infra/accept/suite.py", "gpu-operator"): 1,  # the acceptance report's version keys
    ("infra/accept/suite.py", "velero"): 1,
    ("infra/spec/metrics.py", "velero"): 2,  # the metric catalogue's exporter and its source
    ("infra/spec/storage/model.py", "velero"): 1,  # what the backups bucket is for
    ("infra/platform/backup.py", "velero"): 2,  # the drill's `velero restore describe` hint; an output key
    ("infra/live/verify.py", "monitoring"): 1,  # prose: "is the monitoring stack up?"
    ("infra/spec/hybrid/model.py", "auth"): 2,  # kubeconfig keys (auth-provider) and prose (basic auth)
    ("infra/spec/metrics.py", "kubeflow"): 1,  # the source of a metric: the kubeflow/pipelines repository
}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def literal_uses(source: str, word: str) -> int:
    """How many string literals (docstrings aside) carry `word` as a whole name (not inside a longer one)."""
    tree = ast.parse(source)
    skip, pattern = _docstrings(tree), re.compile(rf"(?<![\w./-]){re.escape(word)}(?![\w.-])")
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
               and id(node) not in skip and pattern.search(node.value))


def imported(source: str) -> set[str]:
    """Every module an import statement of `source` names (`from a import b` names a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --- the catalogue agrees with the spec, the versions table and the CRDs -----------------------------------

@pytest.mark.parametrize("component", [c for c in COMPONENTS if c.namespace], ids=lambda c: c.name)
def test_each_namespace_is_reserved(component: components.Component) -> None:
    assert component.namespace in RESERVED_NAMESPACES
    assert reserved_problem(component.namespace) == (f"namespace '{component.namespace}' is reserved for the "
                                                     "platform's own components")


def test_a_namespace_outside_the_catalogue_is_a_teams() -> None:
    assert reserved_problem("kueue-systems") is None
    assert reserved_problem("research") is None


def test_namespaces_are_unique_per_component() -> None:
    owners = Counter(c.namespace for c in COMPONENTS if c.namespace)
    assert [ns for ns, count in owners.items() if count > 1] == []
    assert len({c.name for c in COMPONENTS}) == len(COMPONENTS)


def _crd_groups_in(path: Path) -> set[str]:
    """The API groups the CRDs in a directory (or a chart archive) define."""
    group = re.compile(r"^\s*group: ([a-z0-9.-]+)\s*$", re.MULTILINE)
    if path.is_dir():
        return {g for f in path.rglob("*.yaml") for g in group.findall(f.read_text())}
    with tarfile.open(path) as archive:
        files = [archive.extractfile(m) for m in archive.getmembers()
                 if "/crds/" in m.name and m.name.endswith(".yaml")]
        return {g for f in files if f is not None for g in group.findall(f.read().decode())}


@pytest.mark.parametrize("crds", [c for component in COMPONENTS for c in component.crds if c.directory],
                         ids=lambda c: c.group)
def test_each_crd_group_maps_to_its_upstream_crds(crds: components.Crds, crds_dir: Path) -> None:
    directory = crds_dir / Versions().crd_dirs()[crds.directory]
    assert directory.exists(), directory
    assert crds.group in _crd_groups_in(directory)


def test_groups_without_a_directory_have_none_under_crds(crds_dir: Path) -> None:
    """nvidia.com (GPU Operator) and the front door's (their CRDs come with the vendored manifests, which the plan
    renders and checks itself) keep no copy: no directory under --crds may define them unlisted."""
    undirected = {c.group for component in COMPONENTS for c in component.crds if not c.directory}
    assert undirected == {"nvidia.com", "cert-manager.io", "acme.cert-manager.io", "networking.istio.io",
                          "security.istio.io", "telemetry.istio.io", "extensions.istio.io", "dex.coreos.com",
                          "argoproj.io", "kubeflow.org", "metacontroller.k8s.io", "serving.kserve.io",
                          "inference.networking.x-k8s.io"}
    kept = {g for d in crds_dir.glob("*/v*") if d.is_dir() for g in _crd_groups_in(d)}
    assert undirected.isdisjoint(kept)


def test_the_schema_checks_and_prerequisites_read_the_catalogue() -> None:
    assert CRD_COMPONENTS == {"kueue.x-k8s.io": "kueue", "trainer.kubeflow.org": "trainer",
                              "jobset.x-k8s.io": "jobset", "velero.io": "velero",
                              "monitoring.coreos.com": "monitoring"}
    undirected = {c.group for component in COMPONENTS for c in component.crds if not c.directory}
    assert set(PLATFORM_CRD_GROUPS) == set(CRD_COMPONENTS) | undirected


@pytest.mark.parametrize("component", [c for c in COMPONENTS if c.charts], ids=lambda c: c.name)
def test_each_chart_is_in_the_versions_table(component: components.Component) -> None:
    for source in component.charts:
        if source.pin:
            chart = Versions().charts()[source.pin]
            assert chart.name == source.chart
        else:
            chart = next(c for c in PLATFORM_CHARTS if c.name == source.chart)
        assert CHART_DIGESTS.get(chart.archive), f"{chart.archive} has no digest"


def test_a_chart_outside_the_table_is_caught() -> None:
    with pytest.raises(StopIteration):
        next(c for c in PLATFORM_CHARTS if c.name == "kubeflow-pipelines")
    with pytest.raises(KeyError):
        Versions().charts()["pipelines"]


def test_the_vendored_archive_is_the_pinned_release() -> None:
    """The catalogue may not import the spec: its copy of the Kubeflow Platform pin is held to versions.py here."""
    from infra.spec.versions import KUBEFLOW_MANIFESTS
    pinned = (KUBEFLOW_MANIFESTS.archive, f"sha256:{KUBEFLOW_MANIFESTS.sha256}")
    assert pinned == components.KUBEFLOW_ARCHIVE
    kustomized = {s.path for c in components.FRONT_DOOR for s in c.sources if isinstance(s, Kustomize)}
    assert all((ROOT / ".manifests" / KUBEFLOW_MANIFESTS.sha256 / path).is_dir() for path in kustomized), kustomized


def test_sources_are_typed() -> None:
    """Every source is a chart, a vendored kustomization (its archive pinned by digest) or Trainyard's own."""
    assert all(isinstance(s, Helm | Kustomize | Own) for c in COMPONENTS for s in c.sources)
    vendored = Kustomize("kubeflow-manifests-v1.11.0.tar.gz", "sha256:" + "0" * 64, "apps/pipeline/upstream")
    assert components.Component("pipelines", "pipelines", (vendored,)).charts == ()


@pytest.mark.parametrize("component", [c for c in COMPONENTS if c.needs], ids=lambda c: c.name)
def test_needs_are_capabilities(component: components.Component) -> None:
    assert [n for n in component.needs if capability_problem(n)] == []


def test_kueue_job_kinds_are_the_workloads_it_queues() -> None:
    assert components.KUEUE_JOB_KINDS == {"batch/job": ("batch", "jobs"),
                                          "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
                                          "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs")}


def test_the_gke_firewall_opens_the_webhook_ports() -> None:
    from infra.cluster.gke.cluster import WEBHOOK_PORTS
    # Kueue's, the Trainer's and JobSet's 9443, Kueue's visibility API 8082 and istiod's 15017; cert-manager's 10250
    # is open on GKE already.
    assert WEBHOOK_PORTS == (8082, 9443, 15017)


# --- each fact spelled once --------------------------------------------------------------------------------

@pytest.mark.parametrize("namespace", sorted(components.namespaces()))
def test_a_namespace_is_spelled_only_in_the_catalogue(namespace: str) -> None:
    copies = {}
    for path in SOURCES:
        if path == CATALOGUE:
            continue
        uses = literal_uses(path.read_text(), namespace)
        if uses > OTHER_MEANINGS.get((_rel(path), namespace), 0):
            copies[_rel(path)] = uses
    assert copies == {}, f"read '{namespace}' from infra/components.py"
    assert literal_uses(CATALOGUE.read_text(), namespace) >= 1


def test_the_literal_scan_finds_a_copy() -> None:
    assert literal_uses('NAMESPACE = "kueue-system"\n', "kueue-system") == 1
    assert literal_uses('f"Secret kueue-system/{name}"\n', "kueue-system") == 1
    assert literal_uses('x = "kueue-systems"\ny = "a.kueue-system"\n', "kueue-system") == 0
    assert literal_uses('"""kueue-system in a docstring."""\n', "kueue-system") == 0


# --- layers ---------------------------------------------------------------------------------------------

def _importers(folder: str, forbidden: str) -> list[str]:
    return [_rel(p) for p in sorted((ROOT / folder).rglob("*.py"))
            if any(n == forbidden or n.startswith(f"{forbidden}.") for n in imported(p.read_text()))]


@pytest.mark.parametrize("folder", ["infra/cluster", "infra/offline"])
def test_never_imports_the_platform(folder: str) -> None:
    assert _importers(folder, "infra.platform") == []


def test_the_platform_never_imports_the_cluster_layer() -> None:
    assert _importers("infra/platform", "infra.cluster") == []


def test_the_catalogue_imports_only_the_bottom() -> None:
    ours = {n for n in imported(CATALOGUE.read_text()) if n.startswith("infra")}
    assert all(n.startswith(("infra.vocabulary", "infra.kit", "infra.spec")) for n in ours), ours
    assert "pulumi" not in {n.split(".")[0] for n in imported(CATALOGUE.read_text())}


def test_the_import_scan_finds_a_forbidden_import() -> None:
    assert "infra.platform" in imported("from infra.platform import kueue\n")
    assert "infra.platform.kueue" in imported("from infra.platform import kueue\n")
    assert "infra.platform.trainer" in imported("import infra.platform.trainer as t\n")
    assert not {n for n in imported("from infra.components import KUEUE\n") if n.startswith("infra.platform")}


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.name)
def test_each_component_has_its_builder_wired(component: components.Component) -> None:
    """A component is one entry, one builder module under infra/platform and its line in build_platform."""
    assert (ROOT / "infra" / "platform" / f"{component.builder.replace('.', '/')}.py").is_file()
    assert f"infra.platform.{component.builder}" in imported((ROOT / "infra" / "platform" / "__init__.py").read_text())


def _named_parts(who: str) -> list[str]:
    """'storage (...) and Velero's CSI backups; tenancy (...)' -> the parts' leading names."""
    return [part.split(" (")[0] for part in re.split(r"; | and (?=[a-z]+ \()", who)]


@pytest.mark.parametrize("stack", ["local", "onprem-lab", "aws-prod", "gcp-prod", "azure-prod"])
def test_derived_needs_are_declared_by_their_component(stack: str) -> None:
    """Each need the spec derives for a platform part that is a component is among that component's needs
    (csi:<driver> aside: the StorageClass names the driver)."""
    from tests.conftest import platform_of
    by_name = {c.name: c for c in COMPONENTS}
    undeclared = [(name, need.capability) for need in platform_of(stack).prerequisites.needs
                  for name in _named_parts(need.who) if name in by_name
                  and not need.capability.startswith("csi:") and need.capability not in by_name[name].needs]
    assert undeclared == []
