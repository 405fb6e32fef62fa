"""Kubeflow Pipelines as rendered on every stack (infra/platform/kfp/pipelines.py): each team's artifacts in its own
bucket, never another team's; no sidecar for team namespaces or training pods; the identity header accepted only
from the gateway (UI) and Pipelines' own accounts (API server); team namespaces reach only the ports they need; the
journal on a retained class, in the backups; every image pinned; no upstream placeholder secret."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from infra.components import GATEWAY_ACCOUNT, ISTIO, KSERVE, PIPELINES, USERID_HEADER
from infra.offline import engine
from infra.offline.images import object_images
from infra.platform.kfp.patches import API_PORTS, METADATA_PORT, RUNNER_ACCOUNT, SEAWEEDFS_PORT
from infra.platform.kfp.pipelines import secret_data
from infra.spec.input.keys import PIPELINES_DB_PASSWORD_KEY, PLATFORM_KEY
from infra.spec.pins import unpinned_image
from infra.vocabulary import TEAM_LABEL, pod_templates
from tests.conftest import ALL_STACKS, capture_of, kube_objects, platform_of, raw_platform
from tests.test_frontdoor import _namespace, ingress_allowed, injected

Obj = dict[str, Any]
NS = PIPELINES.namespace
STACKS = [s for s in ALL_STACKS if s != "hybrid-burst"]  # the multi-cluster stack's manager: test_pipelines_spec
GATEWAY_PRINCIPAL = f"cluster.local/ns/{ISTIO.namespace}/sa/{GATEWAY_ACCOUNT}"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")


def _meta(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _find(objects: list[Obj], kind: str, namespace: str, name: str) -> Obj | None:
    return next((o for o in objects if o["kind"] == kind and _meta(o) == (namespace, name)), None)


def _launcher(stack: str, namespace: str) -> dict[str, Any]:
    """The namespace's kfp-launcher ConfigMap's providers, which must exist."""
    found = _find(_objects(stack), "ConfigMap", namespace, "kfp-launcher")
    assert found is not None, (stack, namespace)
    providers: dict[str, Any] = yaml.safe_load(found["data"]["providers"])
    return providers


def _objects(stack: str) -> list[Obj]:
    return kube_objects(capture_of(stack))


# --- artifacts: each team's own bucket ---------------------------------------------------------------------------

def launcher_problems(platform: Any, objects: list[Obj]) -> list[str]:
    """Every `kfp-launcher` / `artifact-repositories` we write names the bucket of the namespace's own team."""
    own = {ns: b.name for b in platform.storage.buckets if b.team for ns in b.readers}
    others = {b.name for b in platform.storage.buckets}
    problems = []
    for obj in objects:
        namespace, name = _meta(obj)
        if obj["kind"] != "ConfigMap" or namespace not in own or name not in ("kfp-launcher", "artifact-repositories"):
            continue
        text = yaml.safe_dump(obj["data"])
        named = {bucket for bucket in others if bucket in text}
        if named != {own[namespace]}:
            problems.append(f"{namespace}/{name} names {sorted(named)}, not only {own[namespace]}")
        if name == "kfp-launcher" and not obj["data"]["defaultPipelineRoot"].endswith(f"//{own[namespace]}/"
                                                                                        f"pipelines/{namespace}"):
            problems.append(f"{namespace}/kfp-launcher root {obj['data']['defaultPipelineRoot']}")
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_a_team_s_runs_write_only_its_own_bucket(stack: str) -> None:
    platform, objects = platform_of(stack), _objects(stack)
    facts = platform.pipelines
    assert facts is not None
    assert launcher_problems(platform, objects) == []
    launchers = {_meta(o)[0] for o in objects if o["kind"] == "ConfigMap" and _meta(o)[1] == "kfp-launcher"}
    if facts.artifacts == "team-buckets":
        expected = {s.namespace for s in facts.stores}
        assert launchers - {NS} == expected and expected, "a namespace with a team bucket has no launcher config"
        assert _find(objects, "DecoratorController", NS, "kubeflow-pipelines-profile-controller") is None
        for store in facts.stores:
            repo = _find(objects, "ConfigMap", store.namespace, "artifact-repositories")
            assert repo is not None and repo["metadata"]["annotations"][
                "workflows.argoproj.io/default-artifact-repository"] == "default-namespaced"
    else:  # no object store the launcher writes: upstream's sync writes them, with a key per namespace
        assert launchers == {NS}
        sync = _find(objects, "DecoratorController", NS, "kubeflow-pipelines-profile-controller")
        assert sync is not None
        assert sync["spec"]["resources"][0]["labelSelector"] == {
            "matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}


def test_the_launcher_check_catches_another_team_s_bucket() -> None:
    platform = platform_of("aws-prod")
    objects = [dict(o) for o in _objects("aws-prod")]
    vision = next(o for o in objects if o["kind"] == "ConfigMap" and _meta(o) == ("vision", "kfp-launcher"))
    nlp_bucket = next(b.name for b in platform.storage.buckets if b.team == "nlp")
    vision["data"] = {**vision["data"], "defaultPipelineRoot": f"s3://{nlp_bucket}/pipelines/vision"}
    assert launcher_problems(platform, objects)


def test_the_launcher_s_credentials_are_the_team_s() -> None:
    """Clouds: the run account's workload identity (the account the cluster binds to the team bucket); Ceph: the
    bucket claim's Secret, in the claim's namespace and (copied: tests/test_bucket_keys.py) in the team's others."""
    aws = _launcher("aws-prod", "vision")
    assert aws["s3"]["default"]["credentials"] == {"fromEnv": True}
    gcp = _launcher("gcp-prod", "nlp")
    assert gcp == {"gs": {"default": {"credentials": {"fromEnv": True}}}}
    lab = _launcher("onprem-lab", "speech")
    assert lab["s3"]["default"]["credentials"]["secretRef"]["secretName"] == "speech-datasets"
    assert _launcher("onprem-lab", "speech-eval") == lab


@pytest.mark.parametrize("stack", STACKS)
def test_runs_execute_as_the_team_data_account(stack: str) -> None:
    objects = _objects(stack)
    config = next(o for o in objects if o["kind"] == "ConfigMap" and _meta(o)[0] == NS
                  and _meta(o)[1].startswith("pipeline-api-server-config"))
    assert config["data"]["DEFAULTPIPELINERUNNERSERVICEACCOUNT"] == RUNNER_ACCOUNT
    assert config["data"]["MULTIUSER"] == "true"
    api = _find(objects, "Deployment", NS, "ml-pipeline")
    assert api is not None
    env = {e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["KUBEFLOW_USERID_HEADER"], env["KUBEFLOW_USERID_PREFIX"]) == (USERID_HEADER, "")  # the gateway's
    install = _find(objects, "ConfigMap", NS, "pipeline-install-config")
    assert install is not None and install["data"]["defaultSecurityContextRunAsNonRoot"] == "true"
    for team in platform_of(stack).teams:
        for namespace in team.namespaces:
            assert _find(objects, "ServiceAccount", namespace, RUNNER_ACCOUNT) is not None
            binding = _find(objects, "RoleBinding", namespace, "pipeline-runner")
            assert binding is not None and binding["subjects"] == [
                {"kind": "ServiceAccount", "name": RUNNER_ACCOUNT, "namespace": namespace}]


# --- sidecars: Pipelines' pods only --------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_no_sidecar_for_team_namespaces_or_training_pods(stack: str) -> None:
    capture = capture_of(stack)
    objects = kube_objects(capture)
    hooks = [h for c in kube_objects(capture, "MutatingWebhookConfiguration") if _meta(c)[1] == "istio-sidecar-injector"
             for h in c["webhooks"]]
    kubeflow = _namespace(capture, NS)
    assert kubeflow["metadata"]["labels"].get("istio-injection") == "enabled"
    assert injected(hooks, kubeflow, {})  # the point: Pipelines' pods get the policies' enforcer
    teams = {ns for team in platform_of(stack).teams for ns in team.namespaces}
    for name in teams:
        namespace = _namespace(capture, name)
        labels = namespace["metadata"]["labels"]
        assert "istio-injection" not in labels and "istio.io/rev" not in labels
        for pod_labels in ({}, {"sidecar.istio.io/inject": "true"}):
            assert not injected(hooks, namespace, pod_labels), name
    for obj in objects:
        if obj["kind"] in RUNTIME_KINDS or _meta(obj)[0] in teams:
            for template in pod_templates(obj["kind"], obj):
                meta = template.get("metadata", {})
                for key in ("labels", "annotations"):
                    assert (meta.get(key) or {}).get("sidecar.istio.io/inject") != "true", _meta(obj)


# --- the identity header: forged only by nobody --------------------------------------------------------------------

def _holds(condition: Obj, headers: set[str]) -> bool:
    header = condition["key"].removeprefix("request.headers[").removesuffix("]")
    present = header in headers
    if "values" in condition:
        return present and condition["values"] == ["*"]
    return not present if condition.get("notValues") == ["*"] else True


def allowed(policies: list[Obj], app: str, principal: str | None, headers: set[str]) -> bool:
    """Istio ALLOW semantics for a pod labelled app=<app>: with no policy selecting it, everything; otherwise a rule
    whose every `from` source and `when` condition hold (principals need mTLS, i.e. a sidecar or the gateway)."""
    selecting = [p for p in policies if p["spec"].get("selector", {}).get("matchLabels", {}).get("app") == app
                 and p["spec"].get("action", "ALLOW") == "ALLOW"]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("rules", []):
            sources = [s["source"] for s in rule.get("from", [])]
            from_ok = not sources or any(principal in s.get("principals", []) for s in sources)
            if from_ok and all(_holds(c, headers) for c in rule.get("when", [])):
                return True
    return False


def forgers(policies: list[Obj], app: str, candidates: list[str | None]) -> list[str | None]:
    return [p for p in candidates if allowed(policies, app, p, {USERID_HEADER, "authorization"})]


@pytest.mark.parametrize("stack", STACKS)
def test_only_the_gateway_and_pipelines_hand_over_an_identity(stack: str) -> None:
    policies = [o for o in _objects(stack) if o["kind"] == "AuthorizationPolicy" and _meta(o)[0] == NS]
    kfp = {f"cluster.local/ns/{NS}/sa/{sa}" for sa in ("ml-pipeline", "ml-pipeline-ui", "ml-pipeline-persistenceagent",
                                                         "ml-pipeline-scheduledworkflow",
                                                         "ml-pipeline-viewer-crd-service-account",
                                                         "kubeflow-pipelines-cache")}
    team_pod = f"cluster.local/ns/vision/sa/{RUNNER_ACCOUNT}"
    candidates: list[str | None] = [None, team_pod, GATEWAY_PRINCIPAL, *sorted(kfp)]
    assert forgers(policies, "ml-pipeline-ui", candidates) == [GATEWAY_PRINCIPAL]
    assert set(forgers(policies, "ml-pipeline", candidates)) == kfp
    # without the header (a token instead), anyone reaches the API server, which reviews the token
    assert allowed(policies, "ml-pipeline", None, {"authorization"})


def test_the_forgery_check_catches_an_open_policy() -> None:
    policies = [o for o in _objects("local") if o["kind"] == "AuthorizationPolicy" and _meta(o)[0] == NS]
    opened = [{**p, "spec": {**p["spec"], "rules": [{}]}} if _meta(p)[1] == "ml-pipeline" else p for p in policies]
    assert None in forgers(opened, "ml-pipeline", [None])


# --- network: team namespaces reach only what runs need ------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_team_namespaces_reach_only_the_api_and_metadata_ports(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    policies = kube_objects(capture, "NetworkPolicy")
    facts = platform.pipelines
    assert facts is not None
    team = _namespace(capture, platform.teams[0].namespaces[0])
    pod = {"app": "trainer"}
    for port in API_PORTS:
        assert ingress_allowed(policies, NS, {"app": "ml-pipeline"}, port, team, pod)
    assert ingress_allowed(policies, NS, {"component": "metadata-grpc-server"}, METADATA_PORT, team, pod)
    assert not ingress_allowed(policies, NS, {"app": "ml-pipeline"}, 8443, team, pod)
    assert not ingress_allowed(policies, NS, {"app": "mysql"}, 3306, team, pod)
    assert not ingress_allowed(policies, NS, {"app": "ml-pipeline-ui"}, 3000, team, pod)
    store = ingress_allowed(policies, NS, {"app": "seaweedfs"}, SEAWEEDFS_PORT, team, pod)
    assert store == (facts.artifacts == "seaweedfs")
    gateway = _namespace(capture, ISTIO.namespace)
    assert ingress_allowed(policies, NS, {"app": "ml-pipeline-ui"}, 3000, gateway,
                           {"app": "istio-ingressgateway", "istio": "ingressgateway"})
    own = [p for p in policies if _meta(p)[0] == team["metadata"]["name"]]
    assert any(_meta(p)[1] == "default-deny" for p in own), "the team's default-deny stays"
    egress = next(p for p in own if _meta(p)[1] == "allow-pipelines")["spec"]["egress"]
    ports = sorted(port["port"] for rule in egress for port in rule["ports"])
    assert ports == sorted([*API_PORTS, METADATA_PORT, *([SEAWEEDFS_PORT] if store else [])])


# --- state: retained, backed up; images pinned; no placeholder ---------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_the_journal_is_retained_and_backed_up(stack: str) -> None:
    capture, platform = capture_of(stack), platform_of(stack)
    classes = {_meta(c)[1]: c for c in kube_objects(capture, "StorageClass")}
    claims = {r.inputs["metadata"]["name"]: r for r in capture.resources
              if r.inputs.get("kind") == "PersistentVolumeClaim" and r.inputs["metadata"].get("namespace") == NS}
    assert set(claims) == {"mysql-pv-claim", "seaweedfs-pvc"}
    for record in claims.values():
        klass = record.inputs["spec"]["storageClassName"]
        assert classes[klass]["reclaimPolicy"] == "Retain" and record.retain_on_delete
    facts = platform.pipelines
    assert facts is not None
    assert claims["mysql-pv-claim"].inputs["spec"]["resources"]["requests"]["storage"] == facts.database[1]
    volume_tiers = [s for s in kube_objects(capture, "Schedule") if s["spec"]["template"]["snapshotVolumes"]]
    assert volume_tiers and all(NS in s["spec"]["template"]["includedNamespaces"] for s in volume_tiers)
    assert NS not in platform.backup.drill_namespaces, "the drill restores team namespaces only"


@pytest.mark.parametrize("stack", STACKS)
def test_every_pipelines_image_is_pinned_and_fully_qualified(stack: str) -> None:
    objects = [o for o in _objects(stack) if _meta(o)[0] == NS]
    images = set().union(*(object_images(o) for o in objects))
    assert {"ghcr.io/kubeflow/kfp-api-server:2.16.0", "ghcr.io/kubeflow/kfp-launcher:2.16.0",
            "quay.io/argoproj/argoexec:v3.7.3", "docker.io/library/mysql:8.4"} <= images
    assert [i for i in images if unpinned_image(i) or "." not in i.split("/")[0]] == []
    install = _find(objects, "ConfigMap", NS, "pipeline-install-config")
    assert install is not None and install["data"]["cacheImage"] == ""  # the untagged busybox is not used
    assert not [o for o in _objects(stack) if o["kind"] == "MutatingWebhookConfiguration"
                and _meta(o)[1] == "cache-webhook-kubeflow"]


def test_no_empty_root_password_nor_placeholder_key() -> None:
    mysql = _find(_objects("aws-prod"), "Deployment", NS, "mysql")
    assert mysql is not None
    env = {e["name"]: e for e in mysql["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "MYSQL_ALLOW_EMPTY_PASSWORD" not in env
    assert env["MYSQL_ROOT_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "mysql-secret", "key": "password"}
    capture = engine.run("aws-prod", {PLATFORM_KEY: raw_platform("aws-prod"),
                                      PIPELINES_DB_PASSWORD_KEY: "a-root-password-of-our-own"})
    # Pipelines' own: KServe, which shares the namespace, owns its webhook certificate's Secret
    secrets = {_meta(s) for s in kube_objects(capture, "Secret") if _meta(s)[0] == NS
               and _meta(s)[1] not in KSERVE.secrets}
    assert secrets == {(NS, "mysql-secret"), (NS, "mlpipeline-minio-artifact")}  # ours: upstream's are dropped
    assert "minio123" not in repr(kube_objects(capture))
    facts = platform_of("aws-prod").pipelines
    assert facts is not None
    data = secret_data(facts, "a-root-password-of-our-own")
    assert data["mysql-secret"] == {"username": "root", "password": "a-root-password-of-our-own"}
    assert data["mlpipeline-minio-artifact"]["secretkey"] not in ("minio123", "a-root-password-of-our-own")


@pytest.mark.parametrize(("stack", "folder"), [("gcp-prod", "/home/kubernetes/bin"), ("aws-prod", "/opt/cni/bin")])
def test_istio_s_cni_agent_writes_its_binary_where_the_nodes_allow(stack: str, folder: str) -> None:
    """GKE mounts /opt/cni/bin read-only: there the agent uses GKE's writable folder (the vendored gke variant)."""
    agent = next(o for o in kube_objects(capture_of(stack), "DaemonSet") if o["metadata"]["name"] == "istio-cni-node")
    volumes = {v["name"]: v for v in agent["spec"]["template"]["spec"]["volumes"]}
    assert volumes["cni-bin-dir"]["hostPath"]["path"] == folder
