"""The prerequisites model pinned from both sides (infra/spec/prerequisites.py): which need arises from which part of
a stack (and which does not, one step short), who provides each (the cloud cluster, the site, the platform's charts)
and what an unmet need tells the operator to do, per cluster kind. The stacks' specs are loaded once and edited with
model_copy or replaced facts: no engine. Expected texts are the operator-facing lines; figures come from the stack
files (stacks/Pulumi.<stack>.yaml)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from infra.components import crd_groups
from infra.spec import Platform, validate
from infra.spec.clouds import CLOUDS
from infra.spec.prerequisites import (
    MANAGED_PROMETHEUS_NEED,
    SA_ISSUER,
    VOCABULARY,
    Need,
    Prerequisites,
    Provision,
    capability_problem,
    derive_needs,
    derive_prerequisites,
    fix,
    front_door_needs,
    with_needs,
)
from infra.spec.versions import CLUSTER_AUTOSCALER_IMAGES
from tests.conftest import raw_platform

AUDIT_FIX = ("run the API server with --audit-policy-file (docs/audit-policy.yaml) and --audit-log-path, then list "
             "`audit-log` under cluster.existing.provides")
LINK_FIX = ("a worker's only private path to the site is its `link`, provided once its cloud side is declared: set "
            "clusters.<worker>.link.attachment (the VPN connection or interconnect attachment, routed to `from`, the "
            "worker's API endpoint admitting `from` on 443) and use that network (or public, over https)")
ISSUER_FIX = ("declare frontDoor.serviceAccountIssuer: {issuer: <the cluster's service-account issuer>} (an existing "
              "cluster: its API server's --service-account-issuer)")
SITE_FIX = "arrange it at the site and list `{}` under frontDoor.provides"
EXISTING_FIX = "install it on the cluster and list `{}` under cluster.existing.provides"
LAYER_FIX = "the {} cluster layer does not provide it: use a cluster kind that does"
EKS_LOGIN = "set cluster.eks.login.oidc {issuerUrl, clientId} or cluster.eks.login.accessEntries"
GKE_LOGIN = "set cluster.gke.login.securityGroup (gke-security-groups@<your domain>)"
PINNED = " and ".join(CLUSTER_AUTOSCALER_IMAGES)


@pytest.fixture(scope="module")
def stacks() -> dict[str, Platform]:
    return {stack: validate(raw_platform(stack), stack)
            for stack in ("aws-prod", "gcp-prod", "azure-prod", "onprem-lab", "local")}


def _with(model: Any, **changes: Any) -> Any:
    """A copy of a spec model (or of a part of it) with fields replaced."""
    return model.model_copy(update=changes)


def _spec(platform: Platform, **changes: Any) -> Any:
    return _with(platform.spec, **changes)


def _needs(platform: Platform, spec: Any = None, storage: Any = None) -> dict[str, str]:
    return {n.capability: n.who for n in derive_needs(spec or platform.spec, storage or platform.storage)}


def _provided(platform: Platform, spec: Any = None) -> dict[str, Provision]:
    return dict(derive_prerequisites(spec or platform.spec, platform.storage).provided)


# --- the vocabulary and the fixes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["network-policy", "audit-log", "volume-snapshots", "autoscaler", "spot-interruption",
                                   "group-claims", "workload-identity", "load-balancer", "dns", "acme-http01",
                                   SA_ISSUER, "csi:ebs.csi.aws.com", "crd:kueue.x-k8s.io", "csi:a",
                                   "device:rdma/rdma_shared_device_a", "device:vpc.amazonaws.com/efa"])
def test_every_capability_of_the_vocabulary_is_one(value: str) -> None:
    assert capability_problem(value) is None


@pytest.mark.parametrize("value", ["networkpolicy", "csi:", "crd:-x", "csi:a-", "CSI:a", "link:vpn", "secret:x", "",
                                   "dns ", "device:GPU"])
def test_anything_else_is_refused_naming_the_vocabulary(value: str) -> None:
    assert capability_problem(value) == f"'{value}' is not a capability: use one of {VOCABULARY}"


@pytest.mark.parametrize(("kind", "capability", "remedy"), [
    ("eks", "dns", SITE_FIX.format("dns")), ("existing", "acme-http01", SITE_FIX.format("acme-http01")),
    ("existing", SA_ISSUER, ISSUER_FIX), ("gke", SA_ISSUER, ISSUER_FIX),
    ("existing", "link:vpn", LINK_FIX), ("eks", "link:public", LINK_FIX),
    ("existing", "audit-log", AUDIT_FIX), ("eks", "audit-log", LAYER_FIX.format("eks")),
    ("existing", "autoscaler", EXISTING_FIX.format("autoscaler")),
    ("existing", "group-claims", EXISTING_FIX.format("group-claims")),
    ("existing", "csi:nfs.csi.k8s.io", EXISTING_FIX.format("csi:nfs.csi.k8s.io")),
    ("eks", "autoscaler", f"the cluster autoscaler is pinned for Kubernetes {PINNED}: set versions.kubernetes to "
                          "one of them"),
    ("gke", "autoscaler", LAYER_FIX.format("gke")),
    ("eks", "group-claims", EKS_LOGIN), ("gke", "group-claims", GKE_LOGIN),
    ("aks", "group-claims", LAYER_FIX.format("aks")),
    ("aks", "csi:foo.example.com", "the aks cluster does not run foo.example.com: use the storage profile of the "
                                   "cluster's cloud (remove storage.profile)"),
    ("gke", "spot-interruption", LAYER_FIX.format("gke")),
])
def test_each_unmet_need_names_the_fix_for_its_kind_of_cluster(kind: str, capability: str, remedy: str) -> None:
    assert fix(kind, capability) == remedy
    line = Prerequisites(kind, (), {}).finding_line(Need(capability, "pool x; storage"))
    assert line == f"needed by pool x; storage; nothing provides it on this {kind} cluster: {remedy}"


def test_the_pinned_autoscaler_versions_are_more_than_one() -> None:
    """The eks fix joins them: with a single pin the join would not be exercised."""
    assert len(CLUSTER_AUTOSCALER_IMAGES) > 1 and CLOUDS["aks"].login_fix is None


# --- needs, merged; who provides them -------------------------------------------------------------------------------

def test_unmet_needs_and_who_provides_each_need() -> None:
    needs = (Need("x", "p1"), Need("b", "p2"), Need("a", "p3"), Need("c", "p4"))
    provided = {"x": Provision("site", "declared"), "a": Provision("site", "declared"),
                "b": Provision("cluster", "an add-on"), "z": Provision("platform", "a chart")}
    prerequisites = Prerequisites("existing", needs, provided)
    assert prerequisites.unmet() == (Need("c", "p4"),)
    assert prerequisites.by("site") == ("a", "x") and prerequisites.by("cluster") == ("b",)
    assert prerequisites.by("platform") == ()  # z is provided, but no part needs it


def test_more_needs_merge_per_capability_naming_each_part_once_in_order() -> None:
    before = Prerequisites("eks", (Need("b", "p1"), Need("d", "p2")), {"b": Provision("cluster", "old")})
    after = with_needs(before, [Need("d", "p3"), Need("a", "p4"), Need("d", "p2"), Need("d", "p5")],
                       {"b": Provision("site", "new"), "a": Provision("cluster", "link")})
    assert after.kind == "eks"
    assert after.needs == (Need("a", "p4"), Need("b", "p1"), Need("d", "p2; p3; p5"))
    assert after.provided == {"b": Provision("site", "new"), "a": Provision("cluster", "link")}
    assert before.provided == {"b": Provision("cluster", "old")}


# --- what the platform's parts need ----------------------------------------------------------------------------------

def test_an_autoscaled_pool_needs_the_autoscaler_one_node_apart_and_a_fixed_one_does_not(
        stacks: dict[str, Platform]) -> None:
    aws = stacks["aws-prod"]
    pools = aws.spec.pools
    one_apart = {**pools, "l40s": _with(pools["l40s"], autoscale=_with(pools["l40s"].autoscale, min=5)),
                 "spot": _with(pools["spot"], autoscale=None)}
    assert _needs(aws, _spec(aws, pools=one_apart))["autoscaler"] == "pool l40s (autoscale 5-6)"
    fixed = {**one_apart, "l40s": _with(pools["l40s"], autoscale=_with(pools["l40s"].autoscale, min=6))}
    assert "autoscaler" not in _needs(aws, _spec(aws, pools=fixed))
    assert _needs(aws)["autoscaler"] == "pool l40s (autoscale 2-6); pool spot (autoscale 0-8)"


def test_spot_capacity_and_a_fabric_device_are_needs_of_their_pool_only(stacks: dict[str, Platform]) -> None:
    aws, lab = _needs(stacks["aws-prod"]), _needs(stacks["onprem-lab"])
    assert aws["spot-interruption"] == "pool spot (Spot capacity)" and "spot-interruption" not in lab
    assert aws["device:vpc.amazonaws.com/efa"] == "pool h100 (fabric efa)"
    assert lab["device:rdma/rdma_shared_device_a"] == "pool h100 (fabric infiniband)"
    assert not [c for c in _needs(stacks["gcp-prod"]) if c.startswith("device:")]  # gcp-prod's pools: no fabric


def test_teams_need_network_policy_and_the_gateway_their_ci_tokens_issuer(stacks: dict[str, Platform]) -> None:
    lab = stacks["onprem-lab"]
    assert _needs(lab)["network-policy"] == "tenancy (each team namespace's default-deny NetworkPolicies)"
    assert _needs(lab)[SA_ISSUER] == "istio (the gateway accepts CI's trainyard-ci ServiceAccount tokens)"
    alone = _needs(lab, _spec(lab, teams={}))
    assert "network-policy" not in alone and SA_ISSUER not in alone
    assert alone["audit-log"] == "access review (docs/access.md: who changed what, who read which Secret)"


def test_storage_needs_its_drivers_snapshots_and_bucket_claims_only_when_it_has_them(
        stacks: dict[str, Platform]) -> None:
    lab = stacks["onprem-lab"]
    needs = _needs(lab)
    assert needs["volume-snapshots"] == ("storage (VolumeSnapshotClasses rbd-velero, cephfs-velero) and Velero's "
                                         "CSI backups")
    assert needs["crd:objectbucket.io"] == "storage (ObjectBucketClaims for the team and backup buckets)"
    # the rook-ceph profile: block volumes on RBD, the shared file systems on CephFS
    assert needs["csi:rook-ceph.rbd.csi.ceph.com"] == "storage (StorageClass block)"
    assert needs["csi:rook-ceph.cephfs.csi.ceph.com"] == ("storage (StorageClass datasets); storage (StorageClass "
                                                          "checkpoints); storage (StorageClass scratch)")
    bare = dataclasses.replace(lab.storage, classes=(), snapshot_classes=(), bucket_class=None)
    assert not [c for c in _needs(lab, storage=bare) if c.startswith(("csi:", "crd:")) or c == "volume-snapshots"]
    gcp = _needs(stacks["gcp-prod"])
    assert gcp["volume-snapshots"] == ("storage (VolumeSnapshotClasses pd-velero, filestore-velero) and Velero's CSI "
                                       "backups")
    assert "crd:objectbucket.io" not in gcp


CLOUD_BUCKETS = "backup (Velero) and storage (team buckets) on cloud object storage"


def test_cloud_object_storage_and_a_managed_prometheus_need_workload_identity(stacks: dict[str, Platform]) -> None:
    """aws-prod: buckets only; azure-prod: and the managed Prometheus (the remote write's identity); gcp-prod: and
    Google's own need, and cert-manager's dns01 writes. On-prem storage needs no cloud identity."""
    assert _needs(stacks["aws-prod"])["workload-identity"] == CLOUD_BUCKETS
    azure = stacks["azure-prod"]
    assert _needs(azure)["workload-identity"] == f"{CLOUD_BUCKETS}; {MANAGED_PROMETHEUS_NEED}"
    unmanaged = _spec(azure, observability=_with(azure.spec.observability, managed_prometheus=False))
    assert _needs(azure, unmanaged)["workload-identity"] == CLOUD_BUCKETS
    gcp = _needs(stacks["gcp-prod"])["workload-identity"].split("; ")
    assert gcp[0] == CLOUD_BUCKETS and gcp[2] == CLOUDS["gke"].managed_prometheus_need
    assert gcp[1] == "cert-manager (writes the front door's dns01 challenge into ml-example-com)"
    assert "workload-identity" not in _needs(stacks["onprem-lab"])


GROUP_CLAIMS = "access (persona RoleBindings name identity-provider groups)"


@pytest.mark.parametrize("source", ["platformAdmins", "engineers", "analysts", "ci", None])
def test_group_claims_arise_from_any_one_source_of_groups(stacks: dict[str, Platform], source: str | None) -> None:
    lab = stacks["onprem-lab"]
    groups = type(next(iter(lab.spec.teams.values())).groups)
    teams = {name: _with(team, groups=groups()) for name, team in lab.spec.teams.items()}
    identity = _with(lab.spec.identity, platform_admins=[])
    if source == "platformAdmins":
        identity = _with(identity, platform_admins=["platform-admins"])
    elif source is not None:
        first = next(iter(teams))
        teams[first] = _with(teams[first], groups=groups.model_validate({source: ["some-group"]}))
    needs = _needs(lab, _spec(lab, teams=teams, identity=identity))
    assert needs.get("group-claims") == (None if source is None else GROUP_CLAIMS)


# --- the front door --------------------------------------------------------------------------------------------------

def _door(platform: Platform, spec: Any = None) -> dict[str, str]:
    return {n.capability: n.who for n in front_door_needs(spec or platform.spec)}


GATEWAY_LB = "istio (the front door's gateway Service of type LoadBalancer)"
CI_TOKENS = "istio (the gateway accepts CI's trainyard-ci ServiceAccount tokens)"


def test_the_front_door_needs_per_certificate_issuer_and_kind_of_cluster(stacks: dict[str, Platform]) -> None:
    """aws-prod: ACME http01; gcp-prod: ACME dns01; onprem-lab: a CA of its own; local: a laptop's NodePort."""
    assert _door(stacks["aws-prod"]) == {
        "dns": "istio (the front door's gateway serving ml.example.com)", "load-balancer": GATEWAY_LB,
        "acme-http01": "cert-manager (the front door's ACME http01 challenge for ml.example.com)",
        SA_ISSUER: CI_TOKENS}
    assert _door(stacks["gcp-prod"]) == {
        "dns": "istio (the front door's gateway serving ml.example.com)", "load-balancer": GATEWAY_LB,
        "workload-identity": "cert-manager (writes the front door's dns01 challenge into ml-example-com)",
        SA_ISSUER: CI_TOKENS}
    assert _door(stacks["onprem-lab"]) == {"dns": "istio (the front door's gateway serving ml.lab.example.com)",
                                           "load-balancer": GATEWAY_LB, SA_ISSUER: CI_TOKENS}
    assert _door(stacks["local"]) == {"dns": "istio (the front door's gateway serving trainyard.localhost)",
                                      SA_ISSUER: CI_TOKENS}


def test_no_front_door_needs_nothing_and_provides_no_issuer(stacks: dict[str, Platform]) -> None:
    for stack in ("aws-prod", "gcp-prod", "local"):
        platform = stacks[stack]
        spec = _spec(platform, front_door=None)
        assert _door(platform, spec) == {}
        assert not {"dns", "acme-http01", SA_ISSUER} & set(_provided(platform, spec)), stack


# --- who provides -----------------------------------------------------------------------------------------------------

def test_the_platforms_charts_provide_their_crds_everywhere(stacks: dict[str, Platform]) -> None:
    for platform in stacks.values():
        provided = _provided(platform)
        assert all(provided[f"crd:{g}"] == Provision("platform", "the platform's charts") for g in crd_groups())
    assert "crd:objectbucket.io" not in _provided(stacks["aws-prod"])  # Rook's, declared by onprem-lab's site


def test_efa_devices_are_the_platforms_only_on_a_pool_with_efa(stacks: dict[str, Platform]) -> None:
    aws = stacks["aws-prod"]
    efa = "device:vpc.amazonaws.com/efa"
    assert _provided(aws)[efa] == Provision("platform", "aws-efa-k8s-device-plugin chart")
    pools = {name: _with(pool, fabric="none") for name, pool in aws.spec.pools.items()}
    assert efa not in _provided(aws, _spec(aws, pools=pools))


def test_the_site_provides_what_it_declares_and_a_localhost_name_resolves_by_itself(
        stacks: dict[str, Platform]) -> None:
    declared = Provision("site", "declared in frontDoor.provides")
    aws = stacks["aws-prod"]
    assert (_provided(aws)["dns"], _provided(aws)["acme-http01"]) == (declared, declared)
    undeclared = _spec(aws, front_door=_with(aws.spec.front_door, provides=[]))
    assert not {"dns", "acme-http01"} & set(_provided(aws, undeclared))
    local = stacks["local"]
    assert _provided(local)["dns"] == Provision("site", "a .localhost name resolves to the machine itself (RFC 6761)")
    named = _spec(local, front_door=_with(local.spec.front_door, host="localhost.example.com"))
    assert "dns" not in _provided(local, named)
    lab = _provided(stacks["onprem-lab"])
    assert lab["network-policy"] == Provision("site", "declared in cluster.existing.provides")
    assert lab["dns"] == declared


def test_a_cloud_provides_its_mechanisms_and_eks_only_what_it_installs(stacks: dict[str, Platform]) -> None:
    """EKS installs the FSx driver only with an FSx subnet, and the autoscaler only for a pinned minor; GKE and AKS
    provide every mechanism of theirs."""
    for stack, kind in (("gcp-prod", "gke"), ("azure-prod", "aks")):
        provided = _provided(stacks[stack])
        assert all(provided[c] == Provision("cluster", how) for c, how in CLOUDS[kind].provides.items())
    aws = stacks["aws-prod"]
    provided = _provided(aws)
    assert "csi:fsx.csi.aws.com" not in provided
    assert provided["autoscaler"] == Provision("cluster", CLOUDS["eks"].provides["autoscaler"])
    assert provided["csi:ebs.csi.aws.com"] == Provision("cluster", CLOUDS["eks"].provides["csi:ebs.csi.aws.com"])
    fsx = _with(aws.spec.storage, aws=_with(aws.spec.storage.aws, fsx_subnet_id="subnet-0abc"))
    assert _provided(aws, _spec(aws, storage=fsx))["csi:fsx.csi.aws.com"].by == "cluster"
    unpinned = _spec(aws, versions=_with(aws.spec.versions, kubernetes="1.33"))
    assert "autoscaler" not in _provided(aws, unpinned)


def test_cluster_login_provides_group_claims(stacks: dict[str, Platform]) -> None:
    assert _provided(stacks["aws-prod"])["group-claims"] == Provision(
        "cluster", "EKS OIDC identity provider https://login.example.com")
    assert _provided(stacks["gcp-prod"])["group-claims"] == Provision(
        "cluster", "Google Groups for RBAC (gke-security-groups@example.com)")


def test_the_service_account_issuer_is_provided_by_declaration_a_laptop_or_the_cluster_created(
        stacks: dict[str, Platform]) -> None:
    """Listing it under cluster.existing.provides provides nothing: the gateway needs the issuer itself. A cluster
    the stack creates reports its own (EKS, AKS: an output; GKE: derived); an existing one needs a declaration."""
    for stack, kind in (("aws-prod", "eks"), ("azure-prod", "aks")):
        reported = CLOUDS[kind].service_account_issuer
        assert reported is not None
        assert _provided(stacks[stack])[SA_ISSUER] == Provision("cluster", reported)
    assert _provided(stacks["local"])[SA_ISSUER] == Provision(
        "cluster", "kind's in-cluster issuer, read through the cluster-jwks-proxy")
    assert _provided(stacks["gcp-prod"])[SA_ISSUER] == Provision(
        "cluster", "GKE's issuer of the cluster (container.googleapis.com)")
    lab_door = stacks["onprem-lab"].spec.front_door
    assert lab_door is not None and lab_door.service_account_issuer is not None
    assert _provided(stacks["onprem-lab"])[SA_ISSUER] == Provision("site", "declared in frontDoor.serviceAccountIssuer")
    for stack in ("aws-prod", "azure-prod"):  # a declaration wins over the cluster's output
        platform = stacks[stack]
        door = _with(platform.spec.front_door, service_account_issuer=lab_door.service_account_issuer)
        assert _provided(platform, _spec(platform, front_door=door))[SA_ISSUER].by == "site", stack
    platform = stacks["onprem-lab"]
    door = _with(platform.spec.front_door, service_account_issuer=None)
    assert SA_ISSUER not in _provided(platform, _spec(platform, front_door=door))
    lab = stacks["onprem-lab"]
    existing = lab.spec.cluster.existing
    assert existing is not None
    cluster = _with(lab.spec.cluster, existing=_with(existing, provides=[*existing.provides, SA_ISSUER]))
    door = _with(lab.spec.front_door, service_account_issuer=None)
    assert SA_ISSUER not in _provided(lab, _spec(lab, cluster=cluster, front_door=door))
