"""The acceptance suite on a stack's live cluster (`trainyard accept`), with a report (docs/acceptance.md).

Exit 0 every check that ran passed, 1 a check failed, 2 the suite cannot run (and which prerequisite is missing).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from infra.accept import pipeline, platform_checks, queueing, serving, training, web
from infra.accept.jobs import support_objects
from infra.accept.kube import Kube
from infra.accept.report import document, write
from infra.accept.runner import RUN_LABEL, Check, Clock, Result, Run, run_check
from infra.spec import Platform, SpecError
from infra.spec.teams import acceptance_namespace
from infra.spec.versions import GPU_OPERATOR_CHART, VELERO

PASSED, FAILED, CANNOT_RUN = 0, 1, 2
DRILL_MARGIN_MINUTES = 20  # the drill Job's own deadline is its timeout plus 15 minutes


def checks(platform: Platform) -> tuple[Check, ...]:
    drill = (platform.spec.backup.drill.timeout_minutes + DRILL_MARGIN_MINUTES) * 60
    return (
        Check("end-to-end", training.end_to_end, 45 * 60,
              "a small TrainJob per runtime family on each pool of the team's queue, to completion; multi-node "
              "where the pool has two nodes, with an NCCL all-reduce figure for torch"),
        Check("gang", queueing.gang, 10 * 60,
              "a job one node above the team's quota plus borrowing limit gets no pod and no admission"),
        Check("checkpoint", training.checkpoint_restart, 30 * 60,
              "a pod of a running job is deleted; its replacement resumes from the saved step"),
        Check("restore-drill", platform_checks.restore_drill, drill,
              "the restore-drill CronJob, started as a Job now, succeeds"),
        Check("journal-drill", platform_checks.journal_drill, drill,
              "with Pipelines: the journal-drill CronJob, started as a Job now, succeeds (the newest run from before "
              "the backup is in the restored journal)"),
        Check("access", platform_checks.access, 10 * 60,
              "each persona's identity, impersonated, can and cannot do what the access matrix says"),
        Check("front-door", web.front_door, 5 * 60,
              f"signed in with a team member's ID token (file in ${web.TOKEN_FILE_ENV}), each UI behind the front "
              "door answers and refuses the same request without it; another team's views where a UI has them"),
        Check("pipeline", pipeline.pipeline, 90 * 60,
              "the example pipeline uploaded, run on the team's queue and rerun through the Pipelines API behind "
              "the front door; parameters and artifacts recorded, the rerun the same; another team refused"),
        Check("serve", serving.serve, 15 * 60,
              "a model version registered in the team's registry, served by an InferenceService in its models "
              "namespace, answers a prediction; everything removed"),
        Check("rollback", serving.rollback, 30 * 60,
              "served v1 switched to v2 and back by the rollback step; v1 answers again, the time measured, no "
              "prediction failed during the switches"),
        Check("preemption", queueing.preemption, 30 * 60,
              "a job at the highest priority preempts one at the lowest in the team's queue", disruptive=True),
        Check("node-failure", training.node_failure, 45 * 60,
              "the --drain-node node is cordoned and drained mid-run; the job resumes and finishes; uncordoned",
              disruptive=True),
    )


def select(available: Sequence[Check], only: Sequence[str] | None, drain_node: str | None) -> list[Check]:
    """By default every check that disturbs nothing, plus node-failure when --drain-node names a node; --only
    names exactly the checks to run (the only way to ask for preemption)."""
    by_name = {check.name: check for check in available}
    if only:
        unknown = [name for name in only if name not in by_name]
        if unknown:
            raise SpecError("--only", f"no check named '{unknown[0]}': choose from {', '.join(by_name)}")
        chosen = [by_name[name] for name in dict.fromkeys(only)]
    else:
        chosen = [c for c in available if not c.disruptive or (c.name == "node-failure" and drain_node)]
    if any(c.name == "node-failure" for c in chosen) and not drain_node:
        raise SpecError("--drain-node", "node-failure drains a node: name it with --drain-node NODE")
    return chosen


def default_team(platform: Platform, team: str | None) -> str:
    names = [t.name for t in platform.teams]
    if team is not None:
        if team not in names:
            raise SpecError("--team", f"no team named '{team}' in stack {platform.stack}: choose from "
                                      f"{', '.join(names)}")
        return team
    with_gpus = [t.name for t in platform.teams if any(
        platform.flavor(e.flavor).gpu_resources for e in platform.queueing.queue(t.name).flavors)]
    return (with_gpus or names)[0]


def deployed_commit(root: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "unknown (not a git work tree)"
    return commit + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def versions(platform: Platform) -> dict[str, str]:
    pins = platform.spec.versions
    models = platform.models
    return {"kueue": pins.kueue, "trainer": pins.trainer, "jobset": pins.jobset, "kubernetes": pins.kubernetes,
            "velero": VELERO, "gpu-operator": GPU_OPERATOR_CHART.version,
            **({"model-registry": models.registry_version, "kserve": models.serving_version} if models else {})}


class CannotRun(Exception):
    """A prerequisite of the suite is missing; the message says which."""


def prerequisites(platform: Platform, context: str | None, connect: Callable[[str | None], Kube]) -> tuple[
        Kube, str]:
    """A reachable cluster, then verify's checks (GPUs, operators, CRDs served, queues active, RBAC)."""
    from kubernetes import client
    from kubernetes.config import ConfigException

    from infra.live.verify import KubernetesCluster, kubeconfig_files, verify

    where = f"{f'context {context}' if context else 'the current context'} of kubeconfig {kubeconfig_files()}"
    try:
        kube = connect(context)
        server = client.VersionApi(kube.api).get_code().git_version
    except ConfigException as error:
        raise CannotRun(f"cannot load {where}: {error}; point KUBECONFIG or --context at the stack's "
                        "cluster") from None
    except Exception as error:  # connection refused, TLS, DNS, 401: all mean no cluster to accept
        raise CannotRun(f"no cluster reachable at {where}: {type(error).__name__}: "
                        f"{str(error).splitlines()[0] if str(error) else ''}") from None
    findings = verify(platform, KubernetesCluster(context))
    if findings:
        raise CannotRun(f"`trainyard verify` found {len(findings)} problem(s): "
                        + "; ".join(f.line() for f in findings[:5]))
    return kube, server


def namespace_labels(platform: Platform, team: str) -> dict[str, str]:
    """The labels of the team's own namespaces (team, Pod Security), so admission treats the run as the team's."""
    from infra.platform.tenancy import TEAM_LABEL, psa_labels

    level = platform.spec.teams[team].pod_security.level
    return {TEAM_LABEL: team, RUN_LABEL: "true", **psa_labels(level, platform.spec.versions.kubernetes)}


def accept(platform: Platform, *, context: str | None, team: str, chosen: Sequence[Check], drain_node: str | None,
           report_dir: Path, root: Path, clock: Clock, render: Callable[[], Any] | None,
           connect: Callable[[str | None], Kube] = Kube.from_context) -> int:
    namespace = acceptance_namespace(team)
    header = {"stack": platform.stack, "context": context or "(current)", "team": team, "namespace": namespace,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": deployed_commit(root),
              "versions": versions(platform), "server": "-"}
    results: list[Result] = []
    try:
        kube, header["server"] = prerequisites(platform, context, connect)
        if kube.namespace(namespace) is not None:
            raise CannotRun(f"namespace {namespace} already exists (a run in progress, or one that died): "
                            f"check it, then `kubectl delete namespace {namespace}`")
    except CannotRun as problem:
        return _finish(report_dir, document(header, results, str(problem)), CANNOT_RUN)
    run = Run(platform, kube, namespace, team, clock, drain_node=drain_node,
              stamp=time.strftime("%Y%m%d%H%M%S", time.gmtime()), render=render,
              commit=str(header["commit"]).split()[0])
    try:
        try:
            _prepare(kube, platform, team, namespace)
        except Exception as error:  # e.g. the admin may not create namespaces: nothing was checked
            header["setup"] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            return _finish(report_dir, document(header, results, f"cannot prepare namespace {namespace}: "
                                                f"{header['setup']}"), CANNOT_RUN)
        for check in chosen:
            results.append(run_check(check, run))
            print(f"  {results[-1].status:7} {check.name} ({results[-1].seconds}s): {results[-1].summary}")
    finally:
        kube.delete_namespace(namespace)
    code = FAILED if any(r.status == "failed" for r in results) else PASSED
    return _finish(report_dir, document(header, results, None), code)


def _prepare(kube: Kube, platform: Platform, team: str, namespace: str) -> None:
    """The run's namespace, labelled as the team's, a LocalQueue onto the team's ClusterQueue, the program and
    the checkpoint volume."""
    kube.create_namespace(namespace, namespace_labels(platform, team))
    queue = platform.queueing.queue(team).team
    kube.create(namespace, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                            "metadata": {"name": queue}, "spec": {"clusterQueue": queue}})
    for obj in support_objects():
        kube.create(namespace, obj)


def _finish(report_dir: Path, report: dict[str, Any], code: int) -> int:
    markdown, as_json = write(report_dir, report)
    if report["cannot_run"]:
        print(f"error: cannot run: {report['cannot_run']}", file=sys.stderr)
    totals = report["totals"]
    print(f"accept {report['stack']}: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} "
          f"skipped; report {markdown} and {as_json.name}")
    return code
