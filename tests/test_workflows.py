"""The GitHub workflows as written: steps in an order that works on a fresh runner, OIDC credentials for each
cloud with every variable it needs, on-prem stacks on a self-hosted runner, the Pulumi CLI pinned to the SDK's
version, uv on PATH, and the rendered diff posted on the pull request."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline.diskcache import cache_dir
from infra.spec.input.load import stack_names
from tests.conftest import ROOT, platform_of

WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONS = ROOT / ".github" / "actions"
SETUP, LOGIN = "./.github/actions/setup", "./.github/actions/cloud-login"
# What each cloud's OIDC login needs from the repository (or environment) variables.
CLOUD_VARIABLES = {
    "aws": {"aws-role-arn": "AWS_ROLE_ARN", "aws-region": "AWS_REGION"},
    "gcp": {"gcp-workload-identity-provider": "GCP_WORKLOAD_IDENTITY_PROVIDER",
            "gcp-service-account": "GCP_SERVICE_ACCOUNT"},
    "azure": {"azure-client-id": "AZURE_CLIENT_ID", "azure-tenant-id": "AZURE_TENANT_ID",
              "azure-subscription-id": "AZURE_SUBSCRIPTION_ID"},
}
CLOUD_OF_KIND = {"existing": "onprem", "eks": "aws", "gke": "gcp", "aks": "azure"}


def _load(path: Path) -> dict[str, Any]:
    # PyYAML reads the key `on` as True: the workflow's triggers are under True.
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return document


def _workflows() -> dict[str, dict[str, Any]]:
    return {path.stem: _load(path) for path in sorted(WORKFLOWS.glob("*.yml"))}


def _uses(step: dict[str, Any]) -> str:
    return str(step.get("uses", "")).split("@")[0]


def _index(steps: list[dict[str, Any]], predicate: Any) -> int:
    found = [i for i, step in enumerate(steps) if predicate(step)]
    assert found, "step not found"
    return found[0]


def _runs(text: str) -> Any:
    return lambda step: text in str(step.get("run", ""))


def _pulumi_sdk_version() -> str:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return next(p.split("==")[1] for p in pins if p.startswith("pulumi=="))


def _permissions(workflow: dict[str, Any], job: dict[str, Any]) -> dict[str, str]:
    return dict(job.get("permissions", workflow.get("permissions", {})))


def _cloud_jobs() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    return [(name, job_name, workflow, job) for name, workflow in _workflows().items()
            for job_name, job in workflow["jobs"].items()
            if any(_uses(step) == "pulumi/actions" and "command" in step.get("with", {}) for step in job["steps"])]


def test_the_offline_gate_fetches_crds_before_any_test_into_the_directory_the_tests_read() -> None:
    workflow = _workflows()["pull-request"]
    steps = workflow["jobs"]["offline"]["steps"]
    setup, crds, test = _index(steps, lambda s: _uses(s) == SETUP), _index(steps, _runs("make crds")), \
        _index(steps, _runs("make test"))
    assert setup < crds < test
    assert _index(steps, _runs("trainyard validate")) > crds
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    # `make crds` fills $(CRDS); `make test` hands $(CRDS) to the tests, which read $TRAINYARD_CRDS (conftest.CRDS)
    assert re.search(r"^crds:.*\n\ttest -d \$\(CRDS\) \|\| scripts/fetch-crds \$\(CRDS\)", makefile, re.M)
    assert re.search(r"^test:.*\n\tTRAINYARD_CRDS=\$\(abspath \$\(CRDS\)\) \$\(VENV\)/bin/pytest\b", makefile, re.M)
    assert workflow["env"]["CRDS"] and "--crds \"$CRDS\"" in str(steps[_index(steps, _runs("trainyard validate"))])


def test_the_saved_cache_holds_only_what_the_run_used() -> None:
    """The run's start is marked after the cache is restored and before anything reads it; the prune runs after the
    last step that reads it (the diffs) against that same marker, and the cache action saves after every step."""
    steps = _workflows()["pull-request"]["jobs"]["offline"]["steps"]
    restore = _index(steps, lambda s: _uses(s) == "actions/cache" and s["with"]["path"] == ".cache/offline")
    mark, test = _index(steps, _runs("touch .cache/run-start")), _index(steps, _runs("make test"))
    prune = _index(steps, _runs("scripts/prune-cache --unused-since .cache/run-start"))
    readers = [i for i, step in enumerate(steps) if _runs("trainyard")(step) or _runs("make test")(step)]
    assert restore < mark < min(readers) and test in readers and len(readers) >= 4
    assert prune > max(readers)
    assert (ROOT / "scripts" / "prune-cache").stat().st_mode & 0o111


def test_the_rendered_diff_is_posted_on_the_pull_request() -> None:
    steps = _workflows()["pull-request"]["jobs"]["offline"]["steps"]
    diff = _index(steps, _runs("trainyard diff"))
    comment = _index(steps, lambda s: _uses(s) == "actions/github-script")
    script = steps[comment]["with"]["script"]
    assert comment > diff and "rendered.diff" in script
    assert "createComment" in script and "updateComment" in script  # one comment, kept current
    assert _workflows()["pull-request"]["permissions"]["pull-requests"] == "write"


def test_setup_puts_uv_on_path_and_installs_the_pinned_pulumi_cli() -> None:
    steps = _load(ACTIONS / "setup" / "action.yml")["runs"]["steps"]
    install, path = _index(steps, _runs("make install")), _index(steps, _runs("/.tools/bin\" >> \"$GITHUB_PATH\""))
    assert install < path
    assert (ROOT / "Makefile").read_text(encoding="utf-8").count("UV := .tools/bin/uv") == 1
    pulumi = steps[_index(steps, lambda s: _uses(s) == "pulumi/actions")]
    assert pulumi["with"]["pulumi-version"] == "${{ inputs.pulumi-version }}"


@pytest.mark.parametrize(("workflow", "job"), [(c[0], c[1]) for c in _cloud_jobs()])
def test_every_pulumi_job_is_set_up_logged_in_and_pinned(workflow: str, job: str) -> None:
    document = _workflows()[workflow]
    steps = document["jobs"][job]["steps"]
    setup, login = _index(steps, lambda s: _uses(s) == SETUP), _index(steps, lambda s: _uses(s) == LOGIN)
    pulumi = [i for i, s in enumerate(steps) if _uses(s) == "pulumi/actions"]
    assert setup < login < min(pulumi)
    pin = _pulumi_sdk_version()
    assert document["env"]["PULUMI_VERSION"] == pin
    assert steps[setup]["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}"
    assert all(steps[i]["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}" for i in pulumi)
    assert _permissions(document, document["jobs"][job]).get("id-token") == "write"
    given = steps[login]["with"]
    assert given["cloud"] == "${{ matrix.cloud }}"
    for variables in CLOUD_VARIABLES.values():
        for name, variable in variables.items():
            assert given[name] == f"${{{{ vars.{variable} }}}}"


@pytest.mark.parametrize(("workflow", "job"), [(c[0], c[1]) for c in _cloud_jobs()])
def test_each_stack_runs_where_it_can_reach_its_cluster(workflow: str, job: str) -> None:
    definition = _workflows()[workflow]["jobs"][job]
    assert definition["runs-on"] == "${{ fromJSON(matrix.runs-on) }}"
    rows = definition["strategy"]["matrix"]["include"]
    assert sorted(row["stack"] for row in rows) == sorted(s for s in stack_names(ROOT) if s != "local")
    for row in rows:
        platform = platform_of(row["stack"])
        clusters = platform.hybrid.clusters.values() if platform.hybrid else [platform]
        places = {CLOUD_OF_KIND[cluster.spec.cluster.kind] for cluster in clusters}
        clouds = places - {"onprem"}
        assert len(clouds) <= 1, row  # the login action signs in to one cloud per job
        assert row["cloud"] == (clouds.pop() if clouds else "onprem"), row
        # Every deployed cluster's API server admits only the site's or the stack's networks: each row runs on the
        # self-hosted runner its stack names (ci.runner), which the check ci-runner-reaches-endpoint requires.
        assert platform.spec.ci is not None, row
        assert yaml.safe_load(row["runs-on"]) == platform.spec.ci.runner, row
        assert "self-hosted" in platform.spec.ci.runner, row


def test_aks_logins_are_non_interactive() -> None:
    steps = _load(ACTIONS / "cloud-login" / "action.yml")["runs"]["steps"]
    azure = "\n".join(str(step.get("run", "")) for step in steps if step.get("if") == "inputs.cloud == 'azure'")
    assert "az aks install-cli" in azure and "--kubelogin-install-location" in azure
    assert 'echo "AAD_LOGIN_METHOD=azurecli" >> "$GITHUB_ENV"' in azure  # what kubelogin get-token reads
    verify = next(step["run"] for step in _workflows()["deploy"]["jobs"]["up"]["steps"]
                  if "trainyard verify" in str(step.get("run", "")))
    assert verify.index("kubelogin convert-kubeconfig -l azurecli") < verify.index("trainyard verify")


def test_the_login_action_hands_each_cloud_every_variable_it_needs() -> None:
    action = _load(ACTIONS / "cloud-login" / "action.yml")
    steps = action["runs"]["steps"]
    by_cloud: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_cloud.setdefault(re.search(r"inputs\.cloud == '(\w+)'", step["if"]).group(1), []).append(step)  # type: ignore[union-attr]
    assert set(by_cloud) == set(CLOUD_VARIABLES)
    for cloud, variables in CLOUD_VARIABLES.items():
        text = yaml.safe_dump(by_cloud[cloud])
        for name in variables:
            assert name in action["inputs"]
            assert f"inputs.{name}" in text, (cloud, name)
    azure = yaml.safe_dump(by_cloud["azure"])
    assert all(f"ARM_{v}" in azure for v in ("USE_OIDC=true", "CLIENT_ID", "TENANT_ID", "SUBSCRIPTION_ID"))
    assert {_uses(s) for s in steps} >= {"aws-actions/configure-aws-credentials", "google-github-actions/auth",
                                         "azure/login"}


def test_no_workflow_passes_long_lived_cloud_keys() -> None:
    for path in [*WORKFLOWS.glob("*.yml"), *ACTIONS.glob("*/action.yml")]:
        text = path.read_text(encoding="utf-8")
        for stale in ("GOOGLE_CREDENTIALS", "AWS_SECRET_ACCESS_KEY", "ARM_CLIENT_SECRET", "secrets.AWS_ROLE_ARN"):
            assert stale not in text, (path.name, stale)


def test_the_offline_gate_restores_the_render_cache_where_the_program_keeps_it() -> None:
    steps = _workflows()["pull-request"]["jobs"]["offline"]["steps"]
    cache = _index(steps, lambda s: _uses(s) == "actions/cache")
    assert cache < _index(steps, _runs("make test"))
    assert ROOT / steps[cache]["with"]["path"] == cache_dir() and "infra/**/*.py" in steps[cache]["with"]["key"]


def test_the_simulated_difference_is_posted_beside_the_rendered_diff() -> None:
    """Every kept trace is a stack's; each is replayed against main only when that stack's queues differ (the whole
    history is fetched, so origin/main is there), before the cache is pruned, and the per-team differences go into
    a comment of their own, kept current like the diff's."""
    steps = _workflows()["pull-request"]["jobs"]["offline"]["steps"]
    assert steps[_index(steps, lambda s: _uses(s) == "actions/checkout")]["with"]["fetch-depth"] == 0
    simulate = _index(steps, _runs("trainyard simulate"))
    run = steps[simulate]["run"]
    assert "for file in simulations/*.csv" in run and '--trace "$file"' in run
    assert "--base origin/main --only-if-changed" in run and '--out "build/simulate/$stack"' in run
    assert _index(steps, _runs("trainyard diff")) < simulate < _index(steps, _runs("scripts/prune-cache"))
    scripts = [i for i, s in enumerate(steps) if _uses(s) == "actions/github-script"]
    assert len(scripts) == 2 and scripts[0] < scripts[1] and simulate < scripts[1]
    diff_script, script = (steps[i]["with"]["script"] for i in scripts)
    assert "difference.md" in script and "build/simulate" in script
    assert "createComment" in script and "updateComment" in script
    markers = [re.search(r'const marker = "(.*)";', text).group(1) for text in (diff_script, script)]  # type: ignore[union-attr]
    assert markers[0] != markers[1]
    assert steps[scripts[1]]["if"] == steps[scripts[0]]["if"]  # forks get no token to comment with
    traces = sorted(path.stem for path in (ROOT / "simulations").glob("*.csv"))
    assert traces == stack_names(ROOT)
