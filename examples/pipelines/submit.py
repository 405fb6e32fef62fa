"""Upload, run, schedule and compare the train-eval pipeline with the KFP SDK (run it with the SDK environment:
.venv-pipelines/bin/python examples/pipelines/submit.py ...). docs/pipelines-guide.md has the walk-through.

    submit.py upload                          # the committed train_pipeline.yaml as version <git commit> of train-eval
    submit.py run [--param k=v ...]           # one run of that version, in experiment train-eval
    submit.py schedule recurring-runs/X.json  # a recurring run from a file (the v2beta1 RecurringRun body)
    submit.py compare RUN_ID RUN_ID           # parameters and state of two runs side by side

Where and as whom: KFP_HOST (the front door, https://<frontDoor.host>/pipeline), KFP_NAMESPACE (the team namespace),
and KFP_TOKEN_FILE: a file holding a bearer token, e.g. from CI
`kubectl -n <team> create token trainyard-ci --audience pipelines.kubeflow.org > token`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

import kfp

HERE = pathlib.Path(__file__).resolve().parent
PIPELINE = "train-eval"
COMPILED = HERE / "train_pipeline.yaml"


def commit() -> str:
    """The code identity of what is uploaded: the commit, refused while the pipeline's folder has uncommitted changes
    (the run would then record a commit that does not hold the code it ran)."""
    dirty = subprocess.run(["git", "status", "--porcelain", "--", str(HERE)], capture_output=True, text=True,
                           check=True).stdout.strip()
    if dirty:
        raise SystemExit(f"examples/pipelines has uncommitted changes; commit them first:\n{dirty}")
    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def client() -> tuple[kfp.Client, str]:
    missing = [name for name in ("KFP_HOST", "KFP_NAMESPACE") if not os.environ.get(name)]
    if missing:
        raise SystemExit(f"set {', '.join(missing)} "
                         "(e.g. KFP_HOST=https://ml.example.com/pipeline KFP_NAMESPACE=vision)")
    token_file = os.environ.get("KFP_TOKEN_FILE")
    token = pathlib.Path(token_file).read_text(encoding="utf-8").strip() if token_file else None
    namespace = os.environ["KFP_NAMESPACE"]
    return kfp.Client(host=os.environ["KFP_HOST"], namespace=namespace, existing_token=token), namespace


def version_of(kfp_client: kfp.Client, namespace: str, sha: str) -> tuple[str, str]:
    """(pipeline id, version id) of the version named after the commit, uploading it when it is not there yet."""
    # the team's own pipeline: Client.get_pipeline_id looks among the shared ones (no namespace) only
    named = json.dumps({"predicates": [{"operation": 1, "key": "display_name", "stringValue": PIPELINE}]})  # EQUALS
    found = kfp_client.list_pipelines(filter=named, namespace=namespace).pipelines or []
    pipeline_id = found[0].pipeline_id if found else None
    if pipeline_id is None:
        created = kfp_client.upload_pipeline(str(COMPILED), pipeline_name=PIPELINE, namespace=namespace,
                                             description="Prepare, train in a TrainJob, evaluate, release")
        pipeline_id = created.pipeline_id
        versions = kfp_client.list_pipeline_versions(pipeline_id).pipeline_versions or []
        first = versions[0]
        if first.display_name != sha:  # the first upload makes a version named after the pipeline: add ours
            first = kfp_client.upload_pipeline_version(str(COMPILED), sha, pipeline_id=pipeline_id)
        return pipeline_id, first.pipeline_version_id
    for version in kfp_client.list_pipeline_versions(pipeline_id, page_size=200).pipeline_versions or []:
        if version.display_name == sha:
            return pipeline_id, version.pipeline_version_id
    uploaded = kfp_client.upload_pipeline_version(str(COMPILED), sha, pipeline_id=pipeline_id)
    return pipeline_id, uploaded.pipeline_version_id


def value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str]) -> None:
    top = argparse.ArgumentParser(prog="submit.py")
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser("upload")
    run = commands.add_parser("run")
    run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    schedule = commands.add_parser("schedule")
    schedule.add_argument("file", type=pathlib.Path)
    compare = commands.add_parser("compare")
    compare.add_argument("runs", nargs=2)
    args = top.parse_args(argv)
    kfp_client, namespace = client()
    if args.command == "compare":
        runs = [kfp_client.get_run(run_id) for run_id in args.runs]
        params = [r.runtime_config.parameters or {} for r in runs]
        print(f"{'':24} {args.runs[0]:38} {args.runs[1]}")
        print(f"{'state':24} {runs[0].state!s:38} {runs[1].state}")
        print(f"{'pipeline version':24} {runs[0].pipeline_version_reference.pipeline_version_id:38} "
              f"{runs[1].pipeline_version_reference.pipeline_version_id}")
        for name in sorted({*params[0], *params[1]}):
            marker = "" if params[0].get(name) == params[1].get(name) else "  <- differs"
            print(f"{name:24} {params[0].get(name)!s:38} {params[1].get(name)!s}{marker}")
        return
    sha = commit()
    pipeline_id, version_id = version_of(kfp_client, namespace, sha)
    experiment = kfp_client.create_experiment(PIPELINE, namespace=namespace).experiment_id
    print(f"pipeline {PIPELINE} ({pipeline_id}), version {sha} ({version_id}), experiment {experiment}")
    if args.command == "run":
        params = {"git_commit": sha, **dict(p.split("=", 1) for p in args.param)}
        params = {k: value(v) if isinstance(v, str) and k != "git_commit" else v for k, v in params.items()}
        created = kfp_client.run_pipeline(experiment_id=experiment, job_name=f"{PIPELINE} {sha[:12]}",
                                          params=params, pipeline_id=pipeline_id, version_id=version_id)
        print(f"run {created.run_id}")
    elif args.command == "schedule":
        spec = json.loads(args.file.read_text(encoding="utf-8"))
        cron = spec["trigger"]["cron_schedule"]["cron"]
        recurring = kfp_client.create_recurring_run(
            experiment_id=experiment, job_name=spec["display_name"], description=spec.get("description"),
            cron_expression=cron, max_concurrency=int(spec["max_concurrency"]), no_catchup=spec["no_catchup"],
            params={**spec["runtime_config"]["parameters"], "git_commit": sha}, pipeline_id=pipeline_id,
            version_id=version_id, enabled=spec["mode"] == "ENABLE")
        print(f"recurring run {recurring.recurring_run_id}: {cron}")


if __name__ == "__main__":
    main(sys.argv[1:])
