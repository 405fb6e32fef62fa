"""Team A's pods against the rendered NetworkPolicies of every multi-team stack (tests/netpol.py): a pod of any of A's
namespaces, carrying no label or any label set some rendered policy selects on (a tenant labels its pods freely),
tries every container port of every workload the platform renders outside A (Pipelines, the model registries and
their databases, KServe, Grafana and the per-team prom-label-proxies, the operators) and every pod of another team.
What it reaches must be exactly what docs/pipelines.md and docs/access.md promise a team pod: Pipelines' API server
(8887/8888), ML Metadata (8080), SeaweedFS' S3 on the stacks that run it, and the Trainer's status port."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from infra.vocabulary import POD_SPEC_PATHS, TEAM_LABEL
from tests.netpol import Pod, connects
from tests.people_layer import MULTI_TEAM, Obj, world

CONTROLLERS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
# What a team pod is meant to reach outside its team: (namespace, workload, port).
PROMISED = {("kubeflow", "ml-pipeline", 8887), ("kubeflow", "ml-pipeline", 8888),
            ("kubeflow", "metadata-grpc-deployment", 8080), ("kubeflow", "seaweedfs", 8333),
            ("kubeflow-system", "kubeflow-trainer-controller-manager", 10443)}
ML_METADATA = ("kubeflow", "metadata-grpc-deployment", 8080)


def _label_sets(policies: list[Obj]) -> list[dict[str, str]]:
    found: list[dict[str, str]] = [{}]
    for policy in policies:
        selectors = [policy["spec"].get("podSelector") or {}]
        for rule in (policy["spec"].get("ingress") or []) + (policy["spec"].get("egress") or []):
            selectors += [peer.get("podSelector") or {} for peer in rule.get("from", []) + rule.get("to", [])]
        found += [dict(s["matchLabels"]) for s in selectors if s.get("matchLabels") and s["matchLabels"] not in found]
    return found


def _workloads(rendered: tuple[Obj, ...]) -> list[tuple[str, str, dict[str, str], list[int]]]:
    """(namespace, name, pod labels, container ports) of every rendered pod template off the host network."""
    found = []
    for obj in rendered:
        if obj["kind"] not in CONTROLLERS:
            continue
        template: Any = obj
        for key in POD_SPEC_PATHS[obj["kind"]][:-1]:
            template = template[key]
        spec = template.get("spec", {})
        ports = sorted({p["containerPort"] for c in spec.get("containers", []) for p in c.get("ports") or []})
        if not spec.get("hostNetwork"):
            found.append((obj["metadata"]["namespace"], obj["metadata"]["name"],
                          dict((template.get("metadata") or {}).get("labels") or {}), ports or [8080]))
    return found


def reached(stack: str) -> set[tuple[str, str, int]]:
    return _reach(stack)[0]


def tried(stack: str) -> set[tuple[str, str]]:
    return _reach(stack)[1]


@functools.cache
def _reach(stack: str) -> tuple[set[tuple[str, str, int]], set[tuple[str, str]]]:
    """(what a pod of A reaches, every (namespace, workload) it tried)."""
    w = world(stack)
    rendered = w.objects
    policies = [o for o in rendered if o["kind"] == "NetworkPolicy"]
    ns_labels = {o["metadata"]["name"]: o["metadata"].get("labels") or {} for o in rendered if o["kind"] == "Namespace"}
    label_sets = _label_sets(policies)
    own = [ns for ns in w.own if ns in ns_labels]  # the acceptance namespace exists only while `accept` runs
    targets = [(ns, name, Pod(ns, labels, ns_labels.get(ns, {})), ports)
               for ns, name, labels, ports in _workloads(rendered) if ns not in w.own]
    # another team's own pods, labelled as freely as A's
    targets += [(ns, "team pod", Pod(ns, labels, ns_labels[ns]), [80, 8080, 29500]) for ns in w.others
                if ns in ns_labels for labels in label_sets]
    found = set()
    for ns in own:
        for labels in label_sets:
            source = Pod(ns, labels, ns_labels[ns])
            found |= {(tns, name, port) for tns, name, target, ports in targets for port in ports
                      if connects(policies, source, target, port)}
    return found, {(ns, name) for ns, name, _, _ in targets}


@pytest.mark.parametrize("stack", MULTI_TEAM)
def test_a_team_pod_reaches_only_what_is_promised_to_it(stack: str) -> None:
    got = reached(stack)
    assert got - PROMISED == set(), f"{stack}: a team pod reaches {sorted(got - PROMISED)}"
    # the neighbours: Pipelines' API and the Trainer's status port are reached, so the evaluation can say yes
    assert {("kubeflow", "ml-pipeline", 8888), ("kubeflow-system", "kubeflow-trainer-controller-manager", 10443)} \
        <= got


@pytest.mark.parametrize("stack", MULTI_TEAM)
def test_the_people_layers_internals_and_every_other_team_were_tried(stack: str) -> None:
    """Not reaching them means something only if they were among the targets: Grafana, each other team's
    prom-label-proxy, model registry and its database, Pipelines' MySQL, and the other teams' own pods."""
    w, names = world(stack), tried(stack)
    others = {t.name for t in w.platform.teams} - {w.team}
    expected = {("monitoring", f"prom-label-proxy-{team}") for team in others}
    expected |= {(f"{team}-models", "model-registry-deployment") for team in others}
    expected |= {(f"{team}-models", "model-registry-db") for team in others}
    expected |= {("kubeflow", "mysql")} | {(team, "team pod") for team in others}
    assert expected - names == set(), f"{stack}: never tried {sorted(expected - names)}"
    assert any(ns == "monitoring" and "grafana" in name for ns, name in names), stack


def test_a_namespace_without_the_team_label_is_no_team_pod() -> None:
    """The label sets and namespaces are what the verdict turns on: A's pod in a namespace that lost its team label
    reaches nothing of Pipelines (the label is what allow-pipelines selects on)."""
    w = world("onprem-lab")
    policies = [o for o in w.objects if o["kind"] == "NetworkPolicy"]
    api = next(Pod(ns, labels) for ns, name, labels, _ in _workloads(w.objects) if name == "ml-pipeline")
    assert connects(policies, Pod("vision", {}, {TEAM_LABEL: "vision"}), Pod("kubeflow", api.labels, {}), 8888)
    assert not connects(policies, Pod("vision", {}, {}), Pod("kubeflow", api.labels, {}), 8888)


@pytest.mark.xfail(strict=True, reason="ML Metadata (kubeflow/metadata-grpc, 8080) holds every team's lineage and "
                   "artifact URIs with no per-team authorization (upstream's AuthorizationPolicy allows all; "
                   "docs/pipelines.md, Limits); a team's KFP launcher writes to it, so closing the port breaks "
                   "pipelines: needs a per-team metadata service or an authorizing proxy (a design change)")
@pytest.mark.parametrize("stack", ["onprem-lab"])
def test_a_team_pod_cannot_read_another_teams_pipeline_lineage(stack: str) -> None:
    assert ML_METADATA not in reached(stack)
