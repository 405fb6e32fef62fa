"""Storage: StorageClasses and VolumeSnapshotClasses per environment, each team's retained dataset and
checkpoint volumes, the Ceph RGW bucket claims on-prem, and in the clouds each team's data service account with
the workload identity the cluster layer made for its bucket (the buckets themselves are the cluster layer's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.contract import ClusterContract
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata
from infra.spec import Platform
from infra.spec.hybrid.burst_data import pull_secrets
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
    return [{"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get"],
             "resourceNames": [bucket.key]}]


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
        # rook-ceph: the data account of a models namespace lists the copy of the bucket's keys that KServe's storage
        # initializer reads (infra/platform/bucket_keys.py)
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
