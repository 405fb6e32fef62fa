"""Backup: Velero tiers (schedule + TTL), where backups go, and the restore drill.

Defaults cover every team namespace in three tiers, so a stack without a `backup:` section is protected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator, model_validator

from infra.components import PIPELINES
from infra.spec.base import DnsLabel, Strict
from infra.spec.clouds import CLOUD_STORAGE
from infra.spec.cron import Cron
from infra.spec.storage.model import StorageFacts, storage_of

DURATION = r"^[0-9]+h$"
DRILL_PREFIX = "drill-"


def hours(duration: str) -> int:
    """'48h' -> 48 (durations here are whole hours, DURATION)."""
    return int(duration.removesuffix("h"))


class Tier(Strict):
    """One Velero Schedule: a cron, the backups' TTL, whether volume data is copied, and which teams
    it covers (None: every team)."""

    schedule: Cron
    ttl: str = Field(pattern=DURATION)
    volumes: bool = True
    teams: list[DnsLabel] | None = None

    @field_validator("teams")
    @classmethod
    def _distinct(cls, teams: list[str] | None) -> list[str] | None:
        if teams is not None and len(set(teams)) != len(teams):
            raise ValueError("a team is listed twice")
        return teams

    @model_validator(mode="after")
    def _outlives_interval(self) -> Tier:
        interval = cron_interval_hours(self.schedule)
        if hours(self.ttl) < interval:
            raise ValueError(f"ttl: {self.ttl} is shorter than the {interval}h between two backups of this tier, so "
                             f"at times no backup exists: give at least {interval}h (e.g. {2 * interval}h)")
        return self


def _default_tiers() -> dict[str, Tier]:
    # Hourly copies objects only (cheap, short-lived); daily and weekly also move volume data.
    return {
        "hourly": Tier(schedule="0 * * * *", ttl="48h", volumes=False),
        "daily": Tier(schedule="0 2 * * *", ttl="720h"),
        "weekly": Tier(schedule="0 3 * * 0", ttl="2160h"),
    }


class Location(Strict):
    """Where backups go. Without `bucket`, the stack's own backup bucket (storage) is used. `s3Url`
    points the AWS plugin at an S3-compatible store (Ceph RGW, SeaweedFS, ...). `identity` are the
    Velero service account's workload-identity annotations; without them credentials come from the
    secret config key trainyard:backupCredentials."""

    bucket: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    prefix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9/_-]*$")
    s3_url: str | None = Field(default=None, alias="s3Url", pattern=r"^https?://\S+$")
    region: str | None = None
    identity: dict[str, str] | None = None


class Drill(Strict):
    """A scheduled restore of the latest backup of one tier into drill-<namespace>, checked and removed.
    The drill also fails when that backup is older than `maxBackupAge` (default: the tier's interval plus a
    quarter of it, at least 1h), which is how a Schedule that stopped producing backups shows."""

    schedule: Cron = "30 5 * * 1"
    tier: DnsLabel = "daily"
    timeout_minutes: int = Field(default=90, gt=0, le=24 * 60, alias="timeoutMinutes")
    max_backup_age: str | None = Field(default=None, alias="maxBackupAge", pattern=DURATION)

    @property
    def job_deadline_seconds(self) -> int:
        """A drill Job's activeDeadlineSeconds: the wait for Velero to start its restore and the restore each have
        the timeout (Velero runs one restore at a time), and 15 minutes for the checks and the cleanup."""
        return (2 * self.timeout_minutes + 15) * 60

    @field_validator("max_backup_age")
    @classmethod
    def _not_zero(cls, value: str | None) -> str | None:
        if value is not None and hours(value) == 0:
            raise ValueError(f"'{value}' accepts no backup at all, so every drill fails: give the age the newest "
                             "backup may have, at least the tier's interval between backups")
        return value


class BackupSpec(Strict):
    tiers: dict[DnsLabel, Tier] = Field(default_factory=_default_tiers)
    location: Location = Field(default_factory=Location)
    drill: Drill = Field(default_factory=Drill)

    @field_validator("tiers")
    @classmethod
    def _some(cls, tiers: dict[str, Tier]) -> dict[str, Tier]:
        if not tiers:
            raise ValueError("declare at least one tier, e.g. daily: {schedule: '0 2 * * *', ttl: 720h}")
        return tiers

    @model_validator(mode="after")
    def _drill_can_find_a_backup(self) -> BackupSpec:
        tier = self.tiers.get(self.drill.tier)
        if tier is None:
            return self  # derive_backup names the missing tier
        age = max_backup_age_hours(self.drill, tier.schedule)
        if hours(tier.ttl) < age:
            where = "drill.maxBackupAge" if self.drill.max_backup_age else f"tiers.{self.drill.tier}.ttl"
            raise ValueError(f"{where}: tier '{self.drill.tier}' keeps its backups {tier.ttl}, less than the {age}h "
                             "the drill accepts, so the drill can find its backup already expired: raise the tier's "
                             "ttl or lower drill.maxBackupAge")
        return self


@dataclass(frozen=True)
class Schedule:
    tier: str
    cron: str
    ttl: str
    volumes: bool
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class BackupFacts:
    provider: str  # the Velero object-store plugin: aws | gcp | azure
    bucket: str
    prefix: str
    config: Mapping[str, str]  # BackupStorageLocation.spec.config
    identity: Mapping[str, str] | None
    schedules: tuple[Schedule, ...]
    drill_schedule: Schedule
    drill_namespaces: Mapping[str, str]  # team namespace -> its drill namespace
    drill_max_age_hours: int  # the oldest backup a drill accepts


def cron_interval_hours(cron: str) -> int:
    """The longest gap, in whole hours, between two runs of a five-field cron schedule (an upper bound for
    lists and ranges): weekly when days of the week are named, monthly for days of the month, yearly for
    months, else hourly (or every N hours) when the hour field repeats, else daily."""
    _, hour, day, month, weekday = cron.split()
    if month != "*":
        return 366 * 24
    if day != "*":
        return 31 * 24
    if weekday != "*":
        return 7 * 24
    if hour == "*":
        return 1
    if hour.startswith("*/") and hour[2:].isdigit():
        return int(hour[2:])
    return 24


def max_backup_age_hours(drill: Drill, tier_cron: str) -> int:
    if drill.max_backup_age is not None:
        return hours(drill.max_backup_age)
    interval = cron_interval_hours(tier_cron)
    return interval + max(1, interval // 4)


# On-prem profiles' object stores speak S3: Velero's aws provider.
PROVIDER_FOR_PROFILE = {"rook-ceph": "aws", "nfs": "aws",
                        **{profile: cloud.velero_provider for profile, cloud in CLOUD_STORAGE.items()}}


def derive_backup(spec: BackupSpec, storage: StorageFacts, cluster_name: str,
                  teams: Mapping[str, tuple[str, ...]], platform_state: tuple[str, ...] = ()) -> BackupFacts:
    """The location, one Schedule per tier with the namespaces it covers, and the drill's mapping.
    `platform_state`: namespaces of platform components whose state every tier also covers (Pipelines' run
    journal); the drill restores team namespaces only."""
    where = "backup.location"
    profile, region = storage.profile, storage.region
    own = next((b.name for b in storage.buckets if b.team is None), None)
    bucket = spec.location.bucket or own
    if bucket is None:
        raise ValueError(f"{where}.bucket: storage profile '{profile}' has no object store: name an external "
                         "bucket (and its s3Url)")
    provider = PROVIDER_FOR_PROFILE[profile]
    config: dict[str, Any] = {}
    if provider == "aws":
        s3_url = spec.location.s3_url or storage.rgw_url
        if profile == "nfs" and s3_url is None:
            raise ValueError(f"{where}.s3Url: an external bucket needs the S3 endpoint URL")
        config["region"] = spec.location.region or region or "us-east-1"
        if s3_url:
            # S3-compatible stores (Ceph RGW, SeaweedFS) reject the checksum the AWS plugin v1.14 sends by
            # default; its README: set checksumAlgorithm to "" for them.
            config.update({"s3Url": s3_url, "s3ForcePathStyle": "true", "checksumAlgorithm": ""})
    elif provider == "azure":
        config = {"resourceGroup": storage.azure_resource_group or "",
                  "storageAccount": storage.azure_account or "", "useAAD": "true"}
    for name, tier in spec.tiers.items():
        unknown = sorted(set(tier.teams or []) - set(teams))
        if unknown:
            raise ValueError(f"backup.tiers.{name}.teams: no team named '{unknown[0]}'")
    if spec.drill.tier not in spec.tiers:
        raise ValueError(f"backup.drill.tier: no tier named '{spec.drill.tier}': use one of "
                         f"{', '.join(sorted(spec.tiers))}")
    schedules = tuple(
        Schedule(name, tier.schedule, tier.ttl, tier.volumes,
                 tuple(ns for team in (teams if tier.teams is None else tier.teams) for ns in teams[team])
                 + platform_state)
        for name, tier in spec.tiers.items()
    )
    drill = next(s for s in schedules if s.tier == spec.drill.tier)
    if platform_state and not drill.volumes:
        raise ValueError(f"backup.drill.tier: tier '{drill.tier}' copies no volumes, so the journal drill has no "
                         "Pipelines database to restore: drill a tier with volumes (e.g. daily)")
    mapping = {}
    for ns in drill.namespaces[:len(drill.namespaces) - len(platform_state)]:
        target = f"{DRILL_PREFIX}{ns}"
        if len(target) > 63:
            raise ValueError(f"backup.drill: namespace '{ns}' is too long for its drill namespace '{target}' "
                             "(63 characters at most): shorten it")
        mapping[ns] = target
    return BackupFacts(
        provider=provider,
        bucket=bucket,
        prefix=spec.location.prefix or cluster_name,
        config=config,
        identity=spec.location.identity,
        schedules=tuple(s for s in schedules if s.namespaces),  # an empty list would mean "all namespaces"
        drill_schedule=drill,
        drill_namespaces=mapping,
        drill_max_age_hours=max_backup_age_hours(spec.drill, drill.cron),
    )


def backup_of(spec: Any, cluster_name: str) -> tuple[StorageFacts, BackupFacts]:
    """Storage and backup facts of a PlatformSpec (typed Any: platform.py imports this module)."""
    storage = storage_of(spec, cluster_name)
    teams = {name: tuple(spec.namespaces(name)) for name in spec.teams}
    state = (PIPELINES.namespace,) if spec.pipelines is not None else ()
    return storage, derive_backup(spec.backup, storage, cluster_name, teams, state)
