"""The team bucket's keys copied into the team's other namespaces on rook-ceph (StorageFacts.key_copies, built in
infra/spec/storage/keys.py): one account, one script, run every ten minutes and once at `pulumi up`.

Each target is a Secret named as the claim, declared here with the two keys present but empty, and Pulumi ignoring
its data afterwards (the data is the copy's). Present keys matter to KServe: its pod webhook injects the storage
initializer's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY as `valueFrom.secretKeyRef` only when the Secret listed on
the predictor's account has the key AWS_SECRET_ACCESS_KEY at the pod's creation (KS@v0.16.0
pkg/credentials/service_account_credentials.go:291-295, s3/s3_secret.go:83-106), and the kubelet resolves a
secretKeyRef each time it starts a container (kubelet_pods.go makeEnvironmentVariables). So a predictor created
before the copy fails its download with empty keys, and its storage initializer's next restart reads the copied
ones: no pod to delete by hand.

The copier runs in the Rook namespace, beside the bucket-versioning Jobs (no sidecar is injected there, and a team
namespace admits only queued work). Its account may get each team's one claim Secret in the claim's namespace and
patch that Secret's copies (kubectl patch sends one PATCH, no GET): nothing else. A Role cannot narrow `create` to a
name, hence the targets exist first. Its pods reach DNS and the API server only (NetworkPolicy bucket-keys-egress).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import NETWORKING_API, RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata, policy_rule
from infra.platform.backup import cron_job
from infra.platform.network import API_SERVER, DNS, tcp
from infra.spec import Platform
from infra.spec.storage.keys import KEYS, KeyCopy

NAME = "bucket-keys"
SCHEDULE_MINUTES = 10  # a claim bound later, or bound again with new keys, reaches the targets within that
SCHEDULE = f"*/{SCHEDULE_MINUTES} * * * *"
DEADLINE = 300  # seconds: a run is a few API calls per copy
FIRST_RUN = f"{NAME}-at-up"  # the Job `pulumi up` creates, so that the keys need not wait for the first schedule
FIRST_RUN_RETRIES = 20  # the claim's Secret appears once Rook has provisioned the bucket
POD_LABELS = {"app": NAME, "sidecar.istio.io/inject": "false"}
# One "<claim namespace>/<secret>=<target namespace>" per copy. A claim Secret missing a key fails that copy (nothing
# half-copied) and the run, after the other copies; the values stay off the command line (the patch goes by stdin).
SCRIPT = r"""set -euo pipefail
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


def pairs(copies: tuple[KeyCopy, ...]) -> str:
    return " ".join(f"{c.source}/{c.secret}={t.namespace}" for c in copies for t in c.targets)


def copier(copies: tuple[KeyCopy, ...]) -> dict[str, Any]:
    """The CronJob's spec; its pods carry POD_LABELS, which the egress policy selects."""
    spec = cron_job(SCHEDULE, NAME, SCRIPT, {"COPIES": pairs(copies), "KEYS": " ".join(KEYS)}, DEADLINE, retries=2)
    spec["jobTemplate"]["spec"]["template"]["metadata"] = {"labels": dict(POD_LABELS)}
    return spec


def first_run(cron: dict[str, Any]) -> dict[str, Any]:
    """The CronJob's Job, run once at `pulumi up`, retried until Rook has bound the claims (no deadline)."""
    job = {key: value for key, value in cron["jobTemplate"]["spec"].items() if key != "activeDeadlineSeconds"}
    return {**job, "backoffLimit": FIRST_RUN_RETRIES}


def egress() -> dict[str, Any]:
    """The copier's pods reach DNS and the API server, nothing else (what Pipelines' namespace gave it)."""
    return {"podSelector": {"matchLabels": {"app": NAME}}, "policyTypes": ["Egress"], "egress": [
        {"to": DNS.peers, "ports": [{"protocol": proto, "port": 53} for proto in ("UDP", "TCP")]},
        {"to": API_SERVER.peers, "ports": tcp(API_SERVER.ports)}]}


def copy_bucket_keys(parent: pulumi.Resource, platform: Platform, provider: k8s.Provider,
                team_namespaces: Mapping[str, pulumi.Resource]) -> None:
    """The targets, the account and its rights, the copier (CronJob and first run) and its egress policy."""
    copies = platform.storage.key_copies
    if not copies:
        return
    rook = platform.spec.storage.rook_ceph.namespace
    account = kube_object(f"sa-{NAME}", "v1", "ServiceAccount", metadata(NAME, rook), child_opts(parent, provider))
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": rook}]
    bindings: list[pulumi.Resource] = []
    for copy in copies:
        rights = [(copy.source, "get", team_namespaces[copy.source])]
        for target in copy.targets:
            # Both keys present and empty until the copy writes them (the module docstring says why).
            secret = kube_object(
                f"{target.namespace}-{copy.secret}-keys", "v1", "Secret",
                metadata(copy.secret, target.namespace, annotations=dict(target.annotations)),
                child_opts(parent, provider, [team_namespaces[target.namespace]],
                           ignore_changes=["data", "stringData"]),
                type="Opaque", data={key: "" for key in KEYS})
            rights.append((target.namespace, "patch", secret))
        for where, verb, after in rights:
            role = kube_object(f"{where}-{NAME}-role", RBAC_API, "Role", metadata(NAME, where),
                               child_opts(parent, provider, [after]),
                               rules=[policy_rule([""], ["secrets"], [verb], [copy.secret])])
            bindings.append(kube_object(f"{where}-{NAME}-binding", RBAC_API, "RoleBinding", metadata(NAME, where),
                                        child_opts(parent, provider, [role, account]), subjects=subject,
                                        roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": NAME}))
    kube_object(f"{rook}-{NAME}-egress", NETWORKING_API, "NetworkPolicy", metadata(f"{NAME}-egress", rook),
                child_opts(parent, provider), spec=egress())
    cron = copier(copies)
    kube_object(NAME, "batch/v1", "CronJob", metadata(NAME, rook), child_opts(parent, provider, bindings), spec=cron)
    kube_object(FIRST_RUN, "batch/v1", "Job", metadata(FIRST_RUN, rook), child_opts(parent, provider, bindings),
                spec=first_run(cron))
