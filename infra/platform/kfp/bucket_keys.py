"""The team bucket's keys in every namespace of the team, on rook-ceph, so that runs in a team's second namespace
(onprem-lab's `speech-eval`, the `-models` namespaces) have the team's artifact store too.

Rook writes an ObjectBucketClaim's credentials as a Secret named after the claim in the claim's namespace only (the
team's first). Trainyard declares a Secret of that name, empty, in each of the team's other namespaces (Pulumi
ignores its data: the data is the copy's), and a CronJob in Pipelines' namespace copies the claim Secret's data into
them every ten minutes (a claim Rook binds later, or binds again with new keys, reaches them within that). Its
account may read that one Secret in the first namespace and patch that one Secret in the others: nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import PIPELINES
from infra.kit.objects import RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata, policy_rule
from infra.platform.backup import cron_job
from infra.spec.pipelines.model import KeyCopy

NAME = "pipelines-bucket-keys"
SCHEDULE = "*/10 * * * *"
# One "<first namespace>/<secret>=<other namespace>" per copy.
SCRIPT = r"""set -euo pipefail
failed=""
for pair in $COPIES; do
  source="${pair%%=*}"; target="${pair#*=}"; ns="${source%%/*}"; secret="${source#*/}"
  data=$(kubectl -n "$ns" get secret "$secret" -o jsonpath='{.data}') || data=""
  if [ -z "$data" ]; then echo "no keys in $source yet (has Rook bound the claim?)"; failed=1; continue; fi
  printf '{"data": %s}' "$data" | kubectl -n "$target" patch secret "$secret" --type merge --patch-file /dev/stdin \
    >/dev/null || { echo "cannot write $target/$secret"; failed=1; continue; }
  echo "copied $source to $target"
done
[ -z "$failed" ]
"""


def pairs(copies: tuple[KeyCopy, ...]) -> str:
    return " ".join(f"{c.source}/{c.secret}={target}" for c in copies for target in c.targets)


def copy_job(copies: tuple[KeyCopy, ...]) -> dict[str, Any]:
    """The CronJob's spec; its pods carry no sidecar (Pipelines' namespace injects them; a Job's would not end), and
    Pipelines' pod label, which their egress policies select (infra/platform/kfp/egress.py)."""
    spec = cron_job(SCHEDULE, NAME, SCRIPT, {"COPIES": pairs(copies)}, 300, retries=2)
    spec["jobTemplate"]["spec"]["template"]["metadata"] = {"labels": {
        "sidecar.istio.io/inject": "false", "application-crd-id": "kubeflow-pipelines", "app": NAME}}
    return spec


def bucket_keys(parent: pulumi.Resource, provider: k8s.Provider, copies: tuple[KeyCopy, ...],
                team_namespaces: Mapping[str, pulumi.Resource], after: pulumi.Resource,
                declared: frozenset[tuple[str, str]] = frozenset()) -> None:
    """The account, its rights in each team's namespaces, the empty Secrets and the copying CronJob. A (namespace,
    Secret) in `declared` is declared by another component (a models namespace's, with KServe's annotations: infra/
    platform/models/credentials.py): the CronJob patches it the same, the keys being the same."""
    if not copies:
        return
    ns = PIPELINES.namespace
    account = kube_object(f"sa-{NAME}", "v1", "ServiceAccount", metadata(NAME, ns),
                          child_opts(parent, provider, [after]))
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]
    for copy in copies:
        for where, verbs in ((copy.source, ["get"]), *((target, ["patch"]) for target in copy.targets)):
            created = team_namespaces[where]
            if where != copy.source and (where, copy.secret) not in declared:
                kube_object(f"{where}-{copy.secret}-keys", "v1", "Secret", metadata(copy.secret, where),
                            child_opts(parent, provider, [created], ignore_changes=["data", "stringData"]),
                            type="Opaque")
            role = kube_object(f"{where}-{NAME}-role", RBAC_API, "Role", metadata(NAME, where),
                               child_opts(parent, provider, [created]),
                               rules=[policy_rule([""], ["secrets"], verbs, [copy.secret])])
            kube_object(f"{where}-{NAME}-binding", RBAC_API, "RoleBinding", metadata(NAME, where),
                        child_opts(parent, provider, [role, account]), subjects=subject,
                        roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": NAME})
    kube_object(NAME, "batch/v1", "CronJob", metadata(NAME, ns), child_opts(parent, provider, [account]),
                spec=copy_job(copies))
