"""A team's GPU reach through Kueue is bounded: the platform's default borrowing limit applies to every queue entry
that declares none, the namespace ceiling is nominal plus that limit, and no team of a shared pool reaches all of
it (refused at load: exit 2, one line). Expected numbers are worked out here from the stack file, by hand."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from infra.commands import main
from infra.spec import SpecError, validate
from infra.spec.pools import GPU_RESOURCE
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, run_raw, write_stack

LAB = "onprem-lab"  # h100: 4 x 8 = 32 GPUs, l40s: 6 x 4 = 24; every GPU is some team's (no shared pool)


def _queue_gpus(capture: Any, team: str) -> dict[str, tuple[int, int | None]]:
    """Per GPU pool: the rendered ClusterQueue's (nominalQuota, borrowingLimit) of nvidia.com/gpu (the queue covers
    it on the CPU pool too, at 0)."""
    queue = next(q for q in kube_objects(capture, "ClusterQueue") if q["metadata"]["name"] == team)
    gpu_pools = {name for name, pool in raw_platform(LAB)["pools"].items() if "gpu" in pool}
    found = {}
    for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
        if flavor["name"] not in gpu_pools:
            continue
        for resource in flavor["resources"]:
            if resource["name"] == GPU_RESOURCE:
                limit = resource.get("borrowingLimit")
                found[flavor["name"]] = (int(resource["nominalQuota"]), None if limit is None else int(limit))
    return found


def _ceiling(capture: Any, namespace: str) -> int:
    quota = next(q for q in kube_objects(capture, "ResourceQuota")
                 if q["metadata"]["namespace"] == namespace and q["metadata"]["name"] == "team-quota")
    return int(quota["spec"]["hard"][f"requests.{GPU_RESOURCE}"])


def _refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as error:
        validate(raw, LAB)
    return str(error.value)


def test_a_team_without_a_borrowing_limit_gets_half_of_what_the_others_can_lend() -> None:
    """vision declares no limit: on h100 the others guarantee 12 + 4 = 16 (all lendable), half is 8; on l40s 8 + 8,
    half 8. speech: h100 16 + 12 = 28, half 14. nlp keeps its own borrowingLimit 8."""
    capture = capture_of(LAB)
    assert _queue_gpus(capture, "vision") == {"h100": (16, 8), "l40s": (8, 8)}
    assert _queue_gpus(capture, "speech") == {"h100": (4, 14), "l40s": (8, 8)}
    assert _queue_gpus(capture, "nlp") == {"h100": (12, 8), "l40s": (8, 8)}


def test_an_absolute_default_applies_only_where_no_limit_is_declared() -> None:
    raw = raw_platform(LAB)
    raw["queueing"]["defaultBorrowingLimit"] = 5
    raw["teams"]["speech"]["quota"]["l40s"] = {"gpus": 8, "borrowingLimit": 2}
    capture = run_raw(LAB, raw)
    assert _queue_gpus(capture, "vision") == {"h100": (16, 5), "l40s": (8, 5)}
    assert _queue_gpus(capture, "speech") == {"h100": (4, 5), "l40s": (8, 2)}
    assert _queue_gpus(capture, "nlp") == {"h100": (12, 8), "l40s": (8, 8)}


def test_the_ceiling_resourcequota_is_nominal_plus_borrowing_limit_in_every_team_namespace() -> None:
    """The ResourceQuota matches the ClusterQueue as rendered; speech's two namespaces get the team's ceiling."""
    capture = capture_of(LAB)
    for team, namespaces in (("vision", ["vision"]), ("nlp", ["nlp"]), ("speech", ["speech", "speech-eval"])):
        expected = sum(nominal + (limit or 0) for nominal, limit in _queue_gpus(capture, team).values())
        for namespace in namespaces:
            assert _ceiling(capture, namespace) == expected, namespace
    assert (_ceiling(capture, "vision"), _ceiling(capture, "nlp"), _ceiling(capture, "speech")) == (40, 36, 34)


def test_a_pool_borrowed_through_borrow_any_pool_counts_in_the_ceiling() -> None:
    """speech has no l40s quota; with borrowAnyPool its queue still lists l40s (nominal 0) and may borrow half of
    vision's 8 + nlp's 8 + the 8 nobody is guaranteed = 12: the namespace must admit those pods too."""
    raw = raw_platform(LAB)
    del raw["teams"]["speech"]["quota"]["l40s"]
    raw["queueing"]["borrowAnyPool"] = True
    capture = run_raw(LAB, raw)
    assert _queue_gpus(capture, "speech")["l40s"] == (0, 12)
    assert _ceiling(capture, "speech") == sum(n + (b or 0) for n, b in _queue_gpus(capture, "speech").values())


@pytest.mark.parametrize("stack", STACKS)
def test_no_team_namespace_can_request_a_whole_shared_pool(stack: str) -> None:
    """Per pool several teams queue for: a team's reach stays below the pool (the onprem-lab vision ceiling was
    56, every GPU of the lab). A pool one queue lists alone is that team's."""
    platform = platform_of(stack)
    for flavor in platform.flavors:
        queues = [q for q in platform.queueing.queues if any(e.flavor == flavor.name for e in q.flavors)]
        for resource in flavor.gpu_resources:
            whole = flavor.max_capacity.get(resource, flavor.capacity[resource])
            for queue in queues:
                entry = next(e for e in queue.flavors if e.flavor == flavor.name)
                assert entry.borrowing[resource] is not None, (stack, queue.team, flavor.name)
                if len(queues) > 1:
                    assert entry.reach[resource] < whole, (stack, queue.team, flavor.name)


def test_a_declared_limit_at_the_bound_passes_and_one_past_is_refused() -> None:
    """nlp on h100: 12 guaranteed of 32, so borrowing 19 reaches 31 and 20 would reach all 32."""
    raw = raw_platform(LAB)
    raw["teams"]["nlp"]["quota"]["h100"] = {"gpus": 12, "borrowingLimit": 19}
    capture = run_raw(LAB, raw)
    assert _queue_gpus(capture, "nlp")["h100"] == (12, 19)
    assert _ceiling(capture, "nlp") == 12 + 19 + 8 + 8
    raw["teams"]["nlp"]["quota"]["h100"]["borrowingLimit"] = 20
    message = _refusal(raw)
    assert message.startswith("trainyard:platform.teams.nlp.quota.h100.borrowingLimit: 20 ")
    assert "all 32 nvidia.com/gpu of pool h100" in message and "at most 19" in message


def test_a_team_wide_limit_is_refused_at_its_own_path() -> None:
    raw = raw_platform(LAB)
    raw["teams"]["nlp"]["borrowingLimit"] = 20  # too much on both pools: the first one its queue tries is named
    message = _refusal(raw)
    assert message.startswith("trainyard:platform.teams.nlp.borrowingLimit: 20 ")
    assert "at most 19" in message and "quota.h100" in message


@pytest.mark.parametrize(("setting", "refused"), [("99%", False), ("100%", True), (15, False), (16, True)])
def test_the_default_at_its_bound_passes_and_one_past_is_refused(setting: object, refused: bool) -> None:
    """vision, 16 of 32 h100 guaranteed: 99% of the 16 lendable is 15 (reach 31), 100% is all 16; as GPUs, 15
    reaches 31 and 16 all 32 (speech and the l40s entries stay below their bounds at 15)."""
    raw = raw_platform(LAB)
    raw["queueing"]["defaultBorrowingLimit"] = setting
    if not refused:
        assert _queue_gpus(run_raw(LAB, raw), "vision")["h100"] == (16, 15)
        return
    message = _refusal(raw)
    assert message.startswith(f"trainyard:platform.queueing.defaultBorrowingLimit: {setting} lets team vision ")
    assert "at most 15" in message


def test_a_pool_only_one_team_queues_for_may_be_reached_whole() -> None:
    """Only vision lists l40s: its 8 + the 16 nobody is guaranteed is the pool, and nobody else can use it. Once
    nlp lists it too (quota 0, to borrow), vision's reach of all 24 is refused."""
    raw = raw_platform(LAB)
    for team in ("nlp", "speech"):
        del raw["teams"][team]["quota"]["l40s"]
    raw["teams"]["vision"]["quota"]["l40s"] = {"gpus": 8, "borrowingLimit": 16}
    assert _queue_gpus(run_raw(LAB, raw), "vision")["l40s"] == (8, 16)
    raw["teams"]["nlp"]["quota"]["l40s"] = 0
    message = _refusal(raw)
    assert message.startswith("trainyard:platform.teams.vision.quota.l40s.borrowingLimit: 16 ")
    assert "all 24" in message and "nlp" in message


def test_a_whole_pool_guarantee_in_a_shared_pool_is_refused_at_the_quota() -> None:
    raw = raw_platform(LAB)
    raw["teams"]["vision"]["quota"]["h100"] = 32
    raw["teams"]["nlp"]["quota"]["h100"] = 0
    raw["teams"]["speech"]["quota"]["h100"] = 0
    assert _refusal(raw).startswith("trainyard:platform.teams.vision.quota.h100: 32 lets team vision reach all 32")


def test_a_single_team_cohort_may_reach_everything() -> None:
    raw = raw_platform("local")
    raw.setdefault("queueing", {})["defaultBorrowingLimit"] = "100%"
    platform = validate(raw, "local")
    assert platform.queueing.reach("demo")[GPU_RESOURCE] == Decimal(2)


@pytest.mark.parametrize("value", ["101%", "half", "50", "%", -1, 2.5, True])
def test_a_bad_default_is_refused_with_its_path(value: object, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(LAB)
    raw["queueing"]["defaultBorrowingLimit"] = value
    code = main(["plan", str(write_stack(tmp_path, raw))])
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert "queueing.defaultBorrowingLimit" in err


def test_a_reach_refusal_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform(LAB)
    raw["teams"]["nlp"]["quota"]["h100"] = {"gpus": 12, "borrowingLimit": 20}
    code = main(["plan", str(write_stack(tmp_path, raw))])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in out + err
    assert "teams.nlp.quota.h100.borrowingLimit" in lines[0] and "20" in lines[0] and "at most 19" in lines[0]
