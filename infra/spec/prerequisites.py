"""Requires and provides: what each platform part needs from the cluster, and who provides it.

A need names a capability in a small vocabulary:

| capability | meaning |
|---|---|
| `network-policy` | a CNI that enforces NetworkPolicy (the teams' default-deny) |
| `audit-log` | the API server keeps an audit trail (on existing clusters: run with docs/audit-policy.yaml) |
| `csi:<driver>` | the CSI driver a StorageClass provisions with (registered as a CSIDriver object) |
| `volume-snapshots` | the snapshot.storage.k8s.io CRDs and the snapshot controller |
| `autoscaler` | something that adds nodes to a pool whose minimum is below its maximum |
| `spot-interruption` | Spot nodes drained when the cloud reclaims them |
| `group-claims` | cluster login that puts the identity provider's groups into requests (RBAC subjects) |
| `workload-identity` | pods reach cloud storage (or the managed Prometheus) with a federated identity, no static key |
| `crd:<group>` | the CRDs of an API group whose objects the platform declares but does not install |
| `device:<resource>` | a device plugin advertising an extended resource the pools' pods request |
| `link:<network>` | a worker of a multi-cluster stack: the path (vpn, interconnect, public) a burst connection takes |
| `secret:<name>` | a worker: a Secret the site creates in each bursting team namespace (MultiKueue copies none) |
| `load-balancer` | Services of type LoadBalancer get an external address (the front door's gateway; MetalLB on-prem) |
| `dns` | the front door's host name resolves to the gateway's address (a record the site keeps) |
| `acme-http01` | the ACME server reaches the gateway on port 80 from the internet (the http01 certificate challenge) |
| `service-account-issuer` | the gateway knows the issuer of the cluster's ServiceAccount tokens (CI's machine access) |
| `private-store-endpoint` | the cloud store's names resolve to the private addresses egress.objectStore opens |

A cloud cluster provides by the mechanisms the cluster layer configures (`provides` in infra/spec/clouds); an
existing cluster (on-prem, kind) provides what its stack declares under `cluster.existing.provides`; the platform
provides what its own charts install. A need that nothing provides is a plan finding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from infra.components import CERT_MANAGER, ISTIO, crd_groups
from infra.spec.clouds import CLOUD_STORAGE, CLOUDS
from infra.spec.versions import CLUSTER_AUTOSCALER_IMAGES

CAPABILITY_WORDS = ("network-policy", "audit-log", "volume-snapshots", "autoscaler", "spot-interruption",
                    "group-claims", "workload-identity", "load-balancer", "dns", "acme-http01",
                    "service-account-issuer", "private-store-endpoint")
CAPABILITY_PREFIXES = ("csi:", "crd:", "device:")
_CAPABILITY = re.compile(r"^(network-policy|audit-log|volume-snapshots|autoscaler|spot-interruption|group-claims|"
                         r"workload-identity|load-balancer|dns|acme-http01|service-account-issuer|private-store-endpoint|(csi|crd):[a-z0-9]([a-z0-9.-]*[a-z0-9])?|"
                         r"device:[a-z0-9./_-]+)$")
VOCABULARY = ", ".join([*CAPABILITY_WORDS, "csi:<driver>", "crd:<api group>", "device:<resource>"])

# API groups whose CRDs the platform's own charts install (infra/components.py).
PLATFORM_CRD_GROUPS = crd_groups()
# Object storage claims on Rook-Ceph (ObjectBucketClaim) come with Rook's CRDs.
OBC_GROUP = "objectbucket.io"
SNAPSHOT_GROUP = "snapshot.storage.k8s.io"

By = Literal["cluster", "site", "platform"]

# Front-door needs the site meets outside the cluster, declared under frontDoor.provides (any cluster kind).
FRONT_DOOR_SITE_NEEDS = ("dns", "acme-http01")
# The front door's machine access: the gateway verifies the cluster's ServiceAccount tokens (docs/front-door.md).
# Listing it under `cluster.existing.provides` provides nothing: the gateway needs the issuer itself.
SA_ISSUER = "service-account-issuer"
# The teams' pods reach a cloud store only at the private addresses egress.objectStore lists; the site keeps the
# store's names resolving there (CloudStorage.private_endpoint) and says so under egress.provides.
PRIVATE_STORE = "private-store-endpoint"
# Host names under .localhost resolve to the machine itself (RFC 6761): a laptop's front door needs no record.
LOCALHOST_SUFFIX = ".localhost"

# What observability.managedPrometheus needs where the cloud asks no more than the remote write's identity.
MANAGED_PROMETHEUS_NEED = "observability (Prometheus' remote write to the managed Prometheus)"


def capability_problem(value: str) -> str | None:
    """Why `value` is not a capability of the vocabulary, or None."""
    if _CAPABILITY.fullmatch(value):
        return None
    return f"'{value}' is not a capability: use one of {VOCABULARY}"


@dataclass(frozen=True, order=True)
class Need:
    capability: str
    who: str  # the platform part that needs it


@dataclass(frozen=True)
class Provision:
    by: By
    how: str  # the mechanism (an add-on, a cluster setting, a chart, "declared by the site")


_FIX_EXISTING = "install it on the cluster and list `{capability}` under cluster.existing.provides"


def fix(kind: str, capability: str) -> str:
    if capability in FRONT_DOOR_SITE_NEEDS:
        return f"arrange it at the site and list `{capability}` under frontDoor.provides"
    if capability == PRIVATE_STORE:
        return f"create what the need names, at the site, and list `{PRIVATE_STORE}` under egress.provides"
    if capability == SA_ISSUER:
        return ("declare frontDoor.serviceAccountIssuer: {issuer: <the cluster's service-account issuer>} (an existing "
                "cluster: its API server's --service-account-issuer)")
    if capability.startswith("link:"):
        return ("a worker's only private path to the site is its `link`, provided once its cloud side is declared: "
                "set clusters.<worker>.link.attachment (the VPN connection or interconnect attachment, routed to "
                "`from`, the worker's API endpoint admitting `from` on 443) and use that network (or public, over "
                "https)")
    if kind == "existing" and capability == "audit-log":
        return ("run the API server with --audit-policy-file (docs/audit-policy.yaml) and --audit-log-path, then list "
                "`audit-log` under cluster.existing.provides")
    if kind == "existing":
        return _FIX_EXISTING.format(capability=capability)
    if kind == "eks" and capability == "autoscaler":
        return f"the cluster autoscaler is pinned for Kubernetes {' and '.join(CLUSTER_AUTOSCALER_IMAGES)}: set " \
               "versions.kubernetes to one of them"
    login_fix = CLOUDS[kind].login_fix
    if capability == "group-claims" and login_fix:
        return login_fix
    if capability.startswith("csi:"):
        return (f"the {kind} cluster does not run {capability[4:]}: use the storage profile of the cluster's "
                "cloud (remove storage.profile)")
    return f"the {kind} cluster layer does not provide it: use a cluster kind that does"


@dataclass(frozen=True)
class Prerequisites:
    kind: str
    needs: tuple[Need, ...]
    provided: Mapping[str, Provision]

    def unmet(self) -> tuple[Need, ...]:
        return tuple(need for need in self.needs if need.capability not in self.provided)

    def by(self, who: By) -> tuple[str, ...]:
        """The needed capabilities that `who` provides."""
        return tuple(sorted({n.capability for n in self.needs
                             if (p := self.provided.get(n.capability)) is not None and p.by == who}))

    def finding_line(self, need: Need) -> str:
        remedy = fix(self.kind, need.capability)
        return f"needed by {need.who}; nothing provides it on this {self.kind} cluster: {remedy}"


def _merged(needs: list[Need]) -> tuple[Need, ...]:
    """One Need per capability, naming every part that needs it."""
    who: dict[str, list[str]] = {}
    for need in needs:
        if need.who not in who.setdefault(need.capability, []):
            who[need.capability].append(need.who)
    return tuple(Need(capability, "; ".join(parts)) for capability, parts in sorted(who.items()))


def with_needs(prerequisites: Prerequisites, needs: list[Need], provided: Mapping[str, Provision]) -> Prerequisites:
    """More needs (a multi-cluster stack's burst), and what provides them."""
    return Prerequisites(prerequisites.kind, _merged([*prerequisites.needs, *needs]),
                         {**prerequisites.provided, **provided})


def derive_needs(spec: Any, storage: Any) -> tuple[Need, ...]:
    """Every capability the platform parts of a PlatformSpec (with its StorageFacts) need from the cluster, one
    Need per capability naming every part that needs it."""
    needs: list[Need] = [Need("audit-log", "access review (docs/access.md: who changed what, who read which Secret)")]
    if spec.teams:
        needs.append(Need("network-policy", "tenancy (each team namespace's default-deny NetworkPolicies)"))
    for klass in storage.classes:
        needs.append(Need(f"csi:{klass.provisioner}", f"storage (StorageClass {klass.name})"))
    if storage.snapshot_classes:
        names = ", ".join(f"{s.name}-velero" for s in storage.snapshot_classes)
        needs.append(Need("volume-snapshots", f"storage (VolumeSnapshotClasses {names}) and Velero's CSI backups"))
    if storage.bucket_class is not None:
        needs.append(Need(f"crd:{OBC_GROUP}", "storage (ObjectBucketClaims for the team and backup buckets)"))
    for name, pool in spec.pools.items():
        if pool.autoscale is not None and pool.autoscale.min < pool.autoscale.max:
            needs.append(Need("autoscaler", f"pool {name} (autoscale {pool.autoscale.min}-{pool.autoscale.max})"))
        if pool.capacity_type == "spot":
            needs.append(Need("spot-interruption", f"pool {name} (Spot capacity)"))
        if pool.fabric_resource is not None:
            needs.append(Need(f"device:{pool.fabric_resource}", f"pool {name} (fabric {pool.fabric})"))
    if spec.identity.platform_admins or any(t.groups.engineers or t.groups.analysts or t.groups.ci
                                              for t in spec.teams.values()):
        needs.append(Need("group-claims", "access (persona RoleBindings name identity-provider groups)"))
    if storage.profile in CLOUD_STORAGE:
        needs.append(Need("workload-identity", "backup (Velero) and storage (team buckets) on cloud object storage"))
    needs += front_door_needs(spec)
    store = CLOUD_STORAGE.get(storage.profile)
    if spec.teams and store is not None and store.private_endpoint is not None:
        needs.append(Need(PRIVATE_STORE, f"team egress (team pods reach the teams' buckets only at egress.objectStore: "
                                         f"{store.private_endpoint})"))
    if spec.observability.managed_prometheus:
        needs.append(Need("workload-identity",
                          CLOUDS[spec.cluster.kind].managed_prometheus_need or MANAGED_PROMETHEUS_NEED))
    return _merged(needs)


def front_door_needs(spec: Any) -> list[Need]:
    """What the front door's gateway needs: an external address (a LoadBalancer Service, except on a laptop whose
    gateway is a NodePort behind kind's port mappings), its host name in DNS, and the certificate issuer's way to
    check the name (http01 reaches the gateway on port 80; dns01 writes the zone as cert-manager's workload
    identity)."""
    door = spec.front_door
    if door is None:
        return []
    who = f"{ISTIO.name} (the front door's gateway serving {door.host})"
    needs = [Need("dns", who)]
    if not spec.laptop:
        needs.append(Need("load-balancer", f"{ISTIO.name} (the front door's gateway Service of type LoadBalancer)"))
    acme = door.tls.acme if door.tls is not None else None
    if acme is not None and acme.solver == "http01":
        needs.append(Need("acme-http01", f"{CERT_MANAGER.name} (the front door's ACME http01 challenge for "
                                         f"{door.host})"))
    if acme is not None and acme.solver == "dns01":
        needs.append(Need("workload-identity", f"{CERT_MANAGER.name} (writes the front door's dns01 challenge "
                                               f"into {acme.dns_zone})"))
    if spec.teams:
        needs.append(Need(SA_ISSUER, f"{ISTIO.name} (the gateway accepts CI's trainyard-ci ServiceAccount tokens)"))
    return needs


def _eks_installs(spec: Any, capability: str) -> bool:
    """EKS installs the FSx driver only for an FSx datasets class, and the autoscaler only where an image of
    the cluster's minor is pinned."""
    if capability == "csi:fsx.csi.aws.com":
        return spec.storage.aws.fsx_subnet_id is not None
    if capability == "autoscaler":
        return spec.versions.kubernetes in CLUSTER_AUTOSCALER_IMAGES
    return True


def derive_prerequisites(spec: Any, storage: Any) -> Prerequisites:
    """Needs and who provides each: the cloud cluster's mechanisms, the site's declaration, the platform."""
    kind = spec.cluster.kind
    provided: dict[str, Provision] = {group: Provision("platform", "the platform's charts")
                                      for group in (f"crd:{g}" for g in PLATFORM_CRD_GROUPS)}
    for pool in spec.pools.values():
        if pool.efa_interfaces:
            provided["device:vpc.amazonaws.com/efa"] = Provision("platform", "aws-efa-k8s-device-plugin chart")
    door = spec.front_door
    if door is not None:
        for capability in door.provides:
            provided[capability] = Provision("site", "declared in frontDoor.provides")
        if door.host.endswith(LOCALHOST_SUFFIX):
            provided["dns"] = Provision("site", "a .localhost name resolves to the machine itself (RFC 6761)")
    if kind == "existing":
        for capability in spec.cluster.existing.provides:
            provided[capability] = Provision("site", "declared in cluster.existing.provides")
    else:
        for capability, how in CLOUDS[kind].provides.items():
            if kind == "eks" and not _eks_installs(spec, capability):
                continue
            provided[capability] = Provision("cluster", how)
        login = spec.cluster.chosen.login_mechanism()
        if login is not None:
            provided["group-claims"] = Provision("cluster", login)
    if PRIVATE_STORE in spec.egress.provides:
        provided[PRIVATE_STORE] = Provision("site", "declared in egress.provides")
    provided.pop(SA_ISSUER, None)
    if door is not None and door.service_account_issuer is not None:
        provided[SA_ISSUER] = Provision("site", "declared in frontDoor.serviceAccountIssuer")
    elif door is not None and spec.laptop:
        provided[SA_ISSUER] = Provision("cluster", "kind's in-cluster issuer, read through the cluster-jwks-proxy")
    elif door is not None and kind == "gke":
        provided[SA_ISSUER] = Provision("cluster", "GKE's issuer of the cluster (container.googleapis.com)")
    elif door is not None and (from_cluster := CLOUDS[kind].service_account_issuer) is not None:
        provided[SA_ISSUER] = Provision("cluster", from_cluster)
    return Prerequisites(kind, derive_needs(spec, storage), provided)
