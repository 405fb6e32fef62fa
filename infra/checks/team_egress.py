"""Team pods reach what they must, judged from the rendered NetworkPolicies: a team namespace denies all egress but
what its policies allow, so each destination a pod must reach needs a policy that selects the pod and opens the
destination's range and port. What a pod must reach follows from what it is (infra/spec/teams.py):
- every pod of a team whose bucket is in the cloud's object store: the store, and the cloud's credentials endpoint;
- every pod mounting a volume whose driver runs inside the pod (GKE's GCS FUSE sidecar): the same;
- a runtime's initializer pod whose source is `hf://`: the model hub (`egress.modelHub`).
An undeclared store refuses the stack (one error naming egress.objectStore); an undeclared model hub warns
(egress.modelHub): the runtimes that download run, their initializers fail. A declared destination that no rendered
policy opens is an error of the render. A worker's store is judged by burst-data-location instead."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.checks.context import Context
from infra.spec import Finding, Platform
from infra.spec.clouds import CLOUD_STORAGE, pod_credentials
from infra.spec.teams import HF_SCHEME, IN_POD_DRIVERS, REPLICATED_JOB_LABEL, Destination, store_destinations

CHECK = "storage"


@dataclass(frozen=True)
class Reach:
    """Pods of a namespace (with these labels; none: any pod) must reach a destination, for a reason."""

    namespace: str
    labels: Mapping[str, str]
    who: str
    destination: Destination
    why: str


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) against a pod's labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not held:
            return False
    return True


def _port_open(rule: Mapping[str, Any], port: int) -> bool:
    ports = rule.get("ports") or [{"protocol": "TCP", "port": port}]
    return any(p.get("protocol", "TCP") == "TCP" and isinstance(p.get("port"), int)
               and p["port"] <= port <= p.get("endPort", p["port"]) for p in ports)


def _peer_covers(peer: Mapping[str, Any], wanted: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    block = peer.get("ipBlock")
    if not block:
        return False
    network = ipaddress.ip_network(block["cidr"])
    if network.version != wanted.version or not wanted.subnet_of(network):  # type: ignore[arg-type]
        return False
    return not any(ipaddress.ip_network(e).overlaps(wanted) for e in block.get("except", []))


def opens(policy: Mapping[str, Any], labels: Mapping[str, str], cidr: str, port: int) -> bool:
    """The NetworkPolicy lets a pod with these labels out to the whole range on the TCP port."""
    spec = policy.get("spec", {})
    if "Egress" not in spec.get("policyTypes", []) or not selects(spec.get("podSelector") or {}, labels):
        return False
    wanted = ipaddress.ip_network(cidr)
    return any(_port_open(rule, port) and (not rule.get("to") or any(_peer_covers(p, wanted) for p in rule["to"]))
               for rule in spec.get("egress", []))


def _store_reasons(platform: Platform) -> dict[tuple[str, str], list[str]]:
    """(team, namespace) -> why every pod there reaches the object store."""
    reasons: dict[tuple[str, str], list[str]] = {}
    member = platform.member
    if member is not None and member.role == "worker":
        return reasons
    if platform.storage.profile in CLOUD_STORAGE:
        for bucket in platform.storage.buckets:
            team = bucket.team
            if team is None:
                continue
            for namespace in bucket.readers:
                reasons.setdefault((team, namespace), []).append(
                    f"the team's bucket {bucket.name} in the {platform.storage.profile} object store")
    for volume in platform.storage.volumes:
        driver = platform.storage.klass(volume.klass).provisioner
        if driver in IN_POD_DRIVERS:
            reasons.setdefault((volume.team, volume.namespace), []).append(
                f"{IN_POD_DRIVERS[driver]} {volume.name}")
    return reasons


def _hub_pods(objs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str], str]]:
    """(runtime, replicated job, pod labels, source) of every runtime pod that downloads from the model hub."""
    found = []
    for obj in objs:
        if obj.get("kind") != "ClusterTrainingRuntime":
            continue
        for job in obj.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
            pod = job.get("template", {}).get("spec", {}).get("template", {})
            spec = pod.get("spec", {})
            sources = [env.get("value", "") for c in [*spec.get("initContainers", []), *spec.get("containers", [])]
                       for env in c.get("env", []) if str(env.get("value", "")).startswith(HF_SCHEME)]
            if sources:
                labels = {**pod.get("metadata", {}).get("labels", {}), REPLICATED_JOB_LABEL: job["name"]}
                found.append((obj["metadata"]["name"], job["name"], labels, sources[0]))
    return found


def reaches(platform: Platform, objs: list[dict[str, Any]]) -> tuple[list[Reach], list[Finding]]:
    """What each pod must reach, and a finding for each kind of destination the stack does not declare."""
    spec = platform.spec
    found: list[Reach] = []
    missing: list[Finding] = []
    store_teams: set[str] = set()
    for (team, namespace), why in sorted(_store_reasons(platform).items()):
        store = store_destinations(spec.egress, spec.teams[team].egress_destinations(),
                                   pod_credentials(spec.cluster.kind, platform.storage.profile))
        if not store:
            store_teams.add(team)
        found += [Reach(namespace, {}, "its pods", d, "; ".join(why)) for d in store]
    if store_teams:
        missing.append(Finding(CHECK, "egress.objectStore", f"the pods of team(s) {', '.join(sorted(store_teams))} "
                               "must reach the object store (their bucket, or a volume whose driver runs in the pod), "
                               "but no destination is declared and team namespaces deny all other egress: declare "
                               "the store's address ranges (and the identity token service's, where the cloud has "
                               "them) under egress.objectStore (docs/prerequisites.md, team egress)"))
    hub_pods = _hub_pods(objs)
    namespaces = [ns for name, team in spec.teams.items() for ns in team.namespaces or [name]]
    if hub_pods and not spec.egress.model_hub and namespaces:
        runtimes = sorted({runtime for runtime, _, _, _ in hub_pods})
        missing.append(Finding(CHECK, "egress.modelHub", f"runtimes {', '.join(runtimes)} download their model or "
                               f"dataset from {HF_SCHEME} in their initializers, which team namespaces let out "
                               "nowhere: declare the Hugging Face Hub's address ranges under egress.modelHub (it "
                               "publishes none: the cloud stacks let the initializer pods out on 443 anywhere, "
                               "docs/prerequisites.md, team egress)", "warning"))
    found += [Reach(ns, labels, f"runtime {runtime}'s {job} pods", d, f"its initializer downloads {source}")
              for ns in namespaces for runtime, job, labels, source in hub_pods for d in spec.egress.model_hub]
    return found, missing


def egress_findings(platform: Platform, objs: list[dict[str, Any]]) -> list[Finding]:
    needed, findings = reaches(platform, objs)
    policies: dict[str, list[dict[str, Any]]] = {}
    for obj in objs:
        if obj.get("kind") == "NetworkPolicy":
            policies.setdefault(obj["metadata"].get("namespace", ""), []).append(obj)
    for reach in needed:
        for port in reach.destination.ports:
            if not any(opens(p, reach.labels, reach.destination.cidr, port) for p in policies.get(reach.namespace, [])):
                findings.append(Finding(CHECK, f"Namespace {reach.namespace}", f"{reach.who} must reach "
                                        f"{reach.destination.cidr} port {port} ({reach.why}), but no NetworkPolicy of "
                                        "the namespace lets them out there: the team egress policies "
                                        "(infra/platform/network.py) must open it"))
    return findings


def check_team_store_egress(ctx: Context) -> list[Finding]:
    return egress_findings(ctx.platform, ctx.objects())
