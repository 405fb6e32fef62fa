"""team-store-egress: a team whose bucket is in the cloud's object store and declares no egress destination warns,
naming teams.<team>.objectStorage; declared, it passes."""

from __future__ import annotations

from typing import Any

from infra.checks.context import Context
from infra.checks.team_egress import check_team_store_egress
from infra.offline.engine import Capture
from infra.spec import Finding, validate
from tests.conftest import raw_platform


def _findings(stack: str, raw: dict[str, Any]) -> list[Finding]:
    return check_team_store_egress(Context(validate(raw, stack), Capture(stack, "trainyard", (), {}), None))


def test_a_team_with_a_cloud_bucket_and_no_egress_warns_naming_its_field() -> None:
    raw = raw_platform("azure-prod")
    found = _findings("azure-prod", raw)
    assert [(f.subject, f.severity) for f in found] == [("teams.nlp.objectStorage", "warning"),
                                                         ("teams.vision.objectStorage", "warning")]
    assert "azure object store" in found[0].message
    raw["teams"]["vision"]["objectStorage"] = [{"cidr": "20.60.0.0/16"}]
    assert [f.subject for f in _findings("azure-prod", raw)] == ["teams.nlp.objectStorage"]


def test_a_stack_without_a_cloud_object_store_gives_none() -> None:
    assert _findings("onprem-lab", raw_platform("onprem-lab")) == []
    assert _findings("local", raw_platform("local")) == []


def test_a_workers_teams_are_left_to_burst_data_location() -> None:
    platform = validate(raw_platform("hybrid-burst"), "hybrid-burst")
    assert platform.hybrid is not None
    worker = platform.hybrid.clusters["burst"]
    assert check_team_store_egress(Context(worker, Capture("hybrid-burst", "trainyard", (), {}), None)) == []
