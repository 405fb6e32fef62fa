"""Requires and provides: every need of each stack has a provider; a stack edited so that a need is unmet fails
the plan with one line naming the need, who needs it and the fix."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.checks.context import Context
from infra.checks.prerequisites import check_needs_cover_objects, check_prerequisites
from infra.commands import main
from infra.offline.engine import Capture, Registration
from infra.spec import SpecError, validate
from infra.spec.prerequisites import Need, Provision
from tests.conftest import STACKS, platform_of, raw_platform, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

Edit = Callable[[dict[str, Any]], None]


def _drop(capability: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["cluster"]["existing"]["provides"].remove(capability)
    return edit


def _eks_without_login(raw: dict[str, Any]) -> None:
    del raw["cluster"]["eks"]["login"]


def _gke_without_login(raw: dict[str, Any]) -> None:
    del raw["cluster"]["gke"]["login"]


def _eks_on_rook(raw: dict[str, Any]) -> None:
    raw["storage"] = {"profile": "rook-ceph"}


def _eks_on_133(raw: dict[str, Any]) -> None:
    raw["versions"] = {"kubernetes": "1.33"}  # no cluster-autoscaler image pinned for it


def _no_private_store(raw: dict[str, Any]) -> None:
    del raw["egress"]["provides"]


def _lab_on_s3_with_spot(raw: dict[str, Any]) -> None:
    raw["pools"]["l40s"]["capacityType"] = "spot"
    raw["storage"] = {"profile": "aws", "region": "us-east-1"}


# (stack, edit, the need left unmet, words of its line: who needs it, and the fix)
UNMET = [
    ("onprem-lab", _drop("network-policy"), "network-policy", ["tenancy", "cluster.existing.provides"]),
    ("onprem-lab", _drop("csi:rook-ceph.cephfs.csi.ceph.com"), "csi:rook-ceph.cephfs.csi.ceph.com",
     ["StorageClass datasets", "StorageClass checkpoints", "StorageClass scratch"]),
    ("onprem-lab", _drop("volume-snapshots"), "volume-snapshots", ["VolumeSnapshotClasses rbd-velero"]),
    ("onprem-lab", _drop("crd:objectbucket.io"), "crd:objectbucket.io", ["ObjectBucketClaims"]),
    ("onprem-lab", _drop("group-claims"), "group-claims", ["persona RoleBindings"]),
    ("onprem-lab", _drop("device:rdma/rdma_shared_device_a"), "device:rdma/rdma_shared_device_a",
     ["pool h100 (fabric infiniband)"]),
    ("onprem-lab", _lab_on_s3_with_spot, "spot-interruption", ["pool l40s (Spot capacity)"]),
    ("onprem-lab", _lab_on_s3_with_spot, "workload-identity", ["Velero", "team buckets"]),
    ("aws-prod", _eks_without_login, "group-claims", ["cluster.eks.login.oidc"]),
    ("gcp-prod", _gke_without_login, "group-claims", ["cluster.gke.login.securityGroup"]),
    ("aws-prod", _eks_on_rook, "csi:rook-ceph.rbd.csi.ceph.com", ["StorageClass block", "storage profile"]),
    ("gcp-prod", _no_private_store, "private-store-endpoint",
     ["team egress", "Cloud DNS private zone googleapis.com", "private.googleapis.com", "egress.provides"]),
    ("azure-prod", _no_private_store, "private-store-endpoint",
     ["team egress", "Blob private endpoint", "privatelink.blob.core.windows.net", "egress.provides"]),
    ("aws-prod", _eks_on_133, "autoscaler", ["pool l40s (autoscale 2-6); pool spot (autoscale 0-8)",
                                             "versions.kubernetes"]),
]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_has_every_need_provided(stack: str) -> None:
    prerequisites = platform_of(stack).prerequisites
    assert prerequisites.needs and prerequisites.unmet() == ()


@pytest.mark.parametrize(("stack", "edit", "capability", "words"), UNMET)
def test_an_unmet_need_is_one_line_naming_it_who_needs_it_and_the_fix(stack: str, edit: Edit, capability: str,
                                                                      words: list[str]) -> None:
    raw = raw_platform(stack)
    edit(raw)
    platform = validate(raw, stack)
    context = Context(platform, Capture(stack, "trainyard", (), {}), None)
    lines = {f.subject: f.line() for f in check_prerequisites(context)}
    assert capability in lines, lines
    line = lines[capability]
    assert line.startswith(f"[error] prerequisites: {capability}: needed by ") and "\n" not in line
    assert all(word in line for word in words), line


def test_a_pool_of_fixed_size_needs_no_autoscaler() -> None:
    raw = raw_platform("aws-prod")
    raw["pools"]["l40s"]["autoscale"] = {"min": 6, "max": 6}
    raw["pools"]["spot"]["autoscale"] = {"min": 1, "max": 1}
    # one Spot node: nlp's team-wide borrowing limit would reach all of it, which research queues for too
    raw["teams"]["nlp"]["quota"]["spot"] = {"gpus": 0, "borrowingLimit": 2}
    needs = {n.capability: n.who for n in validate(raw, "aws-prod").prerequisites.needs}
    assert "autoscaler" not in needs and needs["spot-interruption"] == "pool spot (Spot capacity)"


@pytest.mark.parametrize("stack", STACKS)
def test_only_a_store_reached_at_private_addresses_needs_the_site_s_endpoint(stack: str) -> None:
    """S3's public names resolve into the ranges AWS publishes, and Rook's and SeaweedFS' stores are in the cluster:
    only GCS (private.googleapis.com) and Blob Storage (a private endpoint) need the site's DNS; and only when teams'
    pods reach the store."""
    platform = platform_of(stack)
    needs = {n.capability for n in platform.prerequisites.needs}
    assert ("private-store-endpoint" in needs) == (platform.storage.profile in ("gcp", "azure"))
    raw = raw_platform(stack)
    raw["teams"] = {}
    raw.pop("frontDoor", None)
    raw.pop("models", None)
    raw.pop("pipelines", None)
    if platform.storage.profile in ("gcp", "azure"):
        assert "private-store-endpoint" not in {n.capability for n in validate(raw, stack).prerequisites.needs}


GCS_ZONE = ("a Cloud DNS private zone googleapis.com on the cluster's VPC, *.googleapis.com CNAME "
            "private.googleapis.com (199.36.153.8/30)")


def test_the_private_store_need_names_what_to_create_and_the_site_provides_it() -> None:
    """What the site keeps is named in the need whatever the cluster kind (an existing cluster on GCS too), and only
    `egress.provides` provides it: the site, not the cluster."""
    gcp = platform_of("gcp-prod").prerequisites
    assert {n.capability: n.who for n in gcp.needs}["private-store-endpoint"] == \
        f"team egress (team pods reach the teams' buckets only at egress.objectStore: {GCS_ZONE})"
    assert gcp.provided["private-store-endpoint"] == Provision("site", "declared in egress.provides")
    raw = raw_platform("onprem-lab")
    raw["storage"] = {"profile": "gcp", "region": "us-central1"}
    raw["egress"]["objectStore"] = [{"cidr": "199.36.153.8/30", "ports": [443]}]
    lab = validate(raw, "onprem-lab").prerequisites
    (need,) = [n for n in lab.unmet() if n.capability == "private-store-endpoint"]
    assert lab.finding_line(need) == (f"needed by team egress (team pods reach the teams' buckets only at "
                                      f"egress.objectStore: {GCS_ZONE}); nothing provides it on this existing "
                                      "cluster: create what the need names, at the site, and list "
                                      "`private-store-endpoint` under egress.provides")
    raw["egress"]["provides"] = ["private-store-endpoint"]
    provided = validate(raw, "onprem-lab").prerequisites
    assert "private-store-endpoint" not in {n.capability for n in provided.unmet()}
    assert provided.provided["private-store-endpoint"] == Provision("site", "declared in egress.provides")


def test_egress_provides_only_what_the_site_keeps_for_egress() -> None:
    raw = raw_platform("gcp-prod")
    raw["egress"]["provides"] = ["dns"]
    with pytest.raises(SpecError) as error:
        validate(raw, "gcp-prod")
    assert "egress.provides" in str(error.value) and "private-store-endpoint" in str(error.value)


def test_plan_fails_on_an_unmet_need(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    _drop("network-policy")(raw)
    code = main(["plan", str(write_stack(tmp_path, raw, "onprem-lab"))])
    out = capsys.readouterr().out
    assert code == 1
    assert ("[error] prerequisites: network-policy: needed by tenancy (each team namespace's default-deny "
            "NetworkPolicies); nothing provides it on this existing cluster: install it on the cluster and list "
            "`network-policy` under cluster.existing.provides") in out


@pytest.mark.parametrize(("value", "message"), [
    (["networkpolicy"], "'networkpolicy' is not a capability"),
    (["network-policy", "network-policy"], "a capability is listed twice"),
    (["csi:"], "'csi:' is not a capability"),
])
def test_site_capabilities_outside_the_vocabulary_are_refused(value: list[str], message: str) -> None:
    raw = raw_platform("onprem-lab")
    raw["cluster"]["existing"]["provides"] = value
    with pytest.raises(SpecError) as error:
        validate(raw, "onprem-lab")
    assert "cluster.existing.provides" in str(error.value) and message in str(error.value)


@pytest.mark.parametrize(("endpoint", "message"), [
    ({"cidrs": ["0.0.0.0/0"]}, "whole internet"),
    ({"cidrs": ["10.0.0.0/8"], "private": True}, "drop `cidrs`"),
    ({}, "name the networks"),
    ({"cidrs": ["10.0.0.300/8"]}, "not an IPv4 network"),
])
def test_an_open_or_contradictory_endpoint_is_refused(endpoint: dict[str, Any], message: str) -> None:
    for stack, kind in (("aws-prod", "eks"), ("gcp-prod", "gke"), ("azure-prod", "aks")):
        raw = raw_platform(stack)
        raw["cluster"][kind]["endpoint"] = endpoint
        with pytest.raises(SpecError) as error:
            validate(raw, stack)
        assert f"cluster.{kind}.endpoint" in str(error.value) and message in str(error.value)


def test_the_smallest_public_network_passes() -> None:
    raw = raw_platform("aws-prod")
    raw["cluster"]["eks"]["endpoint"] = {"cidrs": ["0.0.0.0/1"]}
    assert validate(raw, "aws-prod").spec.cluster.eks is not None


def _object(group_version: str, kind: str) -> Registration:
    obj = {"apiVersion": group_version, "kind": kind, "metadata": {"name": "x"}}
    return Registration(f"kubernetes:{group_version}:{kind}", "x", "urn", "", True, False, obj, (), False, False, "")


def test_a_custom_resource_whose_need_no_part_states_is_a_finding() -> None:
    platform = platform_of("aws-prod")
    capture = Capture("aws-prod", "trainyard", (_object("example.io/v1", "Widget"),
                                                 _object("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
                                                 _object("networking.k8s.io/v1", "NetworkPolicy")), {})
    findings = check_needs_cover_objects(Context(platform, capture, None))
    assert [(f.subject, f.message.split(" objects")[0]) for f in findings] == [("crd:example.io", "Widget")]
    stated = dataclasses.replace(platform.prerequisites,
                                 needs=(*platform.prerequisites.needs, Need("crd:example.io", "test")))
    assert check_needs_cover_objects(Context(dataclasses.replace(platform, prerequisites=stated), capture, None)) == []
