"""observability.managedPrometheus: the in-cluster Prometheus remote-writes to the cloud's managed Prometheus (AMP on
EKS, Azure Monitor on AKS) as a workload identity that may write there and nowhere else; refused where there is no
such service; nothing of it exists when the option is off. GKE: test_managed_prometheus_gke.py."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.commands import main
from infra.offline.engine import Capture
from infra.offline.fakes import OUTPUTS
from infra.spec.observability import PROMETHEUS_ACCOUNT
from tests.conftest import ROOT, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack
from tests.test_bad_config import _assert_one_clean_line
from tests.test_cloud_common import of_type

NAMESPACE, ACCOUNT = PROMETHEUS_ACCOUNT
# What the offline engine's fakes answer for the outputs the URL is built from (infra/offline/fakes.py).
AMP_ENDPOINT = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-offline/"
AMP_ARN = "arn:aws:aps:us-east-1:123456789012:workspace/ws-offline"
AZURE_URL = ("https://offline.eastus-1.metrics.ingest.monitor.azure.com/dataCollectionRules/dcr-offline/streams/"
             "Microsoft-PrometheusMetrics/api/v1/write?api-version=2023-04-24")
MANAGED_TYPES = ("aws:amp/workspace:Workspace", "azure-native:monitor:AzureMonitorWorkspace",
                 "azure-native:monitor:DataCollectionEndpoint", "azure-native:monitor:DataCollectionRule")


# azure-prod turns the option on in its stack file; aws-prod leaves it off.
ON_IN_STACK_FILE = "azure-prod"


@functools.cache
def managed(stack: str) -> Capture:
    if stack == ON_IN_STACK_FILE:
        return capture_of(stack)
    raw = raw_platform(stack)
    raw.setdefault("observability", {})["managedPrometheus"] = True
    return run_raw(stack, raw)


def prometheus_values(capture: Capture) -> dict[str, Any]:
    chart = of_type(capture, "kubernetes:helm.sh/v4:Chart")["kube-prometheus-stack"]
    values: dict[str, Any] = chart.inputs["values"]["prometheus"]
    return values


def prometheus_cr(capture: Capture) -> dict[str, Any]:
    return next(o for o in kube_objects(capture, "Prometheus") if o["metadata"]["name"].endswith("-prometheus"))


@pytest.mark.parametrize(("stack", "observability", "words"), [
    ("onprem-lab", {"managedPrometheus": True}, ("observability.managedPrometheus", "eks, gke or aks", "existing")),
    ("local", {"managedPrometheus": True}, ("observability.managedPrometheus", "remove managedPrometheus")),
    ("gcp-prod", {"managedPrometheus": True, "enabled": False},
     ("observability.managedPrometheus", "observability.enabled")),
    ("aws-prod", {"managedPrometheus": True, "enabled": False},
     ("observability.managedPrometheus", "observability.enabled")),
    ("aws-prod", {"managedPrometheus": "yes please"}, ("observability.managedPrometheus",)),
])
def test_where_there_is_nothing_to_write_to_the_option_is_refused(
        stack: str, observability: dict[str, Any], words: tuple[str, ...], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(stack)
    raw["observability"] = observability
    _assert_one_clean_line(capsys, main(["validate", str(write_stack(tmp_path, raw, stack))]), words)


def test_the_option_is_accepted_where_a_managed_prometheus_exists(tmp_path: Path) -> None:
    from infra.spec import load_file

    for stack, service in (("aws-prod", "amazon-managed-prometheus"), ("azure-prod", "azure-monitor")):
        raw = raw_platform(stack)
        raw["observability"] = {"managedPrometheus": True}
        assert load_file(write_stack(tmp_path, raw, stack)).observability.managed_prometheus == service
        needs = {need.capability: need.who for need in load_file(write_stack(tmp_path, raw, stack)).prerequisites.needs}
        assert "observability" in needs["workload-identity"]  # checked live by `trainyard verify`
    assert "observability" not in {n.capability: n.who for n in platform_of("aws-prod").prerequisites.needs}[
        "workload-identity"]


def test_eks_writes_to_its_amp_workspace_as_a_pod_identity_allowed_only_that() -> None:
    capture = managed("aws-prod")
    assert set(of_type(capture, "aws:amp/workspace:Workspace")) == {"prometheus"}
    inline = of_type(capture, "aws:iam/rolePolicy:RolePolicy")["role-prometheus-remote-write"].inputs
    assert inline["role"] == "role-prometheus-remote-write-id"
    policy = json.loads(inline["policy"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": AMP_ARN}]
    association = of_type(capture, "aws:eks/podIdentityAssociation:PodIdentityAssociation")["identity-prometheus"]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (NAMESPACE, ACCOUNT)
    spec = prometheus_values(capture)["prometheusSpec"]
    assert spec["remoteWrite"] == [{"url": f"{AMP_ENDPOINT}api/v1/remote_write", "sigv4": {"region": "us-east-1"}}]
    # Pod Identity needs neither an annotation nor a pod label.
    assert "serviceAccount" not in prometheus_values(capture) and "podMetadata" not in spec


def test_aks_writes_through_its_collection_rule_as_a_federated_identity_allowed_only_there() -> None:
    capture = managed("azure-prod")
    rule = of_type(capture, "azure-native:monitor:DataCollectionRule")["prometheus"].inputs
    assert rule["dataCollectionEndpointId"] == "prometheus-id"  # the endpoint created beside it
    assert rule["destinations"]["monitoringAccounts"] == [{"accountResourceId": "prometheus-id", "name": "workspace"}]
    assert rule["dataFlows"] == [{"streams": ["Microsoft-PrometheusMetrics"], "destinations": ["workspace"]}]
    credential = of_type(capture, "azure-native:managedidentity:FederatedIdentityCredential")["identity-prometheus"]
    assert credential.inputs["subject"] == f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
    grant = of_type(capture, "azure-native:authorization:RoleAssignment")["identity-prometheus"].inputs
    assert grant["scope"] == "prometheus-id"  # the rule, not the workspace or the group
    assert grant["roleDefinitionId"].endswith("/roleDefinitions/3913510d-42f4-4e42-8a64-420c390055eb")
    identity = of_type(capture, "azure-native:managedidentity:UserAssignedIdentity")["identity-prometheus"].inputs
    client_id = OUTPUTS["azure-native:managedidentity:UserAssignedIdentity"](identity)["clientId"]
    values = prometheus_values(capture)
    assert values["prometheusSpec"]["remoteWrite"] == [{"url": AZURE_URL, "azureAd": {
        "cloud": "AzurePublic", "workloadIdentity": {"clientId": client_id,
                                                     "tenantId": "33333333-3333-3333-3333-333333333333"}}}]
    assert values["serviceAccount"]["annotations"] == {"azure.workload.identity/client-id": client_id}
    assert values["prometheusSpec"]["podMetadata"] == {"labels": {"azure.workload.identity/use": "true"}}


@pytest.mark.parametrize("stack", ["aws-prod", "azure-prod"])
def test_the_rendered_prometheus_carries_the_remote_write_and_fits_its_crd(stack: str) -> None:
    from tests.test_observability import _chart, missing_keys

    capture = managed(stack)
    assert missing_keys({"prometheus": prometheus_values(capture)},
                        _chart("kube-prometheus-stack").merge_values({})) == []
    prometheus = prometheus_cr(capture)
    assert prometheus["spec"]["remoteWrite"] == prometheus_values(capture)["prometheusSpec"]["remoteWrite"]
    index = CrdIndex(ROOT.parent / "shared" / "crds", platform_of(stack).spec.versions.crd_dirs())
    assert check_custom(prometheus, index) == []
    broken = json.loads(json.dumps(prometheus))
    broken["spec"]["remoteWrite"][0]["url"] = "aps-workspaces.example/api/v1/remote_write"  # no scheme
    assert any("url" in problem for problem in check_custom(broken, index))
    # Scraping and alerting stay in the cluster: the rules and monitors are those of the stack without the option.
    assert kube_objects(capture, "PrometheusRule") == kube_objects(capture_of(stack), "PrometheusRule")


def test_the_stack_file_option_is_what_turns_it_on() -> None:
    assert raw_platform(ON_IN_STACK_FILE)["observability"]["managedPrometheus"] is True
    assert platform_of(ON_IN_STACK_FILE).observability.managed_prometheus == "azure-monitor"
    assert platform_of("aws-prod").observability.managed_prometheus is None


@pytest.mark.parametrize("stack", ["aws-prod", "onprem-lab"])
def test_with_the_option_off_nothing_managed_exists(stack: str) -> None:
    capture = capture_of(stack)
    assert [r.name for r in capture.resources if r.type in MANAGED_TYPES] == []
    assert "remoteWrite" not in prometheus_values(capture)["prometheusSpec"]
    assert "remoteWrite" not in prometheus_cr(capture)["spec"]
    assert not [r for r in capture.resources if r.name == "identity-prometheus"]
