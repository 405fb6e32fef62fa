"""The team bucket's keys for KServe's storage initializer on rook-ceph (docs/model-lifecycle.md "Credentials of the
storage initializer"), on the rendered onprem-lab and hybrid-burst: the copy in each models namespace (the storage
layer's, tests/test_bucket_keys.py) is named and annotated as KServe 0.16.0 reads it, listed on the predictor's
account, and declared with both keys present, so that a predictor created before the copy heals on its storage
initializer's next restart. Nothing of it where the data account reads the bucket by workload identity."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from infra.platform import storage
from infra.spec.storage.keys import KEYS
from tests.conftest import capture_of, kube_objects, platform_of

ROOK_STACKS = ["onprem-lab", "hybrid-burst"]
# KS@v0.16.0 pkg/credentials/s3/s3_secret.go:62-65: the annotation names; the endpoint is host:port (utils.go:43-56
# adds http:// when s3-usehttps is "0").
KSERVE = {"serving.kserve.io/s3-endpoint": "rook-ceph-rgw-my-store.rook-ceph.svc:80",
          "serving.kserve.io/s3-usehttps": "0", "serving.kserve.io/s3-region": "us-east-1"}


def _in(stack: str, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in kube_objects(capture_of(stack), kind)
            if o["metadata"].get("namespace") == namespace}


def _s3_config(stack: str) -> dict[str, str]:
    config = _in(stack, "ConfigMap", "kubeflow")["inferenceservice-config"]
    return dict(json.loads(config["data"]["credentials"])["s3"])


def injected(secret: dict[str, Any], s3: dict[str, str]) -> list[str]:
    """What KServe 0.16.0's pod webhook gives the storage initializer from one Secret listed on the predictor's
    account: the two keys as secretKeyRef env when the Secret's data has s3SecretAccessKeyName at the pod's creation
    (KS@v0.16.0 pkg/credentials/service_account_credentials.go:291-295, s3/s3_secret.go:83-106), else nothing."""
    if s3["s3SecretAccessKeyName"] not in (secret.get("data") or {}):
        return []
    return [f"AWS_ACCESS_KEY_ID<-{secret['metadata']['name']}/{s3['s3AccessKeyIDName']}",
            f"AWS_SECRET_ACCESS_KEY<-{secret['metadata']['name']}/{s3['s3SecretAccessKeyName']}"]


@pytest.mark.parametrize("stack", ROOK_STACKS)
def test_each_models_namespace_has_the_claims_secret_as_kserve_reads_it(stack: str) -> None:
    platform = platform_of(stack)
    assert platform.models is not None
    claims = {b.team: b for b in platform.storage.buckets if b.team}
    for team in platform.models.teams:
        claim = claims[team.team]
        secret = _in(stack, "Secret", team.namespace)[claim.key]
        assert secret["metadata"]["annotations"] == KSERVE
        # Both keys present and empty: the copy fills them, and Pulumi ignores data after create (below).
        assert secret["data"] == {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""} and "stringData" not in secret
        # KServe reads the Secrets listed on the predictor's account: the team's data account there, and only there.
        assert _in(stack, "ServiceAccount", team.namespace)["datasets"]["secrets"] == [{"name": claim.key}]
        assert "secrets" not in _in(stack, "ServiceAccount", claim.namespace)["datasets"]


@pytest.mark.parametrize("stack", ROOK_STACKS)
def test_a_predictor_created_before_the_copy_gets_the_key_refs_at_once(stack: str) -> None:
    """The declared keys are the ones the rendered inferenceservice-config names, so KServe injects the refs even
    while they are empty; the kubelet resolves them again at each restart of the storage initializer."""
    s3 = _s3_config(stack)
    assert (s3["s3AccessKeyIDName"], s3["s3SecretAccessKeyName"]) == KEYS
    secret = _in(stack, "Secret", "vision-models")["vision-datasets"]
    assert injected(secret, s3) == ["AWS_ACCESS_KEY_ID<-vision-datasets/AWS_ACCESS_KEY_ID",
                                    "AWS_SECRET_ACCESS_KEY<-vision-datasets/AWS_SECRET_ACCESS_KEY"]
    # The Secret as it was declared before (no data): no refs, and the pod kept no keys until deleted.
    assert injected({**secret, "data": None}, s3) == []


def _resource() -> pulumi.Resource:
    """A Resource that registers nothing (depends_on accepts it)."""
    return pulumi.Resource.__new__(pulumi.Resource)


class _Recorder:
    def __init__(self) -> None:
        self.secrets: dict[str, pulumi.ResourceOptions] = {}

    def __call__(self, resource_name: str, api_version: str, kind: str, meta: dict[str, Any],
                 opts: pulumi.ResourceOptions, **fields: Any) -> Any:
        if kind == "Secret":
            self.secrets[f"{meta['namespace']}/{meta['name']}"] = opts
        return _resource()


def test_pulumi_leaves_the_copied_keys_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """ignore_changes on data: a later `pulumi up` neither empties the copied keys nor fights the copier over them
    (pulumi-kubernetes' server-side apply keeps an ignored field's live value, or drops it when another manager
    owns it: provider/pkg/await/await.go handleSSAIgnoreFields)."""
    recorder = _Recorder()
    monkeypatch.setattr(storage, "kube_object", recorder)
    platform = platform_of("onprem-lab")
    namespaces = {ns: _resource() for team in platform.teams for ns in team.namespaces}
    storage.bucket_keys(_resource(), platform, None, namespaces)  # type: ignore[arg-type]
    assert set(recorder.secrets) == {"vision-models/vision-datasets", "nlp-models/nlp-datasets",
                                     "speech-eval/speech-datasets", "speech-models/speech-datasets"}
    assert all(opts.ignore_changes == ["data", "stringData"] for opts in recorder.secrets.values())


@pytest.mark.parametrize("stack", ["aws-prod", "gcp-prod", "azure-prod", "local"])
def test_no_copied_keys_where_the_data_account_reads_the_bucket_or_there_is_none(stack: str) -> None:
    platform = platform_of(stack)
    assert platform.models is not None and platform.storage.key_copies == ()
    for team in platform.models.teams:
        assert "secrets" not in _in(stack, "ServiceAccount", team.namespace)["datasets"]
