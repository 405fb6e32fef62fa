"""Team pods reach their data: a team namespace denies all egress but what the team declares (`objectStorage`),
so a team whose bucket is in the cloud's object store (S3, GCS, Blob) and declares no destination cannot read or
write it from its pods (the publish step, a bucket read by a job). Judged from the spec (the team's bucket and its
declared destinations); a worker's teams are judged by burst-data-location instead."""

from __future__ import annotations

from infra.checks.context import Context
from infra.spec import Finding
from infra.spec.clouds import CLOUD_STORAGE


def check_team_store_egress(ctx: Context) -> list[Finding]:
    platform = ctx.platform
    member = platform.member
    if platform.storage.profile not in CLOUD_STORAGE or (member is not None and member.role == "worker"):
        return []
    teams = platform.spec.teams
    with_bucket = sorted({b.team for b in platform.storage.buckets if b.team in teams})
    return [Finding("storage", f"teams.{team}.objectStorage", f"team {team}'s bucket is in the "
                    f"{platform.storage.profile} object store, but the team declares no egress destination and its "
                    "namespaces deny all other egress, so its pods cannot reach it: add the store's address ranges "
                    f"under teams.{team}.objectStorage (docs/prerequisites.md)", "warning")
            for team in with_bucket if not teams[team].egress_destinations()]
