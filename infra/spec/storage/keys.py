"""The team bucket's keys in the team's other namespaces, on rook-ceph: which claim Secret is copied where, and what
each copy looks like (infra/platform/storage.py bucket_keys copies them; docs/pipelines.md, docs/model-lifecycle.md).

Rook writes an ObjectBucketClaim's keys as a Secret named after the claim, in the claim's namespace only (the team's
first). Two readers need them elsewhere under the same name:
- Pipelines' runs in the team's other namespaces (their `kfp-launcher` and Argo artifact repository name the Secret:
  infra/spec/pipelines/model.py);
- KServe's storage initializer in the models namespace, which reads the Secrets listed on the predictor's account
  (the team's data account) that have the key AWS_SECRET_ACCESS_KEY, and the RGW endpoint from their annotations
  (KS@v0.16.0 pkg/credentials/service_account_credentials.go:260-293, s3/s3_secret.go:62-65 and 73-108).
On the clouds each namespace's data account reaches the bucket by workload identity: nothing is copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.spec.storage.model import StorageFacts

# The keys Rook writes into an ObjectBucketClaim's Secret (named as the claim), which KServe's vendored
# inferenceservice-config (s3AccessKeyIDName, s3SecretAccessKeyName) and the KFP launcher read too.
OBC_ACCESS_KEY, OBC_SECRET_KEY = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"
KEYS = (OBC_ACCESS_KEY, OBC_SECRET_KEY)
RGW_REGION = "us-east-1"  # what the RGW answers to, as Pipelines' launcher names it (infra/spec/pipelines/model.py)
KSERVE_S3 = "serving.kserve.io"


@dataclass(frozen=True)
class KeyTarget:
    """One copy: the namespace, and the Secret's annotations there (KServe's endpoint on a models namespace, whose
    data account lists the Secret: `served`), as (key, value) pairs so that the facts stay hashable."""

    namespace: str
    annotations: tuple[tuple[str, str], ...] = ()

    @property
    def served(self) -> bool:
        """KServe reads this copy: the namespace's data account lists it (KServe reads no other Secret)."""
        return bool(self.annotations)


@dataclass(frozen=True)
class KeyCopy:
    """A team bucket claim's Secret `secret` in `source` (the claim's namespace), copied under the same name into
    `targets`."""

    team: str
    secret: str
    source: str
    targets: tuple[KeyTarget, ...]


def kserve_annotations(rgw_url: str) -> tuple[tuple[str, str], ...]:
    """The RGW as KServe 0.16.0 reads it from a Secret's annotations (s3/utils.go BuildS3EnvVars): host:port (KServe
    adds http:// when s3-usehttps is "0"), and the region."""
    return ((f"{KSERVE_S3}/s3-endpoint", rgw_url.removeprefix("http://")), (f"{KSERVE_S3}/s3-usehttps", "0"),
            (f"{KSERVE_S3}/s3-region", RGW_REGION))


def derive_key_copies(storage: StorageFacts, pipelines: bool, serving: Mapping[str, str]) -> tuple[KeyCopy, ...]:
    """`pipelines`: the stack runs Pipelines (every other namespace of a team gets the keys); `serving`: team -> its
    models namespace (that one gets them, annotated for KServe)."""
    if storage.profile != "rook-ceph":
        return ()
    assert storage.rgw_url is not None
    copies = []
    for bucket in storage.buckets:
        if bucket.team is None:
            continue
        served = serving.get(bucket.team)
        targets = tuple(KeyTarget(ns, kserve_annotations(storage.rgw_url) if ns == served else ())
                        for ns in bucket.readers if ns != bucket.namespace and (pipelines or ns == served))
        if targets:
            copies.append(KeyCopy(bucket.team, bucket.key, bucket.namespace, targets))
    return tuple(copies)
