"""The webhook registry (infra/apiserver/webhooks/__init__.py): the rules each pinned minor registers, with the
group and kind upstream's webhook configuration names, the Kueue feature gate a rule needs on and the object
selector of JobSet's pod webhook (v0.12.0 config/components/webhook/patches/validating-patch.yaml:
jobset.sigs.k8s.io/jobset-name Exists); and the note for a pinned minor without rules lists every minor written."""

from __future__ import annotations

import pytest

from infra.apiserver.webhooks import REGISTRY, WebhookRule, rules_for
from infra.spec.versions import Versions

K, T, J = "kueue.x-k8s.io", "trainer.kubeflow.org", "jobset.x-k8s.io"
TAS = "TopologyAwareScheduling"
RULES = {
    ("kueue", "0.19"): [
        (K, "ClusterQueue", "cluster_queue", ""), (K, "Cohort", "cohort", ""),
        (K, "ResourceFlavor", "resource_flavor", ""), (K, "Workload", "workload", ""),
        ("batch", "Job", "job_on_create", ""), ("batch", "Job", "job_annotations", ""),
        ("batch", "Job", "job_topology", TAS),
        (J, "JobSet", "job_on_create", ""), (T, "TrainJob", "job_on_create", ""), (J, "JobSet", "jobset_topology", TAS),
        (T, "TrainJob", "trainjob_topology", TAS)],
    ("trainer", "2.2"): [(T, "ClusterTrainingRuntime", "runtime", ""), (T, "TrainingRuntime", "runtime", ""),
                         (T, "TrainJob", "trainjob", "")],
    ("jobset", "0.12"): [(J, "JobSet", "jobset", ""), ("", "Pod", "exclusive_placement", "")],
}
SELECTORS = {"exclusive_placement": "jobset.sigs.k8s.io/jobset-name"}


def test_each_pinned_minor_registers_upstreams_rules_with_their_gates_and_object_selectors() -> None:
    assert {key: [(r.group, r.kind, r.name, r.gate) for r in rules] for key, rules in REGISTRY.items()} == RULES
    for (component, _), rules in REGISTRY.items():
        for rule in rules:
            assert isinstance(rule, WebhookRule)
            assert rule.component == component
            assert rule.check.__name__ == rule.name  # the rule runs the check it is named after
            assert rule.object_label == SELECTORS.get(rule.name, "")


@pytest.mark.parametrize(("written", "note"), [
    ([], "rules are written for kueue 0.19 only"),
    ([("kueue", "0.18")], "rules are written for kueue 0.18, 0.19 only"),
    ([("kueue", "0.21"), ("kueue", "0.18")], "rules are written for kueue 0.18, 0.19, 0.21 only")])
def test_a_pinned_minor_without_rules_is_reported_with_every_minor_written(
        monkeypatch: pytest.MonkeyPatch, written: list[tuple[str, str]], note: str) -> None:
    for key in written:
        monkeypatch.setitem(REGISTRY, key, ())
    _, missing = rules_for(Versions(kueue="0.20.0", trainer="2.2.1", jobset="0.12.0"))
    assert [(u.where, u.rule, u.why) for u in missing] == [("kueue 0.20", "validating webhooks", note)]
