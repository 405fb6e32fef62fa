"""Backup: Velero at its pinned chart, image and plugin, the BackupStorageLocation, one Schedule per tier,
the volume policy, a marker in every team namespace, the scheduled restore drill and the cleanup job."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra.components import VELERO
from infra.kit.contract import WorkloadIdentity
from infra.kit.naming import named
from infra.kit.objects import (
    RBAC_API,
    RBAC_GROUP,
    child_opts,
    helm_chart,
    kube_object,
    metadata,
    namespace,
    policy_rule,
)
from infra.platform.network import ANYWHERE, Flow, guard_namespace, metrics
from infra.platform.storage import cron_job
from infra.spec import Platform
from infra.spec.backup import BackupFacts
from infra.spec.clouds import VELERO_PLUGINS
from infra.spec.storage.model import CHECKPOINTS, DATASETS, SCRATCH, VELERO_NAMESPACE, StorageFacts
from infra.spec.versions import VELERO_CHART, VELERO_IMAGE
from infra.vocabulary import BACKUP_MARKER, DRILL_LABEL, NAME_LABEL

API = "velero.io/v1"
NAMESPACE = VELERO_NAMESPACE
LOCATION = "default"
CREDENTIALS, = VELERO.secrets
VOLUME_POLICY = "volume-policy"
SCRATCH_MODIFIER = "drill-scratch-volumes"
MARKER = BACKUP_MARKER
MARKER_LABEL = "trainyard.io/backup-marker"
DRILL = "restore-drill"
JANITOR = "trainyard-janitor"
RESTORE_NAME = "__RESTORE__"  # replaced by the drill script with a timestamped name


def chart_values(platform: Platform, facts: BackupFacts, with_secret: bool,
                 identity: WorkloadIdentity | None = None) -> dict[str, Any]:
    repository, tag = VELERO_IMAGE.rsplit(":", 1)
    plugin = VELERO_PLUGINS[facts.provider]
    gpu_tolerations = [dict(t) for f in platform.flavors if f.gpu_resources for t in f.tolerations]
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "initContainers": [{"name": plugin.split("/")[-1].split(":")[0], "image": plugin,
                            "imagePullPolicy": "IfNotPresent",
                            "volumeMounts": [{"mountPath": "/target", "name": "plugins"}]}],
        # Pulumi renders hooks as plain objects: the CRDs come from the chart's crds/ (retained by the
        # chart transform) and are upgraded with the chart, so the upgrade-CRDs hook job stays off.
        "upgradeCRDs": False,
        "cleanUpCRDs": False,
        # The location and schedules are explicit objects below, not chart values.
        "backupsEnabled": False,
        "snapshotsEnabled": False,
        "deployNodeAgent": True,  # the CSI data mover and fs-backup run in the node agent
        "nodeAgent": {"tolerations": gpu_tolerations},
        "configuration": {"features": "EnableCSI", "uploaderType": "kopia", "defaultSnapshotMoveData": True,
                          "defaultVolumesToFsBackup": False},
        "credentials": {"useSecret": with_secret, **({"existingSecret": CREDENTIALS} if with_secret else {})},
        # The cluster's workload identity for Velero (the node agent runs under the same account and labels).
        "serviceAccount": {"server": {"annotations": {**(facts.identity or {}),
                                                      **(identity.annotations if identity else {})}}},
        "podLabels": dict(identity.pod_labels) if identity else {},
        "metrics": {"enabled": True},
    }


def object_storage_flow(platform: Platform) -> Flow:
    """Velero's server and node agents write to the location's bucket: the in-cluster Ceph RGW by its pods,
    else an object store whose service addresses are not fixed, on the location's port."""
    url = str(platform.backup.config.get("s3Url") or "")
    if url and url == platform.storage.rgw_url:
        rook = platform.spec.storage.rook_ceph.namespace
        peers = [{"namespaceSelector": {"matchLabels": {NAME_LABEL: rook}},
                  "podSelector": {"matchLabels": {"app": "rook-ceph-rgw"}}}]
        return Flow("object-storage", "Egress", peers, (80, 8080), "backups to the in-cluster Ceph RGW")
    parsed = urlparse(url)
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    return Flow("object-storage", "Egress", ANYWHERE, tuple(sorted({443, port})),
                "backups to the object store, whose service addresses are not fixed")


def location_spec(facts: BackupFacts, with_secret: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "provider": facts.provider,
        "objectStorage": {"bucket": facts.bucket, "prefix": facts.prefix},
        "default": True,
        "accessMode": "ReadWrite",
    }
    if facts.config:
        spec["config"] = dict(facts.config)
    if with_secret:
        spec["credential"] = {"name": CREDENTIALS, "key": "cloud"}
    return spec


def schedule_spec(schedule: Any) -> dict[str, Any]:
    return {
        "schedule": schedule.cron,
        "useOwnerReferencesInBackup": False,
        "template": {
            "includedNamespaces": list(schedule.namespaces),
            "ttl": schedule.ttl,
            "storageLocation": LOCATION,
            "snapshotVolumes": schedule.volumes,
            "snapshotMoveData": schedule.volumes,
            "resourcePolicy": {"kind": "configmap", "name": VOLUME_POLICY},
        },
    }


def volume_policy(storage: StorageFacts) -> dict[str, Any]:
    """Datasets are skipped (they are restored from object storage); checkpoints on drivers without CSI
    snapshots are copied file by file; everything else is snapshotted and moved to the bucket."""
    policies: list[dict[str, Any]] = [
        {"conditions": {"storageClass": [DATASETS]}, "action": {"type": "skip"}}]
    if not storage.klass(CHECKPOINTS).snapshots:
        policies.append({"conditions": {"storageClass": [CHECKPOINTS, SCRATCH]}, "action": {"type": "fs-backup"}})
    return {"version": "v1", "volumePolicies": policies}


def scratch_modifier() -> dict[str, Any]:
    """For side-by-side restores by hand (backup-restore.md, procedure B): restored claims land on the scratch
    class, whose volumes go with the namespace they are restored into."""
    return {"version": "v1", "resourceModifierRules": [{
        "conditions": {"groupResource": "persistentvolumeclaims", "resourceNameRegex": ".*"},
        "patches": [{"operation": "replace", "path": "/spec/storageClassName", "value": SCRATCH}],
    }]}


def drill_restore(facts: BackupFacts) -> dict[str, Any]:
    """The Restore each drill creates: from the latest backup of the drill tier, only what the drill verifies
    (the marker ConfigMaps), every namespace mapped to its drill namespace. Nothing a tenant could use there
    (bindings, quotas, jobs, volumes) is restored, and the drill namespaces get no admission exemption."""
    return {
        "apiVersion": API, "kind": "Restore",
        "metadata": {"name": RESTORE_NAME, "namespace": NAMESPACE, "labels": {DRILL_LABEL: "true"}},
        "spec": {
            "scheduleName": facts.drill_schedule.tier,
            "includedNamespaces": list(facts.drill_namespaces),
            "namespaceMapping": dict(facts.drill_namespaces),
            "includedResources": ["configmaps"],
            "labelSelector": {"matchLabels": {MARKER_LABEL: "true"}},
            "includeClusterResources": False,
            "restorePVs": False,
        },
    }


# Every drill's middle part, after it has named $restore, defined cleanup() and started clean: create the Restore
# ($RESTORE) under that name, wait for it (only Completed passes), and refuse a backup older than the tier allows.
# It sets backup, completed, age and seconds for the drill's checks.
RESTORE_STEPS = r"""fail() {
  echo "drill $restore FAILED: $*; Restore kept: velero restore describe $restore --details"; exit 1
}
restore_field() { kubectl -n __NAMESPACE__ get restores.velero.io "$restore" -o jsonpath="$1"; }
trap cleanup EXIT
printf '%s' "$RESTORE" | sed "s/__RESTORE__/$restore/" | kubectl create -f -
# Velero runs one restore at a time: the deadline counts from when Velero starts this one (it leaves New), so a
# drill queued behind the other drill or a real restore is not failed for the wait, which has a deadline of its own.
queued=$(date +%s)
started=""
while true; do
  phase=$(restore_field '{.status.phase}')
  case "$phase" in
    Completed) break ;;
    PartiallyFailed|Failed|FailedValidation)
      counts=$(restore_field '{.status.errors} errors, {.status.warnings} warnings')
      reason=$(restore_field '{.status.failureReason}{.status.validationErrors}')
      fail "restore ended $phase ($counts${reason:+; $reason}); only Completed passes" ;;
    ""|New) ;;
    *) [ -n "$started" ] || started=$(date +%s) ;;
  esac
  now=$(date +%s)
  if [ -z "$started" ] && [ "$now" -ge $(( queued + TIMEOUT_SECONDS )) ]; then
    fail "Velero did not start it in ${TIMEOUT_SECONDS}s (still '${phase:-New}'): another restore runs"
  fi
  if [ -n "$started" ] && [ "$now" -ge $(( started + TIMEOUT_SECONDS )) ]; then
    fail "still '$phase' at the deadline"
  fi
  sleep 20
done
started=${started:-$queued}
seconds=$(( $(date +%s) - started ))
backup=$(restore_field '{.spec.backupName}')
completed=$(kubectl -n __NAMESPACE__ get backups.velero.io "$backup" -o jsonpath='{.status.completionTimestamp}')
[ -n "$completed" ] || fail "backup '$backup' has no completion time"
age=$(( ($(date +%s) - $(date -d "$completed" +%s)) / 3600 ))
if [ "$age" -gt "$MAX_BACKUP_AGE_HOURS" ]; then
  fail "backup $backup completed $completed, ${age}h ago, beyond ${MAX_BACKUP_AGE_HOURS}h: is Schedule $TIER running?"
fi
""".replace("__NAMESPACE__", NAMESPACE)

DRILL_SCRIPT = r"""set -euo pipefail
restore="drill-$(date -u +%Y%m%d-%H%M%S)"
passed=""
cleanup() {
  # A failed drill keeps its Restore: its errors and warnings are what Velero's `restore describe` shows.
  if [ -n "$passed" ]; then
    kubectl -n __NAMESPACE__ delete restores.velero.io "$restore" --ignore-not-found --wait=false || true
  fi
  for pair in $CHECKS; do kubectl delete namespace "${pair#*=}" --ignore-not-found --wait=false || true; done
}
# A drill that died last time may have left its namespaces: start clean, and always clean up.
for pair in $CHECKS; do kubectl delete namespace "${pair#*=}" --ignore-not-found --wait=true; done
""".replace("__NAMESPACE__", NAMESPACE) + RESTORE_STEPS + r"""for pair in $CHECKS; do
  source="${pair%%=*}"; target="${pair#*=}"
  found=$(kubectl -n "$target" get configmap "$MARKER" -o jsonpath='{.data.namespace}') || true
  if [ "$found" != "$source" ]; then fail "marker of $source missing in $target"; fi
done
passed=1
echo "drill $restore passed: backup $backup (completed $completed, ${age}h old) restored in ${seconds}s;" \
  "markers of $CHECKS verified"
"""

# One line per TrainJob: its name, then Type=lastTransitionTime for every condition that is True.
FINISHED = ('{range .items[*]}{.metadata.name}{" "}'
            '{range .status.conditions[?(@.status=="True")]}{.type}{"="}{.lastTransitionTime}{" "}{end}'
            '{"\\n"}{end}')
JANITOR_SCRIPT = r"""set -euo pipefail
cutoff=$(( $(date +%s) - TTL_HOURS * 3600 ))
for ns in $NAMESPACES; do
  kubectl -n "$ns" get trainjobs.trainer.kubeflow.org -o jsonpath="$FINISHED" |
  while read -r name conditions; do
    for condition in $conditions; do
      case "$condition" in
        Complete=*|Failed=*)
          if [ "$(date -d "${condition#*=}" +%s)" -lt "$cutoff" ]; then
            kubectl -n "$ns" delete trainjobs.trainer.kubeflow.org "$name" --wait=false
          fi ;;
      esac
    done
  done
done
"""


class Backup(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], credentials: pulumi.Input[str] | None = None,
                 identity: WorkloadIdentity | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Backup", name, None, opts)
        storage, facts = platform.storage, platform.backup
        self.provider = provider
        with_secret = facts.identity is None and identity is None
        ns = namespace(NAMESPACE, NAMESPACE, child_opts(self, provider), labels={
            "pod-security.kubernetes.io/enforce": "privileged"})  # the node agent mounts host paths
        in_ns = child_opts(self, provider, depends_on=[ns])
        # Velero's metrics port is 8085 (chart 12.1.0 metrics.service.port).
        guard_namespace(self, provider, NAMESPACE, ns, [object_storage_flow(platform), metrics(*VELERO.metrics_ports)])
        if with_secret and credentials is not None:
            # pulumi-kubernetes' own Secret class: it keeps `data`/`stringData` secret in state and previews.
            k8s.core.v1.Secret(named("credentials"), metadata=metadata(CREDENTIALS, NAMESPACE),
                               string_data={"cloud": pulumi.Output.secret(credentials)}, opts=in_ns)
        chart = helm_chart(VELERO.charts[0].release, VELERO_CHART, NAMESPACE,
                           chart_values(platform, facts, with_secret, identity), in_ns)
        after_chart = child_opts(self, provider, depends_on=[chart])
        kube_object("location", API, "BackupStorageLocation", metadata(LOCATION, NAMESPACE), after_chart,
                    spec=location_spec(facts, with_secret))
        kube_object("volume-policy", "v1", "ConfigMap", metadata(VOLUME_POLICY, NAMESPACE), in_ns,
                    data={"policy.yaml": yaml.safe_dump(volume_policy(storage), sort_keys=False)})
        for schedule in facts.schedules:
            kube_object(f"schedule-{schedule.tier}", API, "Schedule", metadata(schedule.tier, NAMESPACE),
                        after_chart, spec=schedule_spec(schedule))
        for team in platform.teams:
            for team_ns in team.namespaces:
                kube_object(f"{team_ns}-backup-marker", "v1", "ConfigMap",
                            metadata(MARKER, team_ns, {MARKER_LABEL: "true"}),
                            child_opts(self, provider, depends_on=[team_namespaces[team_ns]]),
                            data={"namespace": team_ns, "team": team.name})
        self._drill(platform, facts, in_ns)
        self._janitor(platform, team_namespaces, in_ns)
        self.register_outputs({"velero": VELERO_IMAGE, "bucket": facts.bucket,
                               "schedules": [s.tier for s in facts.schedules]})

    def _account(self, name: str, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        return kube_object(f"sa-{name}", "v1", "ServiceAccount", metadata(name, NAMESPACE), opts)

    def _drill(self, platform: Platform, facts: BackupFacts, in_ns: pulumi.ResourceOptions) -> None:
        """Exactly what the drill needs: create/get/delete Restores and get Backups (the restored backup's
        age) in velero; get and delete its own drill namespaces; read the marker ConfigMap."""
        account = self._account(DRILL, in_ns)
        subject = [{"kind": "ServiceAccount", "name": DRILL, "namespace": NAMESPACE}]
        role = kube_object("drill-role", RBAC_API, "Role", metadata(DRILL, NAMESPACE), in_ns,
                           rules=[policy_rule(["velero.io"], ["restores"], ["create", "get", "delete"]),
                                  policy_rule(["velero.io"], ["backups"], ["get"])])
        kube_object("drill-binding", RBAC_API, "RoleBinding", metadata(DRILL, NAMESPACE),
                    child_opts(self, self.provider, depends_on=[role, account]), subjects=subject,
                    roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": DRILL})
        cluster_role = kube_object("drill-cluster-role", RBAC_API, "ClusterRole", metadata(f"trainyard-{DRILL}"),
                                   child_opts(self, self.provider), rules=[
            policy_rule([""], ["namespaces"], ["get", "delete"], sorted(facts.drill_namespaces.values())),
            policy_rule([""], ["configmaps"], ["get"], [MARKER]),
        ])
        kube_object("drill-cluster-binding", RBAC_API, "ClusterRoleBinding", metadata(f"trainyard-{DRILL}"),
                    child_opts(self, self.provider, depends_on=[cluster_role, account]), subjects=subject,
                    roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": f"trainyard-{DRILL}"})
        kube_object("drill-scratch-volumes", "v1", "ConfigMap", metadata(SCRATCH_MODIFIER, NAMESPACE), in_ns,
                    data={"modifiers.yaml": yaml.safe_dump(scratch_modifier(), sort_keys=False)})
        drill = platform.spec.backup.drill
        env = {
            "RESTORE": json.dumps(drill_restore(facts), sort_keys=True),
            "CHECKS": " ".join(f"{src}={dst}" for src, dst in facts.drill_namespaces.items()),
            "MARKER": MARKER,
            "TIMEOUT_SECONDS": str(drill.timeout_minutes * 60),
            "TIER": facts.drill_schedule.tier,
            "MAX_BACKUP_AGE_HOURS": str(facts.drill_max_age_hours),
        }
        kube_object("drill", "batch/v1", "CronJob", metadata(DRILL, NAMESPACE),
                    child_opts(self, self.provider, depends_on=[account, role]),
                    spec=cron_job(drill.schedule, DRILL, DRILL_SCRIPT, env, drill.job_deadline_seconds,
                                  retries=0))

    def _janitor(self, platform: Platform, team_namespaces: Mapping[str, pulumi.Resource],
                 in_ns: pulumi.ResourceOptions) -> None:
        """Deletes finished TrainJobs after the stack's TTL (their JobSets and pods go with them): Trainer
        2.2 TrainJobs have no TTL of their own."""
        account = self._account(JANITOR, in_ns)
        role = kube_object("janitor-role", RBAC_API, "ClusterRole", metadata(JANITOR), child_opts(self, self.provider),
                           rules=[policy_rule(["trainer.kubeflow.org"], ["trainjobs"], ["list", "delete"])])
        for team_ns, ns_resource in sorted(team_namespaces.items()):
            kube_object(f"{team_ns}-janitor", RBAC_API, "RoleBinding", metadata(JANITOR, team_ns),
                        child_opts(self, self.provider, depends_on=[role, account, ns_resource]),
                        subjects=[{"kind": "ServiceAccount", "name": JANITOR, "namespace": NAMESPACE}],
                        roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": JANITOR})
        cleanup = platform.spec.storage.cleanup
        env = {"NAMESPACES": " ".join(sorted(team_namespaces)),
               "TTL_HOURS": cleanup.finished_train_jobs.removesuffix("h"), "FINISHED": FINISHED}
        kube_object("janitor", "batch/v1", "CronJob", metadata(JANITOR, NAMESPACE),
                    child_opts(self, self.provider, depends_on=[account]),
                    spec=cron_job(cleanup.schedule, JANITOR, JANITOR_SCRIPT, env, 1800, retries=2))
