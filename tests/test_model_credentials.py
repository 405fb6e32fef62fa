"""The team bucket's keys for KServe's storage initializer on rook-ceph (infra/platform/models/credentials.py), on the
rendered onprem-lab (rook-ceph, every team with a bucket and a models namespace): the Secret KServe reads from the
predictor's ServiceAccount, named and annotated as KServe 0.16.0 reads it, with the key names the rendered
inferenceservice-config names; the copy Job's rights narrowed to the two Secrets; its script run against a fake
kubectl; nothing of it on the cloud stacks, whose data account reads the bucket by workload identity."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.apiserver.podsecurity import restricted
from infra.platform.models import credentials
from infra.spec.pipelines.model import OBC_ACCESS_KEY, OBC_SECRET_KEY
from tests.conftest import capture_of, kube_objects, platform_of

STACK = "onprem-lab"


def _one(kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    (found,) = [o for o in kube_objects(capture_of(STACK), kind) if o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == namespace]
    return found


def test_every_models_namespace_gets_its_own_bucket_claims_keys_and_the_rgw_endpoint() -> None:
    platform = platform_of(STACK)
    assert platform.models is not None
    claims = {b.team: b for b in platform.storage.buckets if b.team}
    assert [(t.namespace, t.credentials) for t in platform.models.teams] == [
        (f"{team}-models", claims[team].key) for team in ("vision", "nlp", "speech")]
    for team in platform.models.teams:
        secret = _one("Secret", team.credentials, team.namespace)
        # KS@v0.16.0 pkg/credentials/s3/s3_secret.go: the annotation names; the endpoint is host:port (KServe adds
        # http:// when s3-usehttps is "0").
        assert secret["metadata"]["annotations"] == {
            "serving.kserve.io/s3-endpoint": "rook-ceph-rgw-my-store.rook-ceph.svc:80",
            "serving.kserve.io/s3-usehttps": "0", "serving.kserve.io/s3-region": "us-east-1"}
        assert "data" not in secret and "stringData" not in secret  # the keys come from the claim, by the Job
        # KServe reads the Secrets listed on the predictor's account: the team's data account there.
        assert _one("ServiceAccount", "datasets", team.namespace)["secrets"] == [{"name": team.credentials}]
        assert "secrets" not in _one("ServiceAccount", "datasets", claims[team.team].namespace)


def test_the_secret_carries_the_key_names_the_rendered_kserve_config_reads() -> None:
    config = _one("ConfigMap", "inferenceservice-config", "kubeflow")
    s3 = json.loads(config["data"]["credentials"])["s3"]
    assert (s3["s3AccessKeyIDName"], s3["s3SecretAccessKeyName"]) == (OBC_ACCESS_KEY, OBC_SECRET_KEY)
    job = _one("Job", "model-bucket-credentials-vision", "rook-ceph")
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KEYS"].split() == [OBC_ACCESS_KEY, OBC_SECRET_KEY]
    assert (env["CLAIM"], env["CLAIM_NAMESPACE"], env["TARGET_NAMESPACE"]) == (
        "vision-datasets", "vision", "vision-models")


def test_the_copy_job_may_read_one_claim_secret_and_patch_one_target_only() -> None:
    roles = {o["metadata"]["namespace"]: o["rules"] for o in kube_objects(capture_of(STACK), "Role")
             if o["metadata"]["name"] == "model-bucket-credentials-vision"}
    secret = {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["vision-datasets"]}
    assert roles == {"vision": [{**secret, "verbs": ["get"]}], "vision-models": [{**secret, "verbs": ["get", "patch"]}]}
    binding = _one("RoleBinding", "model-bucket-credentials-vision", "vision-models")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": credentials.ACCOUNT, "namespace": "rook-ceph"}]
    pod = _one("Job", "model-bucket-credentials-vision", "rook-ceph")["spec"]["template"]
    assert restricted(pod) == []
    assert pod["spec"]["serviceAccountName"] == credentials.ACCOUNT


FAKE_KUBECTL = r"""#!/bin/sh
# get: prints the claim's base64 value of the jsonpath's key (empty for MISSING); patch: records its arguments.
case "$*" in
  *" get secret "*) key=${7#jsonpath=\{.data.}; key=${key%\}}; [ "$key" = "$MISSING" ] || printf '%s' "b64-$key" ;;
  *" patch secret "*) printf '%s\n' "$@" > "$OUT" ;;
esac
"""


def _run(tmp_path: Path, missing: str = "") -> subprocess.CompletedProcess[str]:
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL, encoding="utf-8")
    kubectl.chmod(0o755)
    job = credentials.copy_job(platform_of(STACK).models.team("vision"), "vision")  # type: ignore[union-attr]
    env = {e["name"]: e["value"] for e in job["template"]["spec"]["containers"][0]["env"]}
    env |= {"PATH": f"{tmp_path}:{os.environ['PATH']}", "OUT": str(tmp_path / "patch"), "MISSING": missing}
    return subprocess.run(["/bin/sh", "-c", credentials.COPY_KEYS], env=env, capture_output=True, text=True,
                          check=False)


def test_the_job_patches_the_claims_two_keys_into_the_target_and_fails_while_one_is_missing(tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    args = (tmp_path / "patch").read_text(encoding="utf-8").split("\n")
    assert args[:5] == ["-n", "vision-models", "patch", "secret", "vision-datasets"]
    assert json.loads(args[args.index("-p") + 1]) == {"data": {OBC_ACCESS_KEY: f"b64-{OBC_ACCESS_KEY}",
                                                               OBC_SECRET_KEY: f"b64-{OBC_SECRET_KEY}"}}
    (tmp_path / "patch").unlink()
    failed = _run(tmp_path, missing=OBC_SECRET_KEY)
    assert failed.returncode != 0 and "has no AWS_SECRET_ACCESS_KEY yet" in failed.stderr
    assert not (tmp_path / "patch").exists()  # nothing half-copied


@pytest.mark.parametrize("stack", ["aws-prod", "gcp-prod", "azure-prod", "local"])
def test_no_copied_keys_where_the_data_account_reads_the_bucket_or_there_is_none(stack: str) -> None:
    platform = platform_of(stack)
    assert platform.models is not None and credentials.teams_with_credentials(platform) == []
    assert all(t.credentials == "" for t in platform.models.teams)
