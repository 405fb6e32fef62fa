"""The issuer of CI's machine tokens comes from the cluster the stack creates (EKS, AKS): the gateway's rules carry
the cluster resource's output, so a first `pulumi up` needs no edit of the stack and a rebuilt cluster's new issuer
replaces the old one; a declared frontDoor.serviceAccountIssuer wins; an existing cluster without one is one
prerequisite finding; GKE's derived issuer is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from infra.offline import engine, fakes
from infra.platform import frontdoor_identity as identity
from infra.spec import validate
from infra.spec.clouds import CLOUDS
from infra.spec.prerequisites import SA_ISSUER
from tests.conftest import capture_of, kube_objects, platform_of, raw_platform, run_raw

Obj = dict[str, Any]

# What the offline mocks answer as the created clusters' issuers (infra/offline/fakes.py: the EKS component's
# oidcProviderUrl, the AKS ManagedCluster's oidcIssuerProfile.issuerURL), typed here as the oracle.
CLUSTER_OUTPUT = {"aws-prod": "https://oidc.eks.us-east-1.amazonaws.com/id/OFFLINE",
                  "azure-prod": "https://oidc.offline.invalid/issuer/"}
CLUSTER_TYPES = {"aws-prod": "eks:index:Cluster", "azure-prod": "azure-native:containerservice:ManagedCluster"}
DECLARED = "https://oidc.eks.us-east-1.amazonaws.com/id/0A1B2C3D4E5F60718293A4B5C6D7E8F9"


def ci_issuer(stack: str) -> str:
    """The issuer CI's tokens carry on a stack's cluster: the spec's, or the created cluster's output."""
    issuer = platform_of(stack).front_door.machine_issuer  # type: ignore[union-attr]
    assert issuer is not None
    return issuer.issuer if issuer.issuer is not None else CLUSTER_OUTPUT[stack]


def _machine_rules(capture: engine.Capture) -> list[Obj]:
    """The gateway's jwtRules for ServiceAccount tokens (those bound to the machine audience)."""
    return [rule for obj in kube_objects(capture, "RequestAuthentication") for rule in obj["spec"]["jwtRules"]
            if rule.get("audiences") == [identity.MACHINE_AUDIENCE]]


def _principals(capture: engine.Capture) -> set[str]:
    """Every request principal the gateway's AuthorizationPolicies name for a ServiceAccount."""
    found: set[str] = set()
    for obj in kube_objects(capture, "AuthorizationPolicy"):
        for rule in obj["spec"].get("rules", []):
            for entry in rule.get("from", []):
                for key in ("requestPrincipals", "notRequestPrincipals"):
                    found |= {p for p in entry["source"].get(key, []) if "system:serviceaccount" in p or
                              p.endswith("/*")}
    return found


def _depends_on_cluster(capture: engine.Capture, stack: str, name: str) -> bool:
    [registration] = [r for r in capture.resources if r.name == name]
    return any(dep.startswith(f"{CLUSTER_TYPES[stack]}::") for dep in registration.depends_on)


@pytest.mark.parametrize("stack", ["aws-prod", "azure-prod"])
def test_a_created_cluster_s_issuer_is_its_output(stack: str) -> None:
    facts = platform_of(stack).front_door
    assert facts is not None and facts.machine_issuer is not None
    kind = platform_of(stack).spec.cluster.kind
    assert facts.machine_issuer.issuer is None and facts.machine_issuer.source == CLOUDS[kind].service_account_issuer
    assert platform_of(stack).spec.front_door.service_account_issuer is None  # type: ignore[union-attr]
    capture = capture_of(stack)
    rules = _machine_rules(capture)
    # One rule, for the cluster's issuer, its keys read by discovery (no jwksUri to guess per cloud).
    assert [(r["issuer"], "jwksUri" in r) for r in rules] == [(CLUSTER_OUTPUT[stack], False)]
    principals = _principals(capture)
    assert f"{CLUSTER_OUTPUT[stack]}/*" in principals
    assert all(p.startswith(CLUSTER_OUTPUT[stack]) for p in principals if "system:serviceaccount" in p)
    # The rule's kustomization and the policies wait for the cluster whose output they carry.
    for name in ("oauth2-proxy", "front-door-header-guard", "model-registry-nlp-access"):
        assert _depends_on_cluster(capture, stack, name), name


@pytest.mark.parametrize("stack", ["aws-prod", "azure-prod"])
def test_the_cluster_provides_the_issuer_so_no_finding(stack: str) -> None:
    prerequisites = platform_of(stack).prerequisites
    assert SA_ISSUER not in [n.capability for n in prerequisites.unmet()]
    assert prerequisites.provided[SA_ISSUER].by == "cluster"
    assert SA_ISSUER in prerequisites.by("cluster")


def test_a_rebuilt_cluster_s_new_issuer_replaces_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same stack file, a cluster that reports another issuer (as a rebuilt EKS cluster does): the rule and the
    policies follow, with no edit of the stack."""
    rebuilt = "https://oidc.eks.us-east-1.amazonaws.com/id/REBUILT"
    answer = fakes.OUTPUTS["eks:index:Cluster"]
    monkeypatch.setitem(fakes.OUTPUTS, "eks:index:Cluster", lambda inputs: {**answer(inputs),
                                                                            "oidcProviderUrl": rebuilt})
    capture = run_raw("aws-prod", raw_platform("aws-prod"))
    assert [r["issuer"] for r in _machine_rules(capture)] == [rebuilt]
    principals = _principals(capture)
    assert f"{rebuilt}/*" in principals and not [p for p in principals if p.startswith(CLUSTER_OUTPUT["aws-prod"])]


def test_a_declared_issuer_wins_over_the_cluster_s() -> None:
    raw = raw_platform("aws-prod")
    raw["frontDoor"]["serviceAccountIssuer"] = {"issuer": DECLARED}
    platform = validate(raw, "aws-prod")
    issuer = platform.front_door.machine_issuer  # type: ignore[union-attr]
    assert issuer is not None and issuer.issuer == DECLARED and issuer.source == "declared in " \
        "frontDoor.serviceAccountIssuer"
    assert platform.prerequisites.provided[SA_ISSUER].by == "site"
    capture = run_raw("aws-prod", raw)
    assert [r["issuer"] for r in _machine_rules(capture)] == [DECLARED]
    principals = _principals(capture)
    assert f"{DECLARED}/*" in principals and not [p for p in principals if p.startswith(CLUSTER_OUTPUT["aws-prod"])]
    # Declared, the rule is plain data: nothing in it waits for the cluster's output.
    assert not _depends_on_cluster(capture, "aws-prod", "front-door-header-guard")


def test_an_existing_cluster_without_an_issuer_is_exactly_one_finding() -> None:
    raw = raw_platform("onprem-lab")
    del raw["frontDoor"]["serviceAccountIssuer"]
    platform = validate(raw, "onprem-lab")
    assert platform.front_door is not None and platform.front_door.machine_issuer is None
    unmet = platform.prerequisites.unmet()
    assert [n.capability for n in unmet] == [SA_ISSUER]
    line = platform.prerequisites.finding_line(unmet[0])
    assert "frontDoor.serviceAccountIssuer" in line and "--service-account-issuer" in line
    # Listing it under cluster.existing.provides does not help: the gateway needs the issuer itself.
    raw["cluster"]["existing"].setdefault("provides", []).append(SA_ISSUER)
    assert [n.capability for n in validate(raw, "onprem-lab").prerequisites.unmet()] == [SA_ISSUER]


def test_gke_s_issuer_is_still_derived_by_the_spec() -> None:
    issuer = platform_of("gcp-prod").front_door.machine_issuer  # type: ignore[union-attr]
    assert issuer is not None and issuer.issuer == ("https://container.googleapis.com/v1/projects/trainyard-prod-ml/"
                                                    "locations/us-central1/clusters/trainyard-prod")
    capture = capture_of("gcp-prod")
    assert [(r["issuer"], "jwksUri" in r) for r in _machine_rules(capture)] == [(issuer.issuer, False)]
    [header_guard] = [r for r in capture.resources if r.name == "front-door-header-guard"]
    assert not any(dep.startswith("gcp:container/cluster:Cluster::") for dep in header_guard.depends_on)


def test_the_issuer_is_read_only_once_put_in() -> None:
    """The facts of a created cluster hold no issuer: a rule built from them before the cluster's output is put in
    is refused, rather than written without one."""
    facts = platform_of("aws-prod").front_door
    assert facts is not None
    with pytest.raises(ValueError, match="cluster's output"):
        identity.header_guard(facts)
    with pytest.raises(ValueError, match="no issuer"):
        identity.with_cluster_issuer(facts, None, identity.header_guard)
