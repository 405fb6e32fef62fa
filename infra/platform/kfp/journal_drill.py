"""The journal drill (issue 30, docs/pipelines.md "Backup and restore of the journal"): on a stack with Pipelines, a
scheduled restore of the run journal from the drill tier's latest backup, proving that a run recorded before the
backup is in it.

What it restores: from namespace `kubeflow`, only what carries JOURNAL_LABEL, i.e. MySQL's claim (the databases
`mlpipeline` and `metadb`, ML Metadata) and MySQL's pod, into the drill namespace `drill-kubeflow`. The pod comes
too because a volume that Velero copied file by file (fs-backup: classes without CSI snapshots, EFS) is refilled
only through a restored pod (Velero's restore-wait init container); a snapshotted volume is refilled by the data
mover before the claim binds. Velero's resource modifiers (Restore.spec.resourceModifier, applied after its own
restore actions) put the claim on the `scratch` class (its volume goes with the claim) and turn the pod into a
throwaway MySQL: no sidecar, no account token, no Secret, no network; mysqld starts on the copy with
--skip-grant-tables --skip-networking (so no password is needed and nothing can connect), prints what the journal
holds and stops.

What it proves: the newest pipeline run whose Workflow had started before the backup began (less RUN_MARGIN, so the
API server and the persistence agent have written it) is a row of `mlpipeline.run_details` (KFP 2.16.0
backend/src/apiserver/model/run.go: table `run_details`, columns `UUID`, `CreatedAtInSec`) and a `system.PipelineRun`
context of ML Metadata (`metadb.Context` joined to `metadb.Type`, ml-metadata's MySQL schema; KFP
backend/src/v2/metadata/client.go names the context after the run id). Workflows carry the run id as label
`pipeline/runid` (KFP backend/src/common/util/consts.go) and stay 24h after they finish (the persistence agent's
TTL_SECONDS_AFTER_WORKFLOW_FINISH); when none from before the backup remains, the drill says so and proves only that
the journal opens and how many runs it holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import PIPELINES
from infra.kit.naming import named
from infra.kit.objects import (
    NETWORKING_API,
    RBAC_API,
    RBAC_GROUP,
    child_opts,
    kube_object,
    metadata,
    namespace,
    policy_rule,
)
from infra.platform.backup import API, NAMESPACE, RESTORE_NAME, RESTORE_STEPS
from infra.platform.kfp.patches import JOURNAL_CLAIM, JOURNAL_LABEL, JOURNAL_VOLUME, MYSQL_CONTAINER, MYSQL_IMAGE
from infra.platform.storage import cron_job
from infra.spec import Platform
from infra.spec.backup import DRILL_PREFIX
from infra.spec.storage.model import SCRATCH
from infra.vocabulary import DRILL_LABEL

NAME = "journal-drill"
SOURCE = PIPELINES.namespace
TARGET = f"{DRILL_PREFIX}{SOURCE}"
SELECTOR = f"{JOURNAL_LABEL}=true"
RUN_LABEL = "pipeline/runid"
RUN_MARGIN_SECONDS = 600
DATA_DIR = "/var/lib/mysql"
# Each live Workflow of a pipeline run: when it started, and its run id.
RUNS = f'{{range .items[*]}}{{.status.startedAt}}{{" "}}{{.metadata.labels.{RUN_LABEL}}}{{"\\n"}}{{end}}'

# Runs in the throwaway MySQL: one line per fact, which the drill reads from the pod's log.
CHECK = rf"""set -euo pipefail
mysqld --datadir={DATA_DIR} --skip-grant-tables --skip-networking --socket=/tmp/drill.sock \
  --pid-file=/tmp/drill.pid --log-error=/tmp/mysqld.log --mysql-native-password=ON --disable-log-bin &
for _ in $(seq 1 60); do mysqladmin --socket=/tmp/drill.sock ping >/dev/null 2>&1 && break; sleep 5; done
mysqladmin --socket=/tmp/drill.sock ping >/dev/null 2>&1 || {{ tail -n 20 /tmp/mysqld.log; exit 1; }}
q() {{ mysql --socket=/tmp/drill.sock -N -B -e "$1"; }}
echo "runs $(q 'SELECT COUNT(*) FROM mlpipeline.run_details')"
q "SELECT CONCAT('run ', UUID) FROM mlpipeline.run_details ORDER BY CreatedAtInSec DESC LIMIT 1000"
q "SELECT CONCAT('context ', c.name) FROM metadb.Context c JOIN metadb.Type t ON c.type_id = t.id
   WHERE t.name = 'system.PipelineRun' ORDER BY c.create_time_since_epoch DESC LIMIT 1000"
mysqladmin --socket=/tmp/drill.sock shutdown
"""

_PREPARE = r"""set -euo pipefail
restore="journal-$(date -u +%Y%m%d-%H%M%S)"
passed=""
clear() { kubectl -n "$TARGET" delete pods,persistentvolumeclaims -l "$SELECTOR" --ignore-not-found "$@"; }
cleanup() {
  # The restored pod and claim go whatever the outcome (the claim's class deletes the copy); a failed drill keeps
  # its Restore, whose errors and warnings Velero's `restore describe` shows.
  if [ -n "$passed" ]; then
    kubectl -n __NAMESPACE__ delete restores.velero.io "$restore" --ignore-not-found --wait=false || true
  fi
  clear --wait=false || true
}
# A drill that died last time may have left its copy: start clean.
clear --wait=true
"""
_CHECKS = r"""# The reference: the newest run whose Workflow started before the backup
# began, less the margin (the API server and the persistence agent have written it by then).
began=$(kubectl -n __NAMESPACE__ get backups.velero.io "$backup" -o jsonpath='{.status.startTimestamp}')
[ -n "$began" ] || fail "backup '$backup' has no start time"
cutoff=$(( $(date -d "$began" +%s) - RUN_MARGIN_SECONDS ))
listed=$(for ns in $NAMESPACES; do
  kubectl -n "$ns" get workflows.argoproj.io -l "$RUN_LABEL" -o jsonpath="$RUNS"; done) ||
  fail "cannot list the runs' Workflows in $NAMESPACES"
reference=$(echo "$listed" | while read -r start run; do
  if [ -n "$run" ] && [ "$(date -d "$start" +%s)" -le "$cutoff" ]; then echo "$start $run"; fi
done | sort | tail -n 1)
phase=""
while true; do
  pod=$(kubectl -n "$TARGET" get pods -l "$SELECTOR" -o jsonpath='{.items[0].metadata.name}') || true
  [ -z "$pod" ] || phase=$(kubectl -n "$TARGET" get pod "$pod" -o jsonpath='{.status.phase}')
  case "$phase" in Succeeded|Failed) break ;; esac
  if [ "$(date +%s)" -ge $(( started + TIMEOUT_SECONDS )) ]; then fail "the journal's pod is '$phase' at the end"; fi
  sleep 10
done
journal=$(kubectl -n "$TARGET" logs "$pod" -c "$CONTAINER")
[ "$phase" = Succeeded ] || fail "the restored journal did not open: $(echo "$journal" | tail -n 5)"
runs=$(echo "$journal" | sed -n 's/^runs //p')
[ -n "$runs" ] || fail "the restored journal reported no run count"
if [ -n "$reference" ]; then
  run="${reference#* }"; when="run $run (started ${reference%% *}, backup $backup began $began)"
  echo "$journal" | grep -qx "run $run" || fail "$when is not in the restored mlpipeline.run_details"
  echo "$journal" | grep -qx "context $run" || fail "$when has no run context in the restored ML Metadata (metadb)"
  found="$when found in mlpipeline and metadb"
else
  found="no run's Workflow from before the backup is left to name one (they go 24h after they finish)"
fi
passed=1
echo "journal drill $restore passed: backup $backup (completed $completed, ${age}h old) restored in ${seconds}s;" \
  "the journal holds $runs runs; $found"
"""
JOURNAL_SCRIPT = (_PREPARE + RESTORE_STEPS + _CHECKS).replace("__NAMESPACE__", NAMESPACE)


def journal_restore(tier: str) -> dict[str, Any]:
    """The Restore each drill creates: the journal's claim and pod only, into the drill namespace, the claim's data
    from its snapshot (the data mover) or its file copy (restorePVs on; no cluster-scoped object)."""
    return {
        "apiVersion": API, "kind": "Restore",
        "metadata": {"name": RESTORE_NAME, "namespace": NAMESPACE, "labels": {DRILL_LABEL: "true"}},
        "spec": {
            "scheduleName": tier,
            "includedNamespaces": [SOURCE],
            "namespaceMapping": {SOURCE: TARGET},
            # persistentvolumes too: Velero refills a file-copied volume only when both kinds are included.
            "includedResources": ["persistentvolumeclaims", "persistentvolumes", "pods"],
            "labelSelector": {"matchLabels": {JOURNAL_LABEL: "true"}},
            "includeClusterResources": False,
            "restorePVs": True,
            "resourceModifier": {"kind": "ConfigMap", "name": NAME},
        },
    }


def throwaway_pod() -> dict[str, Any]:
    """The strategic merge patch that turns the restored MySQL pod into the drill's throwaway MySQL. Its own
    securityContext stays (restricted, uid 999: the data's owner), and so does Velero's restore-wait container."""
    def gone(*names: str) -> list[dict[str, Any]]:  # Istio's containers, which the restored pod may carry
        return [{"name": name, "$patch": "delete"} for name in names]
    return {
        "metadata": {"labels": {"sidecar.istio.io/inject": "false"}},
        "spec": {
            # serviceAccount: the deprecated alias the backed-up pod also carries
            "serviceAccountName": "default", "serviceAccount": "default", "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "initContainers": gone("istio-init", "istio-validation", "istio-proxy"),
            "containers": [*gone("istio-proxy"), {
                "name": MYSQL_CONTAINER, "image": MYSQL_IMAGE, "command": ["bash", "-c", CHECK], "args": None,
                "env": None, "ports": None,
                "volumeMounts": [{"$patch": "replace"}, {"name": JOURNAL_VOLUME, "mountPath": DATA_DIR}]}],
            "volumes": [{"$patch": "replace"},
                        {"name": JOURNAL_VOLUME, "persistentVolumeClaim": {"claimName": JOURNAL_CLAIM}}],
        },
    }


def modifiers() -> dict[str, Any]:
    """Velero's resource modifiers for the journal's Restore (conditions see the source namespace)."""
    def journal(resource: str) -> dict[str, Any]:
        return {"groupResource": resource, "namespaces": [SOURCE],
                "labelSelector": {"matchLabels": {JOURNAL_LABEL: "true"}}}
    return {"version": "v1", "resourceModifierRules": [
        {"conditions": journal("persistentvolumeclaims"),
         "patches": [{"operation": "replace", "path": "/spec/storageClassName", "value": SCRATCH}]},
        {"conditions": journal("pods"),
         "strategicPatches": [{"patchData": yaml.safe_dump(throwaway_pod(), sort_keys=False)}]},
    ]}


class JournalDrill(pulumi.ComponentResource):
    """Exactly what the drill needs: create/get/delete Restores and get Backups in Velero's namespace; in the drill
    namespace, find, read the log of and delete the restored pod and claim; list the runs' Workflows in team
    namespaces."""

    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], after: pulumi.Resource,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:JournalDrill", name, None, opts)
        in_velero = child_opts(self, provider, depends_on=[after])
        subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
        account = kube_object(f"sa-{NAME}", "v1", "ServiceAccount", metadata(NAME, NAMESPACE), in_velero)

        def grant(key: str, kind: str, where: str | None, role: str, deps: list[pulumi.Resource],
                  rules: list[dict[str, Any]] | None = None) -> None:
            """A Role or ClusterRole (with rules) and/or the binding of the drill's account to it."""
            made = [kube_object(f"{key}-role", RBAC_API, kind, metadata(role, where), child_opts(self, provider, deps),
                                rules=rules)] if rules is not None else []
            binding = "RoleBinding" if where else "ClusterRoleBinding"
            kube_object(f"{key}-binding", RBAC_API, binding, metadata(role, where),
                        child_opts(self, provider, [*deps, *made, account]), subjects=subject,
                        roleRef={"apiGroup": RBAC_GROUP, "kind": kind, "name": role})

        grant(f"{NAME}-velero", "Role", NAMESPACE, NAME, [after], [
            policy_rule(["velero.io"], ["restores"], ["create", "get", "delete"]),
            policy_rule(["velero.io"], ["backups"], ["get"])])
        drill_ns = namespace(TARGET, TARGET, child_opts(self, provider), labels={
            "pod-security.kubernetes.io/enforce": "restricted"})
        # The throwaway MySQL needs no network at all.
        kube_object(f"{TARGET}-default-deny", NETWORKING_API, "NetworkPolicy", metadata("default-deny", TARGET),
                    child_opts(self, provider, [drill_ns]),
                    spec={"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})
        grant(f"{NAME}-target", "Role", TARGET, NAME, [drill_ns], [
            policy_rule([""], ["pods"], ["get", "list", "delete"]), policy_rule([""], ["pods/log"], ["get"]),
            policy_rule([""], ["persistentvolumeclaims"], ["list", "delete"])])
        runs_role = f"trainyard-{NAME}-runs"
        kube_object(f"{NAME}-runs-role", RBAC_API, "ClusterRole", metadata(runs_role), child_opts(self, provider),
                    rules=[policy_rule(["argoproj.io"], ["workflows"], ["list"])])
        for team_ns, created in sorted(team_namespaces.items()):
            grant(f"{team_ns}-{NAME}", "ClusterRole", team_ns, runs_role, [created])
        kube_object(f"{NAME}-modifiers", "v1", "ConfigMap", metadata(NAME, NAMESPACE), in_velero,
                    data={"modifiers.yaml": yaml.safe_dump(modifiers(), sort_keys=False)})
        facts, drill = platform.backup, platform.spec.backup.drill
        env = {
            "RESTORE": json.dumps(journal_restore(facts.drill_schedule.tier), sort_keys=True),
            "TARGET": TARGET, "SELECTOR": SELECTOR, "CONTAINER": MYSQL_CONTAINER,
            "NAMESPACES": " ".join(sorted(team_namespaces)), "RUN_LABEL": RUN_LABEL, "RUNS": RUNS,
            "RUN_MARGIN_SECONDS": str(RUN_MARGIN_SECONDS),
            "TIMEOUT_SECONDS": str(drill.timeout_minutes * 60), "TIER": facts.drill_schedule.tier,
            "MAX_BACKUP_AGE_HOURS": str(facts.drill_max_age_hours),
        }
        kube_object(NAME, "batch/v1", "CronJob", metadata(NAME, NAMESPACE), child_opts(self, provider, [account]),
                    spec=cron_job(drill.schedule, NAME, JOURNAL_SCRIPT, env, drill.job_deadline_seconds,
                                  retries=0))
        self.register_outputs({"restores": TARGET})


def journal_drill(platform: Platform, provider: k8s.Provider, team_namespaces: Mapping[str, pulumi.Resource],
                  backup: pulumi.Resource) -> JournalDrill | None:
    """The journal drill, on a stack (a hybrid stack's manager) that runs Pipelines."""
    if platform.pipelines is None:
        return None
    return JournalDrill(named(NAME), platform, provider, team_namespaces, backup)
