"""Data and images follow the work: what a worker's dispatched jobs read and pull must be reachable from there.

Judged against each worker's `data` declaration (infra/spec/hybrid/burst_data.py) and the objects each cluster builds:
- datasets and checkpoints are in a bucket the worker has a declared path and credentials for, never in a team
  volume (MultiKueue copies no volume: the worker's volume of that name is another, empty one);
- the bursting team namespaces on the worker let their pods out to the manager's object store;
- every image a dispatched workload can run there (the worker's runtimes, and any image under the registries
  its admission policy allows) comes from a registry the worker declares it pulls from, and a private
  registry's pull Secret is on the account the jobs run as.
The network path of each connection is a prerequisite of the worker (`link:<network>`, `secret:<name>`):
the prerequisites check refuses a private path other than the declared link.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from infra.checks.context import StackContext
from infra.offline.images import object_images
from infra.spec import Finding, Platform
from infra.spec.clouds import CLOUD_STORAGE
from infra.spec.hybrid.burst_data import KINDS, ManagerStore, WorkerData, place
from infra.spec.policy import allowed
from infra.spec.storage.model import TEAM_DATA_ACCOUNT

CHECK = "burst-data"


def _ns(obj: dict[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("namespace", ""))


def location_findings(name: str, data: WorkerData, manager: Platform, worker: Platform) -> list[Finding]:
    """Each kind of data is in a bucket the worker reaches with declared credentials, not in a volume."""
    where = f"clusters.{name}.data"
    teams = [team.name for team in worker.teams]
    store = data.read_store
    problems: list[tuple[str, str]] = []  # (field, message)
    if store is not None and store.network == "public" and not store.endpoint.startswith("https://"):
        problems.append((f"{where}.manager.endpoint", f"{store.endpoint} is read over the public network without "
                                                     "TLS: publish it at an https endpoint, or reach it over the link"))
    for kind in KINDS:
        location = getattr(data, kind)
        if location == "volume":
            problems.append((f"{where}.{kind}", f"the bursting teams ({', '.join(teams)}) would use their `{kind}` "
                             "volume, which MultiKueue does not copy: the worker's volume of that name is another, "
                             "empty one. Set it to manager (the team's bucket there, over the link) or worker (the "
                             f"team's bucket on {name})"))
        elif location == "manager" and data.manager is None:
            problems.append((f"{where}.{kind}", "the manager's object store, but the worker declares no path or "
                             f"credentials for it: add {where}.manager {{endpoint, network, cidr, secretName}}"))
        else:
            side = manager if location == "manager" else worker
            problems += [(f"{where}.{kind}", f"team {team} has no bucket on the {location} (storage profile "
                          f"{side.storage.profile} makes none): use a location with object storage")
                         for team in teams if place(data, kind, team, manager, worker).uri is None]
    findings = [Finding(CHECK, f"{name}: {field}", message) for field, message in problems]
    if "worker" in (data.datasets, data.checkpoints) and worker.storage.profile in CLOUD_STORAGE:
        findings += [Finding(CHECK, f"{name}: teams.{team}.objectStorage", f"burst data goes to the team's "
                             f"{worker.storage.profile} bucket, but the team declares no egress destination, and its "
                             "namespaces deny all other egress: add the object store's address ranges",
                             severity="warning")
                     for team in teams if not worker.spec.teams[team].egress_destinations()]
    return findings


def _opens(policy: dict[str, Any], store: ManagerStore) -> bool:
    """A NetworkPolicy that lets every pod of its namespace out to the whole store address on its port."""
    spec = policy.get("spec", {})
    if spec.get("podSelector") not in ({}, None) or "Egress" not in spec.get("policyTypes", []):
        return False
    wanted = ipaddress.ip_network(store.cidr)
    for rule in spec.get("egress", []):
        ports = rule.get("ports") or [{"port": store.port}]
        if not any(p.get("port") == store.port and p.get("protocol", "TCP") == "TCP" for p in ports):
            continue
        for peer in rule.get("to", []):
            block = peer.get("ipBlock", {})
            if not block.get("cidr") or block.get("except"):
                continue
            network = ipaddress.ip_network(block["cidr"])
            if network.version == wanted.version and wanted.subnet_of(network):  # type: ignore[arg-type]
                return True
    return False


def egress_findings(name: str, store: ManagerStore, worker: Platform, objs: list[dict[str, Any]]) -> list[Finding]:
    policies = [obj for obj in objs if obj.get("kind") == "NetworkPolicy"]
    return [Finding(CHECK, f"{name}: Namespace {namespace}", f"its pods may not reach the manager's object store "
                    f"{store.cidr} port {store.port} (team namespaces deny other egress): BurstData opens it")
            for team in worker.teams for namespace in team.namespaces
            if not any(_ns(p) == namespace and _opens(p, store) for p in policies)]


def _covered(prefix: str, registries: Iterable[str]) -> bool:
    return any(prefix == r.rstrip("/") or allowed(prefix, [r]) for r in registries)


def registry_findings(name: str, data: WorkerData, worker: Platform, objs: list[dict[str, Any]]) -> list[Finding]:
    """Every runtime image and every allowed registry prefix on the worker is under a declared registry; each
    declared pull Secret is on every team's data account there."""
    declared = [r.prefix for r in data.registries]
    fix = f"add a registry covering it to clusters.{name}.data.registries (pullSecretName when it is private)"
    users: dict[str, list[str]] = {}
    for obj in objs:
        if obj.get("kind") == "ClusterTrainingRuntime":
            for image in object_images(obj):
                users.setdefault(image, []).append(obj["metadata"]["name"])
    findings = [Finding(CHECK, f"{name}: image {image}", f"runtimes {', '.join(sorted(users[image]))} run it, but "
                        f"the worker is not declared able to pull it: {fix}")
                for image in sorted(users) if not any(allowed(image, [r]) for r in declared)]
    findings += [Finding(CHECK, f"{name}: policy.allowedRegistries {prefix}", "the worker admits images from it, but "
                         f"is not declared able to pull them: {fix}")
                 for prefix in worker.spec.policy.allowed_registries or () if not _covered(prefix, declared)]
    accounts = {_ns(obj): obj for obj in objs if obj.get("kind") == "ServiceAccount"
                and obj["metadata"].get("name") == TEAM_DATA_ACCOUNT}
    for registry in data.registries:
        secret = registry.pull_secret_name
        for namespace in (ns for team in worker.teams for ns in team.namespaces) if secret else ():
            named = [s.get("name") for s in accounts.get(namespace, {}).get("imagePullSecrets", [])]
            if secret not in named:
                findings.append(Finding(CHECK, f"{name}: ServiceAccount {namespace}/{TEAM_DATA_ACCOUNT}",
                                        f"lacks imagePullSecrets {secret}: its pods cannot pull from "
                                        f"{registry.prefix}: the storage layer sets it from clusters.{name}.data"))
    return findings


def _declared_data(stack: StackContext) -> list[tuple[str, WorkerData, Platform]]:
    """(name, data declaration, Platform) of every worker that declares its data."""
    hybrid = stack.platform.hybrid
    if hybrid is None:
        return []
    members = [(name, hybrid.clusters[name]) for name in hybrid.workers]
    return [(name, worker.member.data, worker) for name, worker in members
            if worker.member is not None and worker.member.data is not None]


def check_burst_data_declared(stack: StackContext) -> list[Finding]:
    declared = {name for name, _, _ in _declared_data(stack)}
    return [Finding(CHECK, f"{name}: clusters.{name}.data", "not declared: dispatched jobs would use the team "
                    "volumes (MultiKueue copies none) and images from registries the worker is not declared able "
                    "to pull: declare datasets, checkpoints, manager and registries (docs/hybrid.md)")
            for name in stack.workers() if name not in declared]


def check_burst_data_location(stack: StackContext) -> list[Finding]:
    return [f for name, data, worker in _declared_data(stack)
            for f in location_findings(name, data, stack.platform, worker)]


def check_burst_data_egress(stack: StackContext) -> list[Finding]:
    return [f for name, data, worker in _declared_data(stack) if data.read_store is not None
            for f in egress_findings(name, data.read_store, worker, stack.parts[name])]


def check_burst_data_registries(stack: StackContext) -> list[Finding]:
    return [f for name, data, worker in _declared_data(stack)
            for f in registry_findings(name, data, worker, stack.parts[name])]
