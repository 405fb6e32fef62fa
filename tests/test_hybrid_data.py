"""Data and images follow the work: a worker's `data` declaration, the objects built from it, the plan's refusals
and verify (stacks/Pulumi.hybrid-burst.yaml, infra/spec/hybrid/burst_data.py, infra/checks/hybrid_data.py).

Spec edges run without the engine; the built objects come from the cached offline run of hybrid-burst."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from infra.checks.catalogue import STACK_CHECKS, run_entries
from infra.checks.context import StackContext
from infra.checks.hybrid_data import egress_findings, location_findings, registry_findings
from infra.commands import main
from infra.live.hybrid import worker_data_findings
from infra.offline.clusters import split
from infra.platform.burst_data import EGRESS_POLICY
from infra.spec import Platform, SpecError, validate
from infra.spec.hybrid.burst_data import CONFIG_MAP, WorkerData
from infra.spec.storage.model import TEAM_DATA_ACCOUNT
from tests.conftest import capture_of, platform_of, raw_platform, write_stack
from tests.test_bad_config import _assert_one_clean_line

STACK = "hybrid-burst"
Objs = list[dict[str, Any]]


def _platform(edit: Any = None) -> Platform:
    raw = raw_platform(STACK)
    if edit is not None:
        edit(raw["clusters"]["burst"]["data"])
    return validate(raw, STACK)


def _errors(platform: Platform) -> list[str]:
    assert platform.hybrid is not None
    worker = platform.hybrid.clusters["burst"]
    assert worker.member is not None and worker.member.data is not None
    return [f.line() for f in location_findings("burst", worker.member.data, platform, worker)
            if f.severity == "error"]


@pytest.fixture(scope="module")
def objs() -> dict[str, Objs]:
    platform, capture = platform_of(STACK), capture_of(STACK)
    return {name: [r.inputs for r in part.resources if r.custom and r.type.startswith("kubernetes:")
                   and "helm.sh" not in r.type and "providers" not in r.type]
            for name, (_, part) in split(platform, capture).items()}


def _worker() -> tuple[Platform, WorkerData]:
    platform = platform_of(STACK)
    assert platform.hybrid is not None
    worker = platform.hybrid.clusters["burst"]
    assert worker.member is not None and worker.member.data is not None
    return worker, worker.member.data


# --- the declaration: bad input is exit 2 with the field path ------------------------------------------------------

@pytest.mark.parametrize(("edit", "path", "words"), [
    (lambda r: r["clusters"]["core"].update(data={"datasets": "manager"}), "clusters.core.data", "workers only"),
    (lambda r: r["clusters"]["burst"]["data"].update(datasets="bucket"), "clusters.burst.data.datasets", "manager"),
    (lambda r: r["clusters"]["burst"]["data"]["manager"].update(endpoint="ftp://s3.lab"),
     "clusters.burst.data.manager.endpoint", "https://host"),
    (lambda r: r["clusters"]["burst"]["data"]["manager"].update(endpoint="https://k@s3.lab"),
     "clusters.burst.data.manager.endpoint", "secretName"),
    (lambda r: r["clusters"]["burst"]["data"]["manager"].update(cidr="10.20.30.1/28"),
     "clusters.burst.data.manager.cidr", "host bits zero"),
    (lambda r: r["clusters"]["burst"]["data"]["manager"].pop("secretName"),
     "clusters.burst.data.manager.secretName", ""),
    (lambda r: r["clusters"]["burst"]["data"]["manager"].update(network="wifi"),
     "clusters.burst.data.manager.network", "vpn"),
    (lambda r: r["clusters"]["burst"]["data"]["registries"][4].update(pullSecretName="Lab_Registry"),
     "clusters.burst.data.registries[4].pullSecretName", "not a Secret name"),
    (lambda r: r["clusters"]["burst"]["data"]["registries"].append({"prefix": "nvcr.io/nvidia"}),
     "clusters.burst.data.registries", "listed twice"),
    (lambda r: r["clusters"]["burst"]["data"].update(bucket="x"), "clusters.burst.data.bucket", ""),
])
def test_bad_data_declarations_exit_2_with_the_field_path(edit: Any, path: str, words: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(STACK)
    edit(raw)
    with pytest.raises(SpecError) as caught:
        validate(copy.deepcopy(raw), STACK)
    assert caught.value.path == f"trainyard:platform.{path}", str(caught.value)
    _assert_one_clean_line(capsys, main(["plan", str(write_stack(tmp_path, raw, STACK))]),
                           (f"trainyard:platform.{path}", words))


# --- the plan's refusals: each at its edge --------------------------------------------------------------------------

def test_the_example_declaration_passes() -> None:
    assert _errors(_platform()) == []


def test_a_team_volume_for_burst_data_is_refused() -> None:
    found = _errors(_platform(lambda d: d.update(checkpoints="volume")))
    assert len(found) == 1 and "burst: clusters.burst.data.checkpoints" in found[0]
    assert "MultiKueue does not copy" in found[0] and "vision, nlp" in found[0]
    assert _errors(_platform(lambda d: d.update(checkpoints="manager"))) == []  # a bucket passes


def test_reading_the_managers_store_needs_its_declared_path_and_credentials() -> None:
    found = _errors(_platform(lambda d: d.pop("manager")))
    assert len(found) == 1 and "clusters.burst.data.datasets" in found[0] and "no path or credentials" in found[0]
    # Nothing reads the manager's store: nothing needs its path.
    assert _errors(_platform(lambda d: (d.pop("manager"), d.update(datasets="worker")))) == []


def test_a_public_path_to_the_managers_store_needs_tls() -> None:
    def public(scheme: str) -> Any:
        return lambda d: d["manager"].update(network="public", endpoint=f"{scheme}://s3.lab.example.com")
    found = _errors(_platform(public("http")))
    assert len(found) == 1 and "clusters.burst.data.manager.endpoint" in found[0] and "without TLS" in found[0]
    assert _errors(_platform(public("https"))) == []
    # Over the link, plain http stays inside the private path.
    assert _errors(_platform(lambda d: d["manager"].update(endpoint="http://s3.lab.example.com"))) == []


def test_a_side_without_team_buckets_is_no_data_location() -> None:
    raw = raw_platform(STACK)
    raw["storage"] = {"profile": "nfs", "nfs": {"server": "nfs.lab", "share": "/export"},
                      "region": "us-east-1"}
    raw["backup"] = {"location": {"bucket": "lab-backups", "s3Url": "https://s3.lab.example.com"}}
    found = _errors(validate(raw, STACK))
    assert any("team vision has no bucket on the manager" in line for line in found), found
    assert any("team nlp has no bucket on the worker" in line for line in found), found


def test_a_private_path_other_than_the_link_is_provided_by_nothing() -> None:
    def unmet(edit: Any) -> list[str]:
        platform = _platform(edit)
        assert platform.hybrid is not None
        return [need.capability for need in platform.hybrid.clusters["burst"].prerequisites.unmet()]
    assert unmet(None) == []
    assert unmet(lambda d: d["manager"].update(network="interconnect")) == ["link:interconnect"]
    assert unmet(lambda d: d["registries"][4].update(network="interconnect")) == ["link:interconnect"]
    platform = _platform(lambda d: d["manager"].update(network="interconnect"))
    assert platform.hybrid is not None
    prerequisites = platform.hybrid.clusters["burst"].prerequisites
    need = next(n for n in prerequisites.needs if n.capability == "link:interconnect")
    assert "clusters.burst.data.manager" in need.who and "`link`" in prerequisites.finding_line(need)


def test_the_workers_bucket_needs_the_teams_egress_to_object_storage() -> None:
    def warned(raw: dict[str, Any]) -> list[str]:
        platform = validate(raw, STACK)
        assert platform.hybrid is not None
        worker = platform.hybrid.clusters["burst"]
        assert worker.member is not None and worker.member.data is not None
        return [f.subject for f in location_findings("burst", worker.member.data, platform, worker)
                if f.severity == "warning"]
    raw = raw_platform(STACK)
    assert warned(raw) == []  # the shipped stack opens S3's ranges to both teams
    for team in ("vision", "nlp"):
        del raw["teams"][team]["objectStorage"]
    assert warned(raw) == ["burst: teams.vision.objectStorage", "burst: teams.nlp.objectStorage"]
    raw["teams"]["nlp"]["objectStorage"] = [{"cidr": "52.216.0.0/15"}]
    assert warned(raw) == ["burst: teams.vision.objectStorage"]
    raw["clusters"]["burst"]["data"]["checkpoints"] = "manager"  # nothing goes to the worker's bucket
    assert warned(raw) == []


def test_an_undeclared_data_section_is_one_error() -> None:
    raw = raw_platform(STACK)
    raw["clusters"]["burst"].pop("data")
    stack = StackContext(validate(raw, STACK), capture_of(STACK))
    found = [f for f in run_entries(STACK_CHECKS, stack) if f.check == "burst-data"]
    assert [(f.severity, f.subject) for f in found] == [("error", "burst: clusters.burst.data")]


# --- what the worker gets, and the checks on it -------------------------------------------------------------------

def test_each_bursting_namespace_on_the_worker_is_told_where_its_data_is(objs: dict[str, Objs]) -> None:
    core, burst = platform_of(STACK), _worker()[0]
    maps = {o["metadata"]["namespace"]: o["data"] for o in objs["burst"]
            if o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIG_MAP}
    assert sorted(maps) == ["nlp", "vision"]
    assert not [o for o in objs["core"] if o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIG_MAP]
    on_prem = next(b.name for b in core.storage.buckets if b.team == "vision")
    in_cloud = next(b.name for b in burst.storage.buckets if b.team == "vision")
    assert on_prem != in_cloud
    assert maps["vision"] == {"DATASETS_URI": f"s3://{on_prem}", "DATASETS_ENDPOINT": "https://s3.lab.example.com",
                              "DATASETS_SECRET": "lab-object-store", "CHECKPOINTS_URI": f"s3://{in_cloud}/checkpoints"}


def test_pods_on_the_worker_may_reach_the_managers_store(objs: dict[str, Objs]) -> None:
    worker, data = _worker()
    assert data.manager is not None
    assert egress_findings("burst", data.manager, worker, objs["burst"]) == []
    without = [o for o in objs["burst"] if not (o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == EGRESS_POLICY
                                                and o["metadata"]["namespace"] == "vision")]
    assert [f.subject for f in egress_findings("burst", data.manager, worker, without)] == ["burst: Namespace vision"]
    # A rule to part of the store's range, or to another port, does not open it.
    for change in ({"cidr": "10.20.30.0/29"}, {"port": 80}):
        narrowed = copy.deepcopy(objs["burst"])
        for o in narrowed:
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == EGRESS_POLICY:
                rule = o["spec"]["egress"][0]
                rule["to"][0]["ipBlock"].update({k: v for k, v in change.items() if k == "cidr"})
                rule["ports"][0].update({k: v for k, v in change.items() if k == "port"})
        assert len(egress_findings("burst", data.manager, worker, narrowed)) == 2, change


def _without_registry(data: WorkerData, prefix: str, *added: dict[str, Any]) -> WorkerData:
    kept = [r.model_dump(by_alias=True) for r in data.registries if r.prefix != prefix]
    return WorkerData.model_validate({**data.model_dump(by_alias=True), "registries": [*kept, *added]})


def test_every_image_the_worker_may_run_comes_from_a_registry_it_pulls(objs: dict[str, Objs]) -> None:
    worker, data = _worker()
    assert registry_findings("burst", data, worker, objs["burst"]) == []
    found = registry_findings("burst", _without_registry(data, "docker.io/pytorch"), worker, objs["burst"])
    assert [f.subject for f in found] == ["burst: image docker.io/pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime"]
    assert "torch-distributed" in found[0].message and "clusters.burst.data.registries" in found[0].message
    # A narrower registry than the admitted prefix leaves the rest of that prefix unpullable.
    narrower = _without_registry(data, "nvcr.io/nvidia", {"prefix": "nvcr.io/nvidia/jax"})
    assert [f.subject for f in registry_findings("burst", narrower, worker, objs["burst"])] == \
        ["burst: policy.allowedRegistries nvcr.io/nvidia"]
    wider = _without_registry(data, "nvcr.io/nvidia", {"prefix": "nvcr.io"})
    assert registry_findings("burst", wider, worker, objs["burst"]) == []


def test_a_private_registrys_pull_secret_is_on_every_team_data_account(objs: dict[str, Objs]) -> None:
    worker, data = _worker()
    accounts = {o["metadata"]["namespace"]: o for o in objs["burst"]
                if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == TEAM_DATA_ACCOUNT}
    assert {ns: a.get("imagePullSecrets") for ns, a in accounts.items()} == \
        {"vision": [{"name": "lab-registry"}], "nlp": [{"name": "lab-registry"}]}
    core_accounts = [o for o in objs["core"] if o["kind"] == "ServiceAccount"
                     and o["metadata"]["name"] == TEAM_DATA_ACCOUNT]
    assert core_accounts and not any("imagePullSecrets" in o for o in core_accounts)
    stripped = [{k: v for k, v in o.items() if k != "imagePullSecrets"} if o is accounts["nlp"] else o
                for o in objs["burst"]]
    found = registry_findings("burst", data, worker, stripped)
    assert [f.subject for f in found] == [f"burst: ServiceAccount nlp/{TEAM_DATA_ACCOUNT}"]


def test_the_plan_reports_no_burst_data_error_for_the_example() -> None:
    stack = StackContext(platform_of(STACK), capture_of(STACK))
    found = [f for f in run_entries(STACK_CHECKS, stack) if f.check == "burst-data"]
    assert [f.line() for f in found if f.severity == "error"] == []


# --- verify --------------------------------------------------------------------------------------------------------

class _Worker:
    """The worker as verify reads it: Secrets per namespace and the team data accounts."""

    def __init__(self, secrets: dict[str, set[str]], pulls: dict[str, list[str]]) -> None:
        self._secrets, self._pulls = secrets, pulls

    def secret_exists(self, namespace: str, name: str) -> bool:
        return name in self._secrets.get(namespace, set())

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        if name != TEAM_DATA_ACCOUNT or namespace not in self._pulls:
            return None
        return {"metadata": {"name": name}, "imagePullSecrets": [{"name": n} for n in self._pulls[namespace]]}


def test_verify_finds_the_secrets_the_site_must_create_on_the_worker() -> None:
    worker = _worker()[0]
    both = {"lab-object-store", "lab-registry"}
    ready = _Worker({"vision": both, "nlp": both}, {"vision": ["lab-registry"], "nlp": ["lab-registry"]})
    assert worker_data_findings(worker, ready) == []
    missing = _Worker({"vision": both, "nlp": {"lab-registry"}}, {"vision": ["lab-registry"], "nlp": []})
    found = worker_data_findings(worker, missing)
    assert [f.subject for f in found] == ["Secret nlp/lab-object-store", f"ServiceAccount nlp/{TEAM_DATA_ACCOUNT}"]
    assert "MultiKueue copies no Secret" in found[0].message and "lab-registry" in found[1].message
    # The manager is not asked for them.
    assert worker_data_findings(platform_of(STACK), _Worker({}, {})) == []
