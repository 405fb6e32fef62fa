"""observability.managedPrometheus on GKE: Prometheus runs Google's drop-in binary (self-deployed collection for
Managed Service for Prometheus) as a Google service account that holds roles/monitoring.metricWriter only and that
only the Prometheus Kubernetes service account may act as. gcp-prod turns it on in its stack file."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.checks.managed_prometheus import managed_prometheus_findings
from infra.commands import main
from infra.offline.engine import Capture, Registration
from infra.offline.plan import objects
from tests.conftest import ROOT, capture_of, kube_objects, platform_of, raw_platform, run_raw
from tests.test_cloud_common import of_type
from tests.test_managed_prometheus import prometheus_cr, prometheus_values

STACK = "gcp-prod"
FORK = "gke.gcr.io/prometheus-engine/prometheus:v2.53.5-gmp.1-gke.2"  # prometheus-engine v0.17.2 examples/
PROJECT = "trainyard-prod-ml"
WRITER = "trainyard-prod-prometheus@offline.iam.gserviceaccount.com"  # the offline engine's email for the account
PROJECT_GRANT = "gcp:projects/iAMMember:IAMMember"
IMPERSONATION = "gcp:serviceaccount/iAMMember:IAMMember"


@functools.cache
def option_off() -> Capture:
    raw = raw_platform(STACK)
    raw["observability"]["managedPrometheus"] = False
    return run_raw(STACK, raw)


def prometheus_account(capture: Capture) -> tuple[str, str]:
    """The namespace and service account the chart runs Prometheus as (read from the rendered CR)."""
    prometheus = prometheus_cr(capture)
    return prometheus["metadata"]["namespace"], prometheus["spec"]["serviceAccountName"]


def test_the_stack_file_turns_it_on_and_the_needs_name_the_api_and_the_role() -> None:
    assert raw_platform(STACK)["observability"]["managedPrometheus"] is True
    platform = platform_of(STACK)
    assert platform.observability.managed_prometheus == "google-managed-prometheus"
    assert dict(platform.observability.export_labels) == {"project_id": PROJECT, "location": "us-central1"}
    needs = {need.capability: need.who for need in platform.prerequisites.needs}
    assert "monitoring.googleapis.com" in needs["workload-identity"]
    assert "roles/monitoring.metricWriter" in needs["workload-identity"]
    assert platform.prerequisites.provided["workload-identity"].by == "cluster"
    assert platform.prerequisites.unmet() == ()


def test_the_writer_account_holds_metric_writer_only_and_only_prometheus_may_act_as_it() -> None:
    capture = capture_of(STACK)
    account = of_type(capture, "gcp:serviceaccount/account:Account")["prometheus"].inputs["accountId"]
    member = f"serviceAccount:{account}@offline.iam.gserviceaccount.com"
    granted = [(r.inputs["project"], r.inputs["role"]) for r in capture.resources
               if r.type == PROJECT_GRANT and r.inputs["member"] == member]
    assert granted == [(PROJECT, "roles/monitoring.metricWriter")]
    namespace, name = prometheus_account(capture)
    bindings = [r.inputs for r in capture.resources if r.type == IMPERSONATION]
    assert bindings == [{"member": f"serviceAccount:{PROJECT}.svc.id.goog[{namespace}/{name}]",
                         "role": "roles/iam.workloadIdentityUser",
                         "serviceAccountId": f"projects/offline/serviceAccounts/{WRITER}"}]
    assert managed_prometheus_findings(platform_of(STACK), capture, kube_objects(capture)) == []


def test_prometheus_runs_googles_binary_with_its_labels_and_identity_and_fits_its_crd() -> None:
    from tests.test_observability import _chart, missing_keys

    capture = capture_of(STACK)
    assert missing_keys({"prometheus": prometheus_values(capture)},
                        _chart("kube-prometheus-stack").merge_values({})) == []
    spec = prometheus_cr(capture)["spec"]
    assert (spec["image"], spec["version"]) == (FORK, "v2.53.5")
    assert spec["externalLabels"] == {"cluster": "trainyard-prod", "project_id": PROJECT, "location": "us-central1"}
    assert "remoteWrite" not in spec  # the fork exports by itself; GMP takes no remote write
    namespace, name = prometheus_account(capture)
    [account] = [o for o in kube_objects(capture, "ServiceAccount")
                 if (o["metadata"]["namespace"], o["metadata"]["name"]) == (namespace, name)]
    assert account["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": WRITER}
    index = CrdIndex(ROOT.parent / "shared" / "crds", platform_of(STACK).spec.versions.crd_dirs())
    assert check_custom(prometheus_cr(capture), index) == []


def test_scraping_rules_routing_and_dashboards_are_those_of_the_stack_without_the_option() -> None:
    on, off = capture_of(STACK), option_off()
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap", "Alertmanager"):
        assert kube_objects(on, kind) == kube_objects(off, kind), kind
    secret = "alertmanager-kube-prometheus-stack-alertmanager"
    assert [o for o in kube_objects(on, "Secret") if o["metadata"]["name"] == secret] == \
        [o for o in kube_objects(off, "Secret") if o["metadata"]["name"] == secret]
    spec = prometheus_cr(off)["spec"]
    assert spec["image"].startswith("quay.io/prometheus/prometheus:v3.") and "project_id" not in spec["externalLabels"]
    assert not of_type(off, IMPERSONATION) and "prometheus" not in of_type(off, "gcp:serviceaccount/account:Account")
    # Three more cloud resources (the account, its grant, its binding), nothing else.
    assert len(on.resources) - len(off.resources) == 3


def test_the_fork_image_is_listed_for_mirroring(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["images", STACK]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert FORK in lines and not any(line.startswith("quay.io/prometheus/prometheus:") for line in lines)


def _edited(capture: Capture, edit: Callable[[Registration], dict[str, Any] | None],
            extra: tuple[Registration, ...] = ()) -> Capture:
    """Each resource's inputs as `edit` returns them (None drops the resource), plus `extra`."""
    kept = []
    for record in capture.resources:
        inputs = edit(record)
        if inputs is not None:
            kept.append(dataclasses.replace(record, inputs=inputs))
    return dataclasses.replace(capture, resources=(*kept, *extra))


def _with(type_: str, key: str, old: str, new: str) -> Callable[[Registration], dict[str, Any] | None]:
    def edit(record: Registration) -> dict[str, Any] | None:
        if record.type == type_ and old in str(record.inputs.get(key, "")):
            return {**record.inputs, key: str(record.inputs[key]).replace(old, new)}
        return record.inputs
    return edit


def _findings(capture: Capture) -> list[str]:
    return [f"{f.subject}: {f.message}" for f in managed_prometheus_findings(
        platform_of(STACK), capture, [obj for _, obj in objects(capture)])]


def _in_kubernetes(old: str, new: str) -> Callable[[Registration], dict[str, Any] | None]:
    """`old` replaced by `new` in the Kubernetes objects only (not in the cloud resources)."""
    def edit(record: Registration) -> dict[str, Any] | None:
        if not record.type.startswith("kubernetes:"):
            return record.inputs
        text = json.dumps(record.inputs)
        return json.loads(text.replace(old, new)) if old in text else record.inputs
    return edit


def _drop(type_: str) -> Callable[[Registration], dict[str, Any] | None]:
    return lambda record: None if record.type == type_ else record.inputs


@pytest.mark.parametrize(("edit", "words"), [
    # a broader role instead of metric writer: both the missing role and the extra one
    (_with(PROJECT_GRANT, "role", "roles/monitoring.metricWriter", "roles/monitoring.editor"),
     ("lacks roles/monitoring.metricWriter", "also holds roles/monitoring.editor")),
    (_drop(IMPERSONATION), ("may act as no Google service account",)),
    # the binding names another Kubernetes service account than the one Prometheus runs as
    (_with(IMPERSONATION, "member", "kube-prometheus-stack-prometheus", "prometheus"),
     ("may act as no Google service account", "[monitoring/kube-prometheus-stack-prometheus]")),
])
def test_the_plan_check_fails_on_a_wrong_role_a_missing_binding_or_a_wrong_account(
        edit: Callable[[Registration], dict[str, Any] | None], words: tuple[str, ...]) -> None:
    found = _findings(_edited(capture_of(STACK), edit))
    assert found
    for word in words:
        assert any(word in line for line in found), (word, found)


def test_the_plan_check_fails_on_a_second_member_a_wrong_annotation_or_the_upstream_image() -> None:
    capture = capture_of(STACK)
    binding = of_type(capture, IMPERSONATION)["identity-prometheus"]
    second = dataclasses.replace(binding, name="identity-default", inputs={
        **binding.inputs, "member": f"serviceAccount:{PROJECT}.svc.id.goog[monitoring/default]"})
    [line] = _findings(_edited(capture, lambda r: r.inputs, (second,)))
    assert "may also be used by" in line and "[monitoring/default]" in line
    renamed = _edited(capture, _in_kubernetes(WRITER, "other@x.iam"))
    [line] = _findings(renamed)
    assert "annotation iam.gke.io/gcp-service-account is 'other@x.iam'" in line
    [line] = _findings(_edited(capture, _in_kubernetes(FORK, "quay.io/prometheus/prometheus:v3.14.0-distroless")))
    assert "cannot export to Managed Service for Prometheus" in line
