"""Every team namespace that runs pipelines has its artifact store (issue 30: on rook-ceph only the team's first
namespace had one): the bucket claim's Secret is copied into the team's other namespaces, by an account that may
read that one Secret and patch its copies, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.apiserver.rbac import Authorizer, Identity
from tests.conftest import capture_of, kube_objects, platform_of
from tests.test_backup import _fake_kubectl, _named, _run_cron_job

LAB = "onprem-lab"
COPIER = Identity("system:serviceaccount:kubeflow:pipelines-bucket-keys", ("system:serviceaccounts",))


def _in(capture: Any, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in kube_objects(capture, kind)
            if o["metadata"].get("namespace") == namespace}


def test_every_team_namespace_has_a_store_whose_keys_exist_there() -> None:
    platform, capture = platform_of(LAB), capture_of(LAB)
    claims = {b.team: b for b in platform.storage.buckets if b.team}
    for team in platform.teams:
        bucket = claims[team.name]
        for namespace in team.namespaces:  # speech-eval and the -models namespaces included
            launcher = _in(capture, "ConfigMap", namespace)["kfp-launcher"]["data"]
            assert launcher["defaultPipelineRoot"] == f"s3://{bucket.name}/pipelines/{namespace}"
            ref = yaml.safe_load(launcher["providers"])["s3"]["default"]["credentials"]["secretRef"]
            assert ref["secretName"] == bucket.key
            # The claim's own Secret (Rook writes it) in the first namespace; a declared copy in the others.
            declared = _in(capture, "Secret", namespace)
            assert (bucket.key in declared) is (namespace != bucket.namespace), namespace
            argo = yaml.safe_load(_in(capture, "ConfigMap", namespace)["artifact-repositories"]["data"]
                                  ["default-namespaced"])["s3"]
            assert argo["accessKeySecret"]["name"] == argo["secretKeySecret"]["name"] == bucket.key
            runner = _in(capture, "Role", namespace)["pipeline-runner"]["rules"]
            assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                    "resourceNames": [bucket.key]} in runner


def test_only_rook_ceph_copies_keys() -> None:
    """On clouds each namespace's run account has the bucket through workload identity; nothing is copied."""
    lab = platform_of(LAB).pipelines
    assert lab is not None
    assert {(c.source, c.secret, c.targets) for c in lab.key_copies} == {
        ("vision", "vision-datasets", ("vision-models",)), ("nlp", "nlp-datasets", ("nlp-models",)),
        ("speech", "speech-datasets", ("speech-eval", "speech-models"))}
    aws = platform_of("aws-prod").pipelines
    assert aws is not None and aws.key_copies == ()
    assert {s.namespace for s in aws.stores} == {ns for t in platform_of("aws-prod").teams for ns in t.namespaces}


def test_the_copier_reads_one_secret_and_patches_its_copies_only() -> None:
    platform, capture = platform_of(LAB), capture_of(LAB)
    rbac = Authorizer(kube_objects(capture))
    for team in platform.teams:
        first, *others = team.namespaces
        assert rbac.allows(COPIER, "get", "", "secrets", first)
        assert not rbac.allows(COPIER, "patch", "", "secrets", first)  # the claim's own Secret stays Rook's
        for namespace in others:
            assert rbac.allows(COPIER, "patch", "", "secrets", namespace)
            assert not rbac.allows(COPIER, "get", "", "secrets", namespace)
        for namespace in team.namespaces:
            for verb in ("list", "create", "delete"):
                assert not rbac.allows(COPIER, verb, "", "secrets", namespace), (verb, namespace)
            rules = _in(capture, "Role", namespace)["pipelines-bucket-keys"]["rules"]
            assert [r["resourceNames"] for r in rules] == [[f"{team.name}-datasets"]]
    for namespace in ("kubeflow", "velero", "rook-ceph", "monitoring"):
        assert not rbac.allows(COPIER, "get", "", "secrets", namespace)


COPY_KUBECTL = """
case "$*" in
  "-n speech get secret speech-datasets"*) [ -n "$SPEECH_UNBOUND" ] || echo -n '{"AWS_ACCESS_KEY_ID":"a2V5"}' ;;
  *"get secret"*) echo -n '{"AWS_ACCESS_KEY_ID":"b3RoZXI="}' ;;
  *"patch secret"*) echo "$* <- $(cat)" >> "$(dirname "$0")/../patched" ;;
esac
"""


def test_the_copy_job_writes_each_claims_keys_into_the_teams_other_namespaces(tmp_path: Path) -> None:
    job = _named(capture_of(LAB), "CronJob", "pipelines-bucket-keys")
    assert job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    result = _run_cron_job(job, _fake_kubectl(tmp_path, COPY_KUBECTL))
    assert result.returncode == 0, result.stdout + result.stderr
    patched = (tmp_path / "patched").read_text().splitlines()
    assert "-n speech-eval patch secret speech-datasets --type merge --patch-file /dev/stdin <- " \
           '{"data": {"AWS_ACCESS_KEY_ID":"a2V5"}}' in patched
    assert sorted(line.split()[1] for line in patched) == ["nlp-models", "speech-eval", "speech-models",
                                                           "vision-models"]


def test_an_unbound_claim_fails_the_copy_but_not_the_other_teams(tmp_path: Path) -> None:
    job = _named(capture_of(LAB), "CronJob", "pipelines-bucket-keys")
    result = _run_cron_job(job, {**_fake_kubectl(tmp_path, COPY_KUBECTL), "SPEECH_UNBOUND": "1"})
    assert result.returncode != 0
    assert "no keys in speech/speech-datasets yet" in result.stdout
    assert sorted(line.split()[1] for line in (tmp_path / "patched").read_text().splitlines()) == [
        "nlp-models", "vision-models"]
