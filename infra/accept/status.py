"""Reading a running acceptance job: its TrainJob and Workload conditions, its pods, their events and the program's
log lines, as evidence for the report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from infra.accept.jobs import JOBSET_LABEL
from infra.accept.kube import Kube
from infra.accept.program import PREFIX

LINE = re.compile(rf"^{PREFIX} (\w+)(?:=(\S+))?((?: \w+=\S+)*)\s*$")


@dataclass
class Progress:
    """What the program printed, over every pod of a job."""

    starts: list[tuple[str, int]] = field(default_factory=list)  # (host, resumed_from) per process start
    steps: dict[str, int] = field(default_factory=dict)  # host -> last step saved
    done: set[str] = field(default_factory=set)
    busbw_gbps: float | None = None
    ranks: int | None = None


def parse(text: str, into: Progress | None = None) -> Progress:
    progress = into or Progress()
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if not match:
            continue
        word, value, rest = match.groups()
        fields = dict(pair.split("=", 1) for pair in rest.split())
        if word == "start":
            progress.starts.append((fields["host"], int(fields["resumed_from"])))
        elif word == "step" and value is not None:
            progress.steps[fields["host"]] = max(progress.steps.get(fields["host"], 0), int(value))
        elif word == "done":
            progress.done.add(fields["host"])
        elif word == "allreduce":
            progress.busbw_gbps, progress.ranks = float(fields["busbw_gbps"]), int(fields["ranks"])
    return progress


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for item in (obj or {}).get("status", {}).get("conditions", []) or []:
        if item.get("type") == kind and item.get("status") == "True":
            return dict(item)
    return None


def finished(trainjob: dict[str, Any] | None) -> str | None:
    """'Complete' or 'Failed' once the TrainJob has ended."""
    return next((kind for kind in ("Complete", "Failed") if condition(trainjob, kind)), None)


def workload_of(kube: Kube, namespace: str, trainjob: dict[str, Any]) -> dict[str, Any] | None:
    """The Kueue Workload that the TrainJob owns."""
    uid = trainjob["metadata"].get("uid")
    for workload in kube.workloads(namespace):
        if any(ref.get("uid") == uid for ref in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


def admitted(workload: dict[str, Any] | None) -> bool:
    return condition(workload, "Admitted") is not None


def job_pods(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return kube.pods(namespace, f"{JOBSET_LABEL}={name}")


def progress_of(kube: Kube, namespace: str, name: str) -> Progress:
    progress = Progress()
    for pod in job_pods(kube, namespace, name):
        parse(kube.log(namespace, pod["metadata"]["name"]), progress)
    return progress


def history(workload: dict[str, Any] | None) -> dict[str, Any]:
    """The Workload's admission history: its conditions with times, and the flavors it was admitted on."""
    if workload is None:
        return {"workload": None}
    status = workload.get("status", {})
    flavors = {a.get("name"): a.get("flavors", {})
               for a in (status.get("admission") or {}).get("podSetAssignments", [])}
    return {"workload": workload["metadata"]["name"], "clusterQueue": (status.get("admission") or {}).get(
                "clusterQueue"), "flavors": flavors,
            "conditions": [_condition_line(c) for c in status.get("conditions", []) or []]}


def _condition_line(item: dict[str, Any]) -> str:
    line = f"{item.get('lastTransitionTime', '')} {item.get('type')}={item.get('status')} {item.get('reason', '')}"
    return line.strip() + (f": {item['message']}" if item.get("message") else "")


def pod_lines(pods: list[dict[str, Any]]) -> list[str]:
    return [f"{p['metadata']['name']} {p.get('status', {}).get('phase', '?')} on "
            f"{p.get('spec', {}).get('nodeName') or '-'}" for p in pods]


def events_for(kube: Kube, namespace: str, names: set[str]) -> list[str]:
    """Events about the named objects, oldest first, as `kubectl get events` prints them."""
    found = [e for e in kube.events(namespace) if e.get("involvedObject", {}).get("name") in names]
    found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return [f"{e.get('lastTimestamp') or e.get('eventTime') or ''} {e.get('type', '')} {e.get('reason', '')} "
            f"{e['involvedObject'].get('kind', '')}/{e['involvedObject'].get('name')}: {e.get('message', '')}"
            for e in found]


def evidence(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """Everything the report shows for one job."""
    trainjob = kube.trainjob(namespace, name)
    workload = workload_of(kube, namespace, trainjob) if trainjob else None
    pods = job_pods(kube, namespace, name)
    names = {name, *(p["metadata"]["name"] for p in pods)}
    if workload:
        names.add(workload["metadata"]["name"])
    return {"trainjob": [_condition_line(c) for c in (trainjob or {}).get("status", {}).get("conditions", []) or []],
            **history(workload), "pods": pod_lines(pods), "events": events_for(kube, namespace, names)}
