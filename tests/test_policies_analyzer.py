"""`python policies/__main__.py` as the Pulumi CLI starts it: it prints its port, serves the pack over the
Analyzer gRPC service on loopback, and reports violations with the levels the CLI's config sets."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from policies.rules import POLICY_NAMES

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT, CALL_TIMEOUT = 60.0, 30.0


def _read_port(process: subprocess.Popen[bytes]) -> int:
    """The first stdout line, within START_TIMEOUT (a hung pack fails the test instead of blocking it)."""
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline() if process.stdout else b""),
                              daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or not line[0].strip():
        stderr = b"" if process.poll() is None else (process.stderr.read() if process.stderr else b"")
        pytest.fail(f"the policy pack printed no port within {START_TIMEOUT}s: {stderr.decode()[-2000:]}")
    return int(line[0])


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    process = subprocess.Popen([sys.executable, str(ROOT / "policies" / "__main__.py")], cwd=ROOT / "policies",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        port = _read_port(process)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=CALL_TIMEOUT)
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _analyze(stub: analyzer_pb2_grpc.AnalyzerStub, type_: str, name: str,
             props: dict[str, object]) -> analyzer_pb2.AnalyzeResponse:
    properties = struct_pb2.Struct()
    properties.update(props)
    request = analyzer_pb2.AnalyzeRequest(type=type_, properties=properties, name=name,
                                          urn=f"urn:pulumi:test::trainyard::{type_}::{name}")
    return stub.Analyze(request, timeout=CALL_TIMEOUT)


def test_pack_serves_its_policies(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    assert info.name == "trainyard"
    assert {policy.name for policy in info.policies} == POLICY_NAMES
    assert {policy.name for policy in info.policies if policy.enforcementLevel != analyzer_pb2.MANDATORY} == {
        "apiserver-not-checked"}
    assert {policy.enforcementLevel for policy in info.policies} == {analyzer_pb2.MANDATORY, analyzer_pb2.ADVISORY}


def test_analyze_reports_an_unpinned_chart(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    response = _analyze(analyzer, "kubernetes:helm.sh/v4:Chart", "kueue",
                        {"chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "latest"})
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("pinned-versions", analyzer_pb2.MANDATORY)]
    assert "latest" in response.diagnostics[0].message


def test_analyze_stack_reports_a_bare_team_namespace(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    namespace = struct_pb2.Struct()
    namespace.update({"kind": "Namespace", "metadata": {"name": "vision", "labels": {"trainyard.io/team": "vision"}}})
    urn = "urn:pulumi:test::trainyard::kubernetes:core/v1:Namespace::ns-vision"
    request = analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_pb2.AnalyzerResource(
        type="kubernetes:core/v1:Namespace", properties=namespace, urn=urn, name="ns-vision")])
    response = analyzer.AnalyzeStack(request, timeout=CALL_TIMEOUT)
    # no quota, limits or deny policy; and no Pod Security level enforced
    assert sorted((d.policyName, d.urn) for d in response.diagnostics) == [("team-namespace-baseline", urn),
                                                                           ("team-pod-security", urn)]


def test_analyze_stack_refuses_what_the_api_server_would(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    """At `pulumi preview`: a ClusterQueue whose flavor quotas fewer resources than its group covers breaks a CEL
    rule of Kueue's CRD, and one that lends more than its nominal quota breaks Kueue's webhook."""
    groups = [{"coveredResources": ["nvidia.com/gpu", "cpu"],
               "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]
    lending = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 9}]}]}]
    resources = []
    for name, spec in (("cq-cel", {"resourceGroups": groups}),
                       ("cq-lend", {"cohortName": "all", "resourceGroups": lending}),
                       ("cq-ok", {"cohortName": "all", "resourceGroups": [dict(lending[0], flavors=[{
                           "name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                          "lendingLimit": 8}]}])]})):
        props = struct_pb2.Struct()
        props.update({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                      "spec": spec})
        type_ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
        resources.append(analyzer_pb2.AnalyzerResource(type=type_, properties=props, name=name,
                                                       urn=f"urn:pulumi:test::trainyard::{type_}::{name}"))
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=CALL_TIMEOUT)
    found = sorted((d.policyName, d.urn.rsplit("::", 1)[-1], d.message.split("\n", 1)[-1])
                   for d in response.diagnostics if d.policyName in ("crd-cel", "operator-webhooks"))
    assert found == [
        ("crd-cel", "cq-cel", "ClusterQueue/cq-cel: spec.resourceGroups[0]: flavors must have the same number of "
         "resources as the coveredResources"),
        ("operator-webhooks", "cq-lend", "kueue: ClusterQueue/cq-lend: spec.resourceGroups[0].flavors[0].resources[0]."
         "lendingLimit: must be less than or equal to the nominalQuota")]


def test_pack_config_sets_levels(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    """What --policy-pack-config does: the level configured for a policy's name wins (runs last: it
    reconfigures the shared analyzer)."""
    config = analyzer_pb2.ConfigureAnalyzerRequest(
        policyConfig={"pinned-versions": analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.ADVISORY)})
    analyzer.Configure(config, timeout=CALL_TIMEOUT)
    response = _analyze(analyzer, "kubernetes:helm.sh/v4:Chart", "kueue", {"chart": "kueue", "version": "0.19"})
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("pinned-versions", analyzer_pb2.ADVISORY)]
