"""The team bucket's keys for KServe's storage initializer on rook-ceph stacks (docs/model-lifecycle.md
"Credentials of the storage initializer").

On rook-ceph a team's bucket is an ObjectBucketClaim in the team's first namespace, and its keys are the Secret Rook
writes there under the claim's name; a Secret cannot be read across namespaces, so the predictors of `<team>-models`
would download with no endpoint and no keys. KServe 0.16.0 gives the storage initializer the S3 keys of every Secret
listed on the predictor's ServiceAccount (KS@v0.16.0:pkg/credentials/service_account_credentials.go: a Secret with
the key `s3SecretAccessKeyName`, which the vendored inferenceservice-config names AWS_SECRET_ACCESS_KEY, as Rook
does), and the endpoint from that Secret's annotations (pkg/credentials/s3/s3_secret.go, utils.go BuildS3EnvVars:
`serving.kserve.io/s3-endpoint` host:port, `s3-usehttps` "0" for http, `s3-region`).

So each models namespace gets a Secret named as the claim (TeamModels.credentials), created here with those
annotations and no keys, listed on the team's data account there (infra/platform/storage.py); a Job in the Rook
namespace copies the claim's two keys into it, as the bucket-versioning Job reads them: its account may get that
one claim Secret and get or patch that one target Secret, nothing else (a Role cannot narrow `create` to a name,
hence the target exists first). The keys are the claim's own: the models namespace reads and writes the same bucket
as the team's other namespaces, no more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata, policy_rule
from infra.platform.storage import JOB_RESOURCES, RESTRICTED
from infra.spec import Platform
from infra.spec.models.model import TeamModels
from infra.spec.pipelines.model import OBC_ACCESS_KEY, OBC_SECRET_KEY
from infra.spec.versions import WEB_BINDER_IMAGE

ACCOUNT = "model-bucket-credentials"
KSERVE_S3 = "serving.kserve.io"
REGION = "us-east-1"  # what Pipelines' launcher names for the RGW (infra/spec/pipelines/model.py)
# A pinned image with both kubectl and a shell (the web binder's, alpine/k8s).
IMAGE = WEB_BINDER_IMAGE
# The claim Secret's values are base64 already: they go into the target's `data` as they are.
COPY_KEYS = r"""set -eu
patch='{"data":{'
sep=''
for key in $KEYS; do
  value=$(kubectl -n "$CLAIM_NAMESPACE" get secret "$CLAIM" -o "jsonpath={.data.$key}")
  [ -n "$value" ] || { echo "claim Secret $CLAIM_NAMESPACE/$CLAIM has no $key yet" >&2; exit 1; }
  patch="$patch$sep\"$key\":\"$value\""
  sep=','
done
kubectl -n "$TARGET_NAMESPACE" patch secret "$CLAIM" --type merge -p "$patch}}"
"""


def endpoint(rgw_url: str) -> str:
    """host:port of the RGW, as KServe's s3-endpoint annotation wants it (it adds the scheme)."""
    return rgw_url.removeprefix("http://")


def secret_annotations(rgw_url: str) -> dict[str, str]:
    return {f"{KSERVE_S3}/s3-endpoint": endpoint(rgw_url), f"{KSERVE_S3}/s3-usehttps": "0",
            f"{KSERVE_S3}/s3-region": REGION}


def copy_job(team: TeamModels, claim_namespace: str) -> dict[str, Any]:
    env = [{"name": "CLAIM", "value": team.credentials}, {"name": "CLAIM_NAMESPACE", "value": claim_namespace},
           {"name": "TARGET_NAMESPACE", "value": team.namespace},
           {"name": "KEYS", "value": f"{OBC_ACCESS_KEY} {OBC_SECRET_KEY}"}, {"name": "HOME", "value": "/tmp"}]
    return {
        "backoffLimit": 20,  # the claim's Secret appears once Rook has provisioned the bucket
        "template": {"spec": {
            "restartPolicy": "OnFailure", "serviceAccountName": ACCOUNT,
            "containers": [{"name": "copy", "image": IMAGE, "command": ["/bin/sh", "-c", COPY_KEYS], "env": env,
                            "resources": JOB_RESOURCES, "securityContext": RESTRICTED}]}},
    }


def teams_with_credentials(platform: Platform) -> list[tuple[TeamModels, str]]:
    """(team, the namespace of its bucket's claim) for every team whose models namespace needs the keys."""
    if platform.models is None:
        return []
    claims = {b.key: b.namespace for b in platform.storage.buckets if b.team}
    return [(team, claims[team.credentials]) for team in platform.models.teams if team.credentials]


def bucket_credentials(parent: pulumi.Resource, platform: Platform, provider: k8s.Provider,
                       team_namespaces: Mapping[str, pulumi.Resource]) -> None:
    teams = teams_with_credentials(platform)
    if not teams:
        return
    rgw, rook = platform.storage.rgw_url, platform.spec.storage.rook_ceph.namespace
    assert rgw is not None
    account = kube_object(ACCOUNT, "v1", "ServiceAccount", metadata(ACCOUNT, rook), child_opts(parent, provider))
    subject = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": rook}]
    for team, claim_ns in teams:
        name, ns = f"{ACCOUNT}-{team.team}", team.namespace
        target = kube_object(f"{ns}-{team.credentials}", "v1", "Secret",
                             metadata(team.credentials, ns, annotations=secret_annotations(rgw)),
                             child_opts(parent, provider, [team_namespaces[ns]]), type="Opaque")
        bindings: list[pulumi.Resource] = []
        for where, verbs, after in ((claim_ns, ["get"], team_namespaces[claim_ns]), (ns, ["get", "patch"], target)):
            role = kube_object(f"{name}-{where}", RBAC_API, "Role", metadata(name, where),
                               child_opts(parent, provider, [after]),
                               rules=[policy_rule([""], ["secrets"], verbs, [team.credentials])])
            bindings.append(kube_object(f"{name}-{where}-binding", RBAC_API, "RoleBinding", metadata(name, where),
                                        child_opts(parent, provider, [role, account]), subjects=subject,
                                        roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": name}))
        kube_object(f"{name}-copy", "batch/v1", "Job", metadata(name, rook), child_opts(parent, provider, bindings),
                    spec=copy_job(team, claim_ns))
