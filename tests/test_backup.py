"""Backup: Velero pinned, every team namespace in a tier, restores drilled (and the drill really fails on
PartiallyFailed), finished TrainJobs cleaned up, and validate reporting a namespace that no schedule covers."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra.apiserver.schema import CrdIndex, check_custom
from infra.checks.backup import check_backups_off_cluster, check_schedule_coverage
from infra.checks.context import Context
from infra.commands import main
from infra.components import PIPELINES
from infra.offline.engine import run
from infra.spec import validate
from infra.spec.input.load import PLATFORM_KEY
from infra.spec.versions import VELERO_CHART
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform, write_stack

pytestmark = pytest.mark.usefixtures("repo_runs")  # a command run on an unchanged repository stack: the session's run


def _named(capture: Any, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in kube_objects(capture, kind) if o["metadata"]["name"] == name)


def _env(cron_job: dict[str, Any]) -> dict[str, str]:
    container = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item["value"] for item in container["env"]}


def _script(cron_job: dict[str, Any]) -> str:
    return str(cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][-1])


@pytest.mark.parametrize("stack", STACKS)
def test_every_team_namespace_is_in_a_schedule_with_the_tier_ttl(stack: str) -> None:
    platform, capture = platform_of(stack), capture_of(stack)
    schedules = {s["metadata"]["name"]: s for s in kube_objects(capture, "Schedule")}
    for tier_name, tier in platform.spec.backup.tiers.items():
        teams = tier.teams if tier.teams is not None else list(platform.spec.teams)
        expected = {ns for team in teams for ns in platform.spec.namespaces(team)}
        if platform.pipelines is not None:  # Pipelines' journal and definitions (their volumes) in every tier
            expected.add(PIPELINES.namespace)
        if not expected:
            assert tier_name not in schedules, "an empty includedNamespaces would back up every namespace"
            continue
        template = schedules[tier_name]["spec"]["template"]
        assert set(template["includedNamespaces"]) == expected
        assert template["ttl"] == tier.ttl
        assert template["storageLocation"] == "default"
    covered = {ns for s in schedules.values() for ns in s["spec"]["template"]["includedNamespaces"]}
    assert {ns for team in platform.teams for ns in team.namespaces} <= covered


def test_a_team_left_out_of_every_tier_is_reported_by_validate(tmp_path: Path, crds_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    raw = raw_platform("onprem-lab")
    others = [team for team in raw["teams"] if team != "speech"]
    raw["backup"] = {"tiers": {"daily": {"schedule": "0 2 * * *", "ttl": "720h", "teams": others}}}
    code = main(["validate", str(write_stack(tmp_path, raw)), "--crds", str(crds_dir)])
    out = capsys.readouterr().out
    assert code == 1
    assert "namespace/speech:" in out and "namespace/speech-eval:" in out
    assert "namespace/vision:" not in out


def test_coverage_check_reads_the_declared_schedules() -> None:
    """A component that drops a namespace from a Schedule is caught, whatever the spec says."""
    platform, capture = platform_of("onprem-lab"), capture_of("onprem-lab")
    assert check_schedule_coverage(Context(platform, capture, None)) == []
    records = []
    for record in capture.resources:
        if record.inputs.get("kind") == "Schedule":
            spec = json.loads(json.dumps(record.inputs["spec"]))
            spec["template"]["includedNamespaces"].remove("nlp")
            record = dataclasses.replace(record, inputs={**record.inputs, "spec": spec})
        records.append(record)
    dropped = dataclasses.replace(capture, resources=tuple(records))
    findings = check_schedule_coverage(Context(platform, dropped, None))
    assert [f.subject for f in findings] == ["namespace/nlp"]


@pytest.mark.parametrize("stack", STACKS)
def test_velero_is_pinned_with_the_plugin_of_its_object_store(stack: str) -> None:
    capture = capture_of(stack)
    chart = next(r for r in capture.resources if r.type == "kubernetes:helm.sh/v4:Chart" and r.name == "velero")
    assert chart.inputs["version"] == "12.1.0"
    assert chart.inputs["chart"] == f".charts/{VELERO_CHART.digest.removeprefix('sha256:')}/velero-12.1.0.tgz"
    values = chart.inputs["values"]
    assert values["image"]["tag"] == "v1.18.2"
    assert values["upgradeCRDs"] is False  # the hook job is not run as a hook by Pulumi
    location = _named(capture, "BackupStorageLocation", "default")["spec"]
    plugin = {"aws": "velero-plugin-for-aws", "gcp": "velero-plugin-for-gcp",
              "azure": "velero-plugin-for-microsoft-azure"}[location["provider"]]
    assert [c["image"] for c in values["initContainers"]] == [f"docker.io/velero/{plugin}:v1.14.2"]
    assert "EnableCSI" in values["configuration"]["features"]


@pytest.mark.parametrize("stack", STACKS)
def test_credentials_never_sit_in_the_stack_file(stack: str) -> None:
    capture = capture_of(stack)
    for secret in kube_objects(capture, "Secret"):
        if secret["metadata"]["name"] == "velero-credentials":
            assert secret["stringData"]["cloud"] == "[secret]"
    location = _named(capture, "BackupStorageLocation", "default")["spec"]
    assert set(location.get("credential", {})) <= {"name", "key"}


def test_volume_policy_skips_dataset_volumes() -> None:
    import yaml

    policy = yaml.safe_load(_named(capture_of("onprem-lab"), "ConfigMap", "volume-policy")["data"]["policy.yaml"])
    skipped = [p["conditions"]["storageClass"] for p in policy["volumePolicies"] if p["action"]["type"] == "skip"]
    assert skipped == [["datasets"]]
    for schedule in kube_objects(capture_of("onprem-lab"), "Schedule"):
        assert schedule["spec"]["template"]["resourcePolicy"] == {"kind": "configmap", "name": "volume-policy"}


def test_drill_restore_maps_every_namespace_and_fits_the_velero_crd(crds_dir: Path) -> None:
    platform, capture = platform_of("onprem-lab"), capture_of("onprem-lab")
    restore = json.loads(_env(_named(capture, "CronJob", "restore-drill"))["RESTORE"])
    restore["metadata"]["name"] = "drill-20260101-000000"
    tier = platform.spec.backup.drill.tier
    namespaces = [ns for team in platform.teams for ns in team.namespaces]
    assert restore["spec"]["scheduleName"] == tier
    assert restore["spec"]["namespaceMapping"] == {ns: f"drill-{ns}" for ns in namespaces}
    assert check_custom(restore, CrdIndex(crds_dir, platform.spec.versions.crd_dirs())) == []


def test_drill_rbac_is_exact() -> None:
    capture = capture_of("onprem-lab")
    role = _named(capture, "Role", "restore-drill")
    assert role["rules"] == [{"apiGroups": ["velero.io"], "resources": ["restores"],
                              "verbs": ["create", "get", "delete"]},
                             {"apiGroups": ["velero.io"], "resources": ["backups"], "verbs": ["get"]}]
    cluster_role = _named(capture, "ClusterRole", "trainyard-restore-drill")
    namespaces = next(r for r in cluster_role["rules"] if r["resources"] == ["namespaces"])
    assert set(namespaces["verbs"]) == {"get", "delete"}
    assert all(name.startswith("drill-") for name in namespaces["resourceNames"])
    for rule_ in cluster_role["rules"]:
        assert rule_.get("resourceNames"), "cluster-wide rules of the drill are limited to named objects"


def _fake_kubectl(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/bash\necho "$*" >> "{tmp_path}/calls"\n{body}\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _run_cron_job(cron_job: dict[str, Any], extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", _script(cron_job)], env={**_env(cron_job), **extra_env},
                          capture_output=True, text=True, timeout=60, check=False)


DRILL_KUBECTL = """
case "$*" in
  create*) cat > "$(dirname "$0")/../restore.json" ;;
  *"get restores"*"{.status.phase}"*) echo -n "$PHASE" ;;
  *"get restores"*"{.spec.backupName}"*) echo -n daily-20261129020000 ;;
  *"get restores"*"{.status.errors}"*) echo -n "2 errors, 1 warnings" ;;
  *"get restores"*) ;;
  *"get backups.velero.io daily-20261129020000"*) echo -n "$COMPLETED" ;;
  *"get configmap"*) ns="${2#drill-}"; [ -n "$MARKER_GONE" ] || echo -n "$ns" ;;
esac
"""


@pytest.mark.parametrize(("phase", "marker_gone", "backup_age_hours", "passes"), [
    ("Completed", "", 3, True),
    ("PartiallyFailed", "", 3, False),
    ("Failed", "", 3, False),
    ("Completed", "1", 3, False),
    ("Completed", "", 31, False),  # the daily tier's newest backup is over 24h + 6h old: the Schedule stopped
])
def test_drill_passes_only_on_a_fresh_completed_restore_with_its_markers(
        tmp_path: Path, phase: str, marker_gone: str, backup_age_hours: int, passes: bool) -> None:
    drill = _named(capture_of("onprem-lab"), "CronJob", "restore-drill")
    completed = datetime.now(UTC) - timedelta(hours=backup_age_hours, minutes=5)
    env = {**_fake_kubectl(tmp_path, DRILL_KUBECTL), "PHASE": phase, "MARKER_GONE": marker_gone,
           "COMPLETED": f"{completed:%Y-%m-%dT%H:%M:%SZ}"}
    result = _run_cron_job(drill, env)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr
    sent = json.loads((tmp_path / "restore.json").read_text())
    assert sent["metadata"]["name"].startswith("drill-") and "__" not in sent["metadata"]["name"]
    calls = (tmp_path / "calls").read_text()
    # The drill namespaces are removed whatever the outcome; the Restore only when the drill passed, so a
    # failure keeps Velero's account of it.
    assert (f"delete restores.velero.io {sent['metadata']['name']}" in calls) is passes
    for target in sent["spec"]["namespaceMapping"].values():
        assert calls.count(f"delete namespace {target}") >= 2  # before the drill and after it
    if passes:
        assert f"backup daily-20261129020000 (completed {env['COMPLETED']}, {backup_age_hours}h old)" in result.stdout
    else:
        assert f"velero restore describe {sent['metadata']['name']}" in result.stdout
    if phase == "PartiallyFailed":
        assert "restore ended PartiallyFailed (2 errors, 1 warnings)" in result.stdout


@pytest.mark.parametrize(("cron", "max_age"), [
    ("0 2 * * *", 30), ("0 * * * *", 2), ("15 */6 * * *", 7), ("0 3 * * 0", 210), ("0 4 1 * *", 930),
])
def test_drill_accepts_backups_up_to_the_tier_interval_and_a_quarter(cron: str, max_age: int) -> None:
    raw = raw_platform("onprem-lab")
    raw["backup"] = {"tiers": {"only": {"schedule": cron, "ttl": "2160h"}}, "drill": {"tier": "only"}}
    assert validate(raw, "onprem-lab").backup.drill_max_age_hours == max_age
    raw["backup"]["drill"]["maxBackupAge"] = "12h"
    assert validate(raw, "onprem-lab").backup.drill_max_age_hours == 12


def test_janitor_deletes_only_trainjobs_finished_longer_than_the_ttl(tmp_path: Path) -> None:
    platform = platform_of("onprem-lab")
    janitor = _named(capture_of("onprem-lab"), "CronJob", "trainyard-janitor")
    ttl = timedelta(hours=int(platform.spec.storage.cleanup.finished_train_jobs.removesuffix("h")))
    now = datetime.now(UTC)
    old, recent = (now - ttl - timedelta(hours=1)), (now - ttl + timedelta(hours=1))
    listing = (f"old-done Complete={old:%Y-%m-%dT%H:%M:%SZ} \\n"
               f"old-failed Suspended={old:%Y-%m-%dT%H:%M:%SZ} Failed={old:%Y-%m-%dT%H:%M:%SZ} \\n"
               f"recent-done Complete={recent:%Y-%m-%dT%H:%M:%SZ} \\n"
               f"old-suspended Suspended={old:%Y-%m-%dT%H:%M:%SZ} \\n"
               "running \\n")
    env = _fake_kubectl(tmp_path, f'case "$*" in *"get trainjobs"*) printf "{listing}" ;; esac')
    result = _run_cron_job(janitor, env)
    assert result.returncode == 0, result.stderr
    deleted = [line.split()[-2] for line in (tmp_path / "calls").read_text().splitlines() if " delete " in line]
    namespaces = [ns for team in platform.teams for ns in team.namespaces]
    assert sorted(deleted) == sorted(["old-done", "old-failed"] * len(namespaces))


def test_backups_in_the_clusters_own_object_store_are_flagged_until_sent_off_site() -> None:
    on_cluster = check_backups_off_cluster(Context(platform_of("onprem-lab"), capture_of("onprem-lab"), None))
    assert [(f.subject, f.severity) for f in on_cluster] == [("BackupStorageLocation/default", "warning")]
    assert "trainyard-lab-backups" in on_cluster[0].message
    raw = raw_platform("onprem-lab")
    raw["backup"] = {"location": {"bucket": "lab-offsite-backups", "s3Url": "https://backup.example.net"}}
    platform = validate(raw, "onprem-lab")
    capture = run("onprem-lab", {PLATFORM_KEY: raw})
    assert check_backups_off_cluster(Context(platform, capture, None)) == []


# Velero's phases of the drill's Restore, one per poll (the last repeats); `sleep` waits SLEEP seconds, not 20.
PHASE_PER_POLL = """  *"get restores"*"{.status.phase}"*)
    polls="$(dirname "$0")/../polls"; n=$(cat "$polls" 2>/dev/null || echo 0); echo $(( n + 1 )) > "$polls"
    read -r -a phases <<< "$PHASES"; last=$(( ${#phases[@]} - 1 ))
    echo -n "${phases[$(( n < last ? n : last ))]}" ;;"""
QUEUED_KUBECTL = DRILL_KUBECTL.replace('''  *"get restores"*"{.status.phase}"*) echo -n "$PHASE" ;;''', PHASE_PER_POLL)
FAST_SLEEP = '#!/bin/bash\nexec /bin/sleep "$SLEEP"\n'


@pytest.mark.parametrize(("phases", "timeout", "passes", "says"), [
    # queued behind another restore, then restoring, each within the timeout and together beyond it: passes
    ("New New New New InProgress InProgress InProgress InProgress Completed", 3, True, "restored in"),
    # never started: fails for the wait, naming it, not as a slow restore
    ("New", 1, False, "Velero did not start it in 1s (still 'New'): another restore runs"),
    # started, then slower than the timeout: fails at the restore's own deadline
    ("New InProgress", 1, False, "still 'InProgress' at the deadline"),
])
def test_the_drill_s_deadline_counts_from_when_velero_starts_its_restore(
        tmp_path: Path, phases: str, timeout: int, passes: bool, says: str) -> None:
    """Velero runs one restore at a time and both drills start together: a drill waiting its turn is not a slow
    restore. The Job's own deadline leaves room for both (the wait and the restore each get the timeout)."""
    drill = _named(capture_of("onprem-lab"), "CronJob", "restore-drill")
    completed = datetime.now(UTC) - timedelta(hours=3)
    env = {**_fake_kubectl(tmp_path, QUEUED_KUBECTL), "PHASES": phases, "MARKER_GONE": "", "SLEEP": "0.5",
           "TIMEOUT_SECONDS": str(timeout), "COMPLETED": f"{completed:%Y-%m-%dT%H:%M:%SZ}"}
    (tmp_path / "bin" / "sleep").write_text(FAST_SLEEP)
    (tmp_path / "bin" / "sleep").chmod(0o755)
    result = _run_cron_job(drill, env)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr
    assert says in result.stdout
    timeout_minutes = platform_of("onprem-lab").spec.backup.drill.timeout_minutes
    assert drill["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == (2 * timeout_minutes + 15) * 60
