"""Storage: StorageClasses and VolumeSnapshotClasses per environment, each team's retained dataset and
checkpoint volumes, the Ceph RGW bucket claims on-prem and their keys copied where the team needs them, and in the
clouds each team's data service account with the workload identity the cluster layer made for its bucket (the
buckets themselves are the cluster layer's).

The bucket keys' copy (rook-ceph; StorageFacts.key_copies, infra/spec/storage/keys.py): one account, one script,
run every ten minutes and once at `pulumi up`. Each target is a Secret named as the claim, declared with the two
keys present but empty, and Pulumi ignoring its data afterwards (the data is the copy's). Present keys matter to
KServe: its pod webhook injects the storage initializer's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY as
`valueFrom.secretKeyRef` only when the Secret listed on the predictor's account has the key AWS_SECRET_ACCESS_KEY
at the pod's creation (KS@v0.16.0 pkg/credentials/service_account_credentials.go:291-295, s3/s3_secret.go:83-106),
and the kubelet resolves a secretKeyRef each time it starts a container (kubelet_pods.go makeEnvironmentVariables).
So a predictor created before the copy fails its download with empty keys, and its storage initializer's next
restart reads the copied ones: no pod to delete by hand. The copier runs in the Rook namespace, beside the
bucket-versioning Jobs (no sidecar is injected there; a team namespace admits only queued work). Its account may get
each team's one claim Secret in the claim's namespace and patch that Secret's copies (kubectl patch sends one PATCH,
no GET): nothing else; a Role cannot narrow `create` to a name, hence the targets exist first. Its pods reach DNS and
the API server only (NetworkPolicy bucket-keys-egress).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.contract import ClusterContract
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata, policy_rule
from infra.platform.network import api_server_egress, dns_egress
from infra.spec import Platform
from infra.spec.hybrid.burst_data import pull_secrets
from infra.spec.storage.keys import KEYS as CLAIM_KEYS
from infra.spec.storage.keys import KeyCopy, KeyTarget
from infra.spec.storage.model import TEAM_DATA_ACCOUNT, VELERO_VSC_LABEL, Bucket, Klass, StorageFacts, Volume
from infra.spec.versions import AWS_CLI_IMAGE, KUBECTL_IMAGE
from infra.vocabulary import BUCKET_LABEL, BUCKET_NAMESPACE_LABEL, VOLUME_LABEL

OBC_API = "objectbucket.io/v1alpha1"
SNAPSHOT_API = "snapshot.storage.k8s.io/v1"
STORAGE_API = "storage.k8s.io/v1"
# Pods of a restricted namespace (team namespaces enforce PSA `restricted`).
RESTRICTED = {
    "runAsNonRoot": True, "runAsUser": 65534, "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
}
JOB_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}


def cron_job(schedule: str, account: str, script: str, env: Mapping[str, str], deadline: int,
             retries: int) -> dict[str, Any]:
    """A platform CronJob's spec: one restricted kubectl container running `script` as `account`."""
    container = {
        "name": "run", "image": KUBECTL_IMAGE, "command": ["/bin/bash", "-c", script],
        "env": [{"name": "HOME", "value": "/tmp"}, *({"name": k, "value": v} for k, v in env.items())],
        "resources": JOB_RESOURCES, "securityContext": RESTRICTED,
    }
    return {
        "schedule": schedule, "concurrencyPolicy": "Forbid",
        "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
        "jobTemplate": {"spec": {"backoffLimit": retries, "activeDeadlineSeconds": deadline, "template": {"spec": {
            "serviceAccountName": account, "restartPolicy": "Never", "containers": [container]}}}},
    }


def storage_class(klass: Klass, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A StorageClass's top-level fields."""
    fields = {
        "provisioner": klass.provisioner,
        "parameters": dict(parameters),
        "reclaimPolicy": klass.reclaim,
        "volumeBindingMode": klass.binding,
        "allowVolumeExpansion": klass.expandable,
    }
    if klass.mount_options:
        fields["mountOptions"] = list(klass.mount_options)
    return fields


def snapshot_class_objects(facts: StorageFacts) -> list[dict[str, Any]]:
    """One VolumeSnapshotClass per CSI driver with snapshots, labelled as the one Velero uses for it.
    Retain: a snapshot outlives the namespace it was taken from."""
    return [{
        "apiVersion": SNAPSHOT_API, "kind": "VolumeSnapshotClass",
        "metadata": metadata(f"{vsc.name}-velero", labels={VELERO_VSC_LABEL: "true"}),
        "driver": vsc.driver, "deletionPolicy": "Retain",
        **({"parameters": dict(vsc.parameters)} if vsc.parameters else {}),
    } for vsc in facts.snapshot_classes]


def claim_spec(volume: Volume, klass: Klass) -> Any:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": klass.name,
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.bucket:
        spec["volumeName"] = static_volume_name(volume)
    return spec


def static_volume_name(volume: Volume) -> str:
    return f"{volume.namespace}-{volume.name}"


VERSIONING_ACCOUNT = "bucket-versioning"
CREDENTIALS_DIR = "/claim"
# The init container copies the claim's Secret and ConfigMap keys (written by Rook under the claim's name) to
# a memory volume, one file per key; the job reads them back. Only this ServiceAccount may get those two.
COPY_CLAIM = r"""set -euo pipefail
for key in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; do
  kubectl -n "$CLAIM_NAMESPACE" get secret "$CLAIM" -o "jsonpath={.data.$key}" | base64 -d > "$DIR/$key"
done
for key in BUCKET_HOST BUCKET_PORT BUCKET_NAME; do
  kubectl -n "$CLAIM_NAMESPACE" get configmap "$CLAIM" -o "jsonpath={.data.$key}" > "$DIR/$key"
done
"""
SET_VERSIONING = r"""set -euo pipefail
for file in "$DIR"/*; do export "$(basename "$file")=$(cat "$file")"; done
aws s3api put-bucket-versioning --bucket "$BUCKET_NAME" --versioning-configuration Status=Enabled \
  --endpoint-url "http://$BUCKET_HOST:$BUCKET_PORT"
"""


def versioning_job(bucket: Bucket, namespace: str) -> Any:
    """Ceph RGW bucket claims cannot ask for versioning (Rook 1.20): a job sets it with the claim's own
    credentials and endpoint. It runs in the Rook namespace, not the claim's: a team namespace admits only
    queued work (a platform job there would wait behind the team's quota, or need an exemption)."""
    env = [{"name": "CLAIM", "value": bucket.key}, {"name": "CLAIM_NAMESPACE", "value": namespace},
           {"name": "DIR", "value": CREDENTIALS_DIR}, {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
           {"name": "HOME", "value": "/tmp"}]
    mounts = [{"name": "claim", "mountPath": CREDENTIALS_DIR}]

    def container(name: str, image: str, script: str) -> dict[str, Any]:
        return {"name": name, "image": image, "command": ["/bin/bash", "-c", script], "env": env,
                "volumeMounts": mounts, "resources": JOB_RESOURCES, "securityContext": RESTRICTED}
    return {
        "backoffLimit": 20,  # the claim's Secret appears once Rook has provisioned the bucket
        "template": {
            "metadata": {"labels": {BUCKET_LABEL: bucket.key}},
            "spec": {
                "restartPolicy": "OnFailure",
                "serviceAccountName": VERSIONING_ACCOUNT,
                "initContainers": [container("claim", KUBECTL_IMAGE, COPY_CLAIM)],
                "containers": [container("versioning", AWS_CLI_IMAGE, SET_VERSIONING)],
                "volumes": [{"name": "claim", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
            },
        },
    }


def claim_reader(bucket: Bucket) -> list[dict[str, Any]]:
    """Role rules: read the one Secret and ConfigMap that Rook writes for the claim."""
    return [policy_rule([""], ["secrets", "configmaps"], ["get"], [bucket.key])]


KEYS_ACCOUNT = "bucket-keys"
KEYS_SCHEDULE_MINUTES = 10  # a claim bound later, or bound again with new keys, reaches the targets within that
KEYS_FIRST_RUN = f"{KEYS_ACCOUNT}-at-up"  # the Job `pulumi up` creates: the keys need not wait for the schedule
KEYS_FIRST_RUN_RETRIES = 20  # the claim's Secret appears once Rook has provisioned the bucket
KEYS_POD_LABELS = {"app": KEYS_ACCOUNT, "sidecar.istio.io/inject": "false"}
# One "<claim namespace>/<secret>=<target namespace>" per copy. A claim Secret missing a key fails that copy (nothing
# half-copied) and the run, after the other copies; the values stay off the command line (the patch goes by stdin).
COPY_KEYS = r"""set -euo pipefail
failed=""
for pair in $COPIES; do
  source="${pair%%=*}"; target="${pair#*=}"; ns="${source%%/*}"; secret="${source#*/}"
  data=""
  for key in $KEYS; do
    value=$(kubectl -n "$ns" get secret "$secret" -o "jsonpath={.data.$key}") || value=""
    if [ -z "$value" ]; then data=""; echo "no $key in $source yet (has Rook bound the claim?)"; break; fi
    data="$data${data:+,}\"$key\":\"$value\""
  done
  if [ -z "$data" ]; then failed=1; continue; fi
  printf '{"data": {%s}}' "$data" | kubectl -n "$target" patch secret "$secret" --type merge --patch-file /dev/stdin \
    >/dev/null || { echo "cannot write $target/$secret"; failed=1; continue; }
  echo "copied $source to $target"
done
[ -z "$failed" ]
"""


def key_copier(copies: tuple[KeyCopy, ...]) -> dict[str, Any]:
    """The copier CronJob's spec; its pods carry KEYS_POD_LABELS, which its egress policy selects."""
    pairs = " ".join(f"{c.source}/{c.secret}={t.namespace}" for c in copies for t in c.targets)
    spec = cron_job(f"*/{KEYS_SCHEDULE_MINUTES} * * * *", KEYS_ACCOUNT, COPY_KEYS,
                    {"COPIES": pairs, "KEYS": " ".join(CLAIM_KEYS)}, 300, retries=2)
    spec["jobTemplate"]["spec"]["template"]["metadata"] = {"labels": dict(KEYS_POD_LABELS)}
    return spec


def first_key_copy(cron: dict[str, Any]) -> dict[str, Any]:
    """The copier's Job, run once at `pulumi up`, retried until Rook has bound the claims (no deadline)."""
    job = {key: value for key, value in cron["jobTemplate"]["spec"].items() if key != "activeDeadlineSeconds"}
    return {**job, "backoffLimit": KEYS_FIRST_RUN_RETRIES}


def key_copier_egress() -> dict[str, Any]:
    """The copier's pods reach DNS and the API server, nothing else."""
    return {"podSelector": {"matchLabels": {"app": KEYS_ACCOUNT}}, "policyTypes": ["Egress"], "egress": [
        dns_egress(), api_server_egress()]}


def earlier_place(target: KeyTarget, secret: str, stack: str, project: str) -> pulumi.Alias:
    """Where a copy's Secret was declared before the storage layer owned the copier: a models namespace's by the
    serving component, the others' by Pipelines'. The alias keeps a deployed stack's Secret (and its copied keys)
    in place on `pulumi up` instead of creating it again under the new parent and deleting the old one, which
    would delete the object both name."""
    owner, component, name = (("Serving", "serving", f"{target.namespace}-{secret}") if target.served
                              else ("Pipelines", "pipelines", f"{target.namespace}-{secret}-keys"))
    return pulumi.Alias(name=named(name),
                        parent=f"urn:pulumi:{stack}::{project}::trainyard:platform:{owner}::{named(component)}")


def bucket_keys(parent: pulumi.Resource, platform: Platform, provider: k8s.Provider,
                team_namespaces: Mapping[str, pulumi.Resource]) -> None:
    """The copies' target Secrets, the copier's account and rights, the copier (CronJob and first run), its egress."""
    copies = platform.storage.key_copies
    rook = platform.spec.storage.rook_ceph.namespace
    account = kube_object(f"sa-{KEYS_ACCOUNT}", "v1", "ServiceAccount", metadata(KEYS_ACCOUNT, rook),
                          child_opts(parent, provider))
    subject = [{"kind": "ServiceAccount", "name": KEYS_ACCOUNT, "namespace": rook}]
    bindings: list[pulumi.Resource] = []
    for copy in copies:
        rights = [(copy.source, "get", team_namespaces[copy.source])]
        for target in copy.targets:
            # Both keys present and empty until the copy writes them (the module docstring says why).
            secret = kube_object(
                f"{target.namespace}-{copy.secret}-keys", "v1", "Secret",
                metadata(copy.secret, target.namespace, annotations=dict(target.annotations)),
                child_opts(parent, provider, [team_namespaces[target.namespace]],
                           ignore_changes=["data", "stringData"],
                           aliases=[earlier_place(target, copy.secret, pulumi.get_stack(), pulumi.get_project())]),
                type="Opaque", data={key: "" for key in CLAIM_KEYS})
            rights.append((target.namespace, "patch", secret))
        for where, verb, after in rights:
            role = kube_object(f"{where}-{KEYS_ACCOUNT}-role", RBAC_API, "Role", metadata(KEYS_ACCOUNT, where),
                               child_opts(parent, provider, [after]),
                               rules=[policy_rule([""], ["secrets"], [verb], [copy.secret])])
            bindings.append(kube_object(
                f"{where}-{KEYS_ACCOUNT}-binding", RBAC_API, "RoleBinding", metadata(KEYS_ACCOUNT, where),
                child_opts(parent, provider, [role, account]), subjects=subject,
                roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": KEYS_ACCOUNT}))
    kube_object(f"{rook}-{KEYS_ACCOUNT}-egress", NETWORKING_API, "NetworkPolicy",
                metadata(f"{KEYS_ACCOUNT}-egress", rook), child_opts(parent, provider), spec=key_copier_egress())
    cron = key_copier(copies)
    kube_object(KEYS_ACCOUNT, "batch/v1", "CronJob", metadata(KEYS_ACCOUNT, rook),
                child_opts(parent, provider, bindings), spec=cron)
    kube_object(KEYS_FIRST_RUN, "batch/v1", "Job", metadata(KEYS_FIRST_RUN, rook),
                child_opts(parent, provider, bindings), spec=first_key_copy(cron))


def object_store_egress(namespace: str) -> Any:
    """Team pods reach the Ceph RGW that serves their dataset buckets."""
    return {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [{"to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "podSelector": {"matchLabels": {"app": "rook-ceph-rgw"}},
        }]}],
    }


class Storage(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, cluster: ClusterContract,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Storage", name, None, opts)
        self.facts = facts = platform.storage
        self.provider = provider = cluster.provider
        self.team_namespaces = team_namespaces
        self.rook = platform.spec.storage.rook_ceph
        self.bucket_names = {bucket.key: bucket.name for bucket in facts.buckets}
        classes = {}
        for klass in facts.classes:
            parameters = {**klass.parameters, **cluster.storage_parameters.get(klass.provisioner, {})}
            classes[klass.name] = kube_object(f"sc-{klass.name}", STORAGE_API, "StorageClass", metadata(klass.name),
                                              child_opts(self, provider), **storage_class(klass, parameters))
        if facts.snapshot_classes:
            # The snapshot.storage.k8s.io CRDs are not in the CRD set `validate` reads, so the classes
            # go through a ConfigGroup (see snapshot_class_objects for their content).
            k8s.yaml.v2.ConfigGroup(named("snapshot-classes"), objs=snapshot_class_objects(facts),
                                    opts=child_opts(self, provider))
        for volume in facts.volumes:
            self._volume(volume, facts.klass(volume.klass), classes[volume.klass])
        if facts.profile == "rook-ceph":
            self._ceph_buckets(facts)
        if facts.key_copies:  # rook-ceph: the claims' keys where the team's other namespaces need them
            bucket_keys(self, platform, self.provider, team_namespaces)
        # rook-ceph: the data account of a models namespace lists the copy of the bucket's keys that KServe's storage
        # initializer reads (bucket_keys)
        keys = {t.namespace: c.secret for c in facts.key_copies for t in c.targets if t.served}
        self._data_accounts(cluster, pull_secrets(platform.member.data if platform.member else None), keys)
        self.register_outputs({"profile": facts.profile, "classes": sorted(classes),
                               "buckets": sorted(self.bucket_names.values())})

    def _volume(self, volume: Volume, klass: Klass, klass_resource: pulumi.Resource) -> None:
        labels = {VOLUME_LABEL: volume.name, "trainyard.io/team": volume.team}
        depends: list[pulumi.Resource] = [klass_resource, self.team_namespaces[volume.namespace]]
        if volume.bucket:
            pv = kube_object(
                f"pv-{static_volume_name(volume)}", "v1", "PersistentVolume",
                metadata(static_volume_name(volume), labels=labels),
                child_opts(self, self.provider, depends_on=[klass_resource], retain_on_delete=True),
                spec={
                    "accessModes": ["ReadWriteMany"], "capacity": {"storage": volume.size},
                    "persistentVolumeReclaimPolicy": "Retain", "storageClassName": klass.name,
                    "mountOptions": list(klass.mount_options),
                    "csi": {"driver": klass.provisioner, "volumeHandle": volume.bucket},
                    "claimRef": {"namespace": volume.namespace, "name": volume.name},
                })
            depends.append(pv)
        kube_object(f"pvc-{volume.namespace}-{volume.name}", "v1", "PersistentVolumeClaim",
                    metadata(volume.name, volume.namespace, labels),
                    child_opts(self, self.provider, depends_on=depends, retain_on_delete=True),
                    spec=claim_spec(volume, klass))

    def _ceph_buckets(self, facts: StorageFacts) -> None:
        rook = self.rook.namespace
        assert facts.bucket_class is not None
        ceph = self.provider
        bucket_class = kube_object(
            "sc-object-buckets", STORAGE_API, "StorageClass", metadata(facts.bucket_class), child_opts(self, ceph),
            provisioner=f"{rook}.ceph.rook.io/bucket", reclaimPolicy="Retain",
            parameters={"objectStoreName": self.rook.object_store, "objectStoreNamespace": rook})
        account = kube_object("sa-bucket-versioning", "v1", "ServiceAccount", metadata(VERSIONING_ACCOUNT, rook),
                              child_opts(self, ceph))
        subject = [{"kind": "ServiceAccount", "name": VERSIONING_ACCOUNT, "namespace": rook}]
        for bucket in facts.buckets:
            namespace = bucket.namespace if bucket.team else rook
            depends: list[pulumi.Resource] = [bucket_class]
            if bucket.team:
                depends.append(self.team_namespaces[namespace])
            claim = {
                "apiVersion": OBC_API, "kind": "ObjectBucketClaim",
                "metadata": metadata(bucket.key, namespace, {BUCKET_LABEL: bucket.key}),
                "spec": {"bucketName": bucket.name, "storageClassName": facts.bucket_class},
            }
            # Not in the CRD set `validate` reads (objectbucket.io): a ConfigGroup, protected like a bucket.
            obc = k8s.yaml.v2.ConfigGroup(named(f"obc-{bucket.key}"), objs=[claim],
                                          opts=child_opts(self, ceph, depends_on=depends, protect=True))
            name = f"{VERSIONING_ACCOUNT}-{bucket.key}"
            role = kube_object(f"versioning-role-{bucket.key}", RBAC_API, "Role", metadata(name, namespace),
                               child_opts(self, ceph, depends_on=depends), rules=claim_reader(bucket))
            binding = kube_object(f"versioning-binding-{bucket.key}", RBAC_API, "RoleBinding",
                                  metadata(name, namespace), child_opts(self, ceph, depends_on=[role, account]),
                                  subjects=subject, roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": name})
            labels = {BUCKET_LABEL: bucket.key, BUCKET_NAMESPACE_LABEL: namespace}
            kube_object(f"versioning-{bucket.key}", "batch/v1", "Job", metadata(name, rook, labels),
                        child_opts(self, ceph, depends_on=[obc, binding]), spec=versioning_job(bucket, namespace))
        for team_ns, ns_resource in sorted(self.team_namespaces.items()):
            kube_object(f"{team_ns}-allow-ceph-rgw", NETWORKING_API, "NetworkPolicy",
                        metadata("allow-object-store", team_ns), child_opts(self, ceph, depends_on=[ns_resource]),
                        spec=object_store_egress(rook))

    def _data_accounts(self, cluster: ClusterContract, pull: tuple[str, ...], keys: Mapping[str, str]) -> None:
        """The account every training pod of a team namespace runs as (the runtimes name it), carrying the
        cluster's workload identity for the team bucket where there is one, and `pull` Secrets."""
        for namespace, ns_resource in sorted(self.team_namespaces.items()):
            identity = cluster.identity(namespace, TEAM_DATA_ACCOUNT)
            meta = metadata(TEAM_DATA_ACCOUNT, namespace)
            if identity is not None and identity.annotations:  # outputs (a client id): beside the metadata helper
                meta["annotations"] = dict(identity.annotations)
            # A burst worker's private registries: the kubelet pulls every runtime pod's images with these.
            pulls = {"imagePullSecrets": [{"name": name} for name in pull]} if pull else {}
            secrets = {"secrets": [{"name": keys[namespace]}]} if namespace in keys else {}
            kube_object(f"sa-{namespace}-{TEAM_DATA_ACCOUNT}", "v1", "ServiceAccount", meta,
                        child_opts(self, self.provider, depends_on=[ns_resource]), **pulls, **secrets)
