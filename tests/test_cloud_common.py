"""What every cloud stack shares: clusters and node pools are protected, the Kubernetes provider comes from
the new cluster's kubeconfig (a secret), every in-cluster object uses it, and capacity is the catalog's.
Also the helpers the other cloud and GPU tests use."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from infra.commands import main
from infra.offline.engine import Capture, Registration
from infra.spec import Platform, validate
from infra.spec.clouds import MACHINES
from tests.conftest import capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run

CLOUD_STACKS = ("aws-prod", "gcp-prod", "azure-prod")
CLUSTER_TYPES = {"aws-prod": "eks:index:Cluster", "gcp-prod": "gcp:container/cluster:Cluster",
                 "azure-prod": "azure-native:containerservice:ManagedCluster"}
POOL_TYPES = {"aws-prod": "eks:index:ManagedNodeGroup", "gcp-prod": "gcp:container/nodePool:NodePool",
              "azure-prod": "azure-native:containerservice:AgentPool"}
Edit = Callable[[dict[str, Any]], None]


def of_type(capture: Capture, type_: str) -> dict[str, Registration]:
    return {r.name: r for r in capture.resources if r.type == type_}


def variant(stack: str, edit: Edit) -> tuple[Platform, Capture]:
    """A stack's platform mapping, edited, validated and run offline."""
    raw = raw_platform(stack)
    edit(raw)
    return validate(raw, stack), run_raw(stack, raw)


def refused(stack: str, edit: Edit, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`trainyard plan` of the edited stack: exit 2 with exactly one line and no traceback; the line."""
    raw = raw_platform(stack)
    edit(raw)
    code = main(["plan", str(write_stack(tmp_path, raw, stack))])
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}: {err}{out}"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out, err
    return err.strip()


def configmap(capture: Capture, name: str) -> dict[str, Any]:
    return next(c for c in kube_objects(capture, "ConfigMap") if c["metadata"]["name"] == name)


def pool_args(capture: Capture, stack: str, pool: str) -> dict[str, Any]:
    return of_type(capture, POOL_TYPES[stack])[f"pool-{pool}"].inputs


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_cluster_and_every_pool_are_protected(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    clusters = list(of_type(capture, CLUSTER_TYPES[stack]).values())
    assert len(clusters) == 1 and clusters[0].protect
    pools = of_type(capture, POOL_TYPES[stack])
    assert {f"pool-{name}" for name in platform.spec.pools} <= set(pools)
    assert all(record.protect for record in pools.values())


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_the_provider_comes_from_the_new_cluster_and_serves_every_object(stack: str) -> None:
    capture = capture_of(stack)
    providers = of_type(capture, "pulumi:providers:kubernetes")
    assert len(providers) == 1
    provider = next(iter(providers.values()))
    assert provider.parent.startswith("trainyard:cluster:"), "the cloud cluster component owns its provider"
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["clusterIdentifier"] == platform_of(stack).cluster_name
    objects = [r for r in capture.resources if r.custom and r.type.startswith("kubernetes:")
               and not r.type.startswith("pulumi:providers")]
    assert objects and all(r.provider == f"pulumi:providers:kubernetes::{provider.name}" for r in objects)


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_flavor_capacity_is_the_catalog_times_the_nodes(stack: str) -> None:
    platform = platform_of(stack)
    for flavor in platform.flavors:
        pool = platform.pool(flavor.pool)
        assert pool.instance_type is not None
        machine = MACHINES[pool.instance_type]
        nodes, most = pool.node_count, pool.max_node_count
        assert flavor.capacity["cpu"] == machine.vcpu * nodes
        assert flavor.capacity["memory"] == Decimal(machine.memory_gib * 2**30 * nodes)
        assert flavor.max_capacity["cpu"] == machine.vcpu * most
        if machine.gpu is not None:
            assert flavor.gpu is not None and flavor.gpu.model == machine.gpu
            per_node = machine.gpus * flavor.gpu.units_per_gpu
            assert flavor.capacity[flavor.gpu.resource] == per_node * nodes
            assert flavor.max_capacity[flavor.gpu.resource] == per_node * most
        assert pool.instance_type in flavor.origin


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_cloud_stacks_plan_and_validate_cleanly(stack: str, crds_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", stack, "--crds", str(crds_dir)]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_an_unknown_instance_type_is_one_clear_line(stack: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pool = next(iter(raw_platform(stack)["pools"]))
    line = refused(stack, lambda raw: raw["pools"][pool].update(instanceType="x9.mega"), tmp_path, capsys)
    assert f"pools.{pool}.instanceType" in line and "x9.mega" in line and "not in the catalog" in line


def test_an_instance_type_of_another_cloud_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused("aws-prod", lambda raw: raw["pools"]["cpu"].update(instanceType="n2-standard-16"), tmp_path, capsys)
    assert "pools.cpu.instanceType" in line and "gcp" in line and "eks" in line


def test_figures_typed_next_to_an_instance_type_are_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    line = refused("gcp-prod", lambda raw: raw["pools"]["h100"].update(perNode=4), tmp_path, capsys)
    assert "pools.h100" in line and "perNode" in line and "a3-highgpu-8g" in line


def test_node_names_on_a_cloud_pool_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(raw: dict[str, Any]) -> None:
        del raw["pools"]["cpu"]["count"]
        raw["pools"]["cpu"]["nodes"] = ["cpu-01"]
    line = refused("azure-prod", edit, tmp_path, capsys)
    assert "pools.cpu.nodes" in line and "count" in line
