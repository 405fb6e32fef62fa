"""Access: the personas as exact verbs on exact resources, bound to identity-provider groups.

- platform-admin: cluster-wide operations (drain nodes, stop or delete runaway jobs, read everything but
  secrets, Kueue's objects and pending workloads included); shared infrastructure itself (queues, quotas,
  flavors) changes through this repository, not by hand, so Kueue's batch-admin role (which edits every
  Kueue object and creates jobs anywhere) is not bound. Break-glass cluster-admin is kept out of band, never bound here.
- ml-engineer: in each team namespace, Kueue's upstream batch-user role (TrainJobs, JobSets and Jobs; reads
  LocalQueues, Workloads and pending workloads) plus what it leaves out: pods, logs, exec, the team's
  config, secrets and volumes, namespaced runtimes to read, and CronJobs (scheduled batch work; the Jobs they
  create need the queue label and meet Pod Security and the image policy like any Job).
- analyst: read-only on the team's jobs, logs and queues; no secrets, no config.
- ci: submits TrainJobs and follows them, nothing else (a ServiceAccount per namespace, plus IdP groups).
Engineers and analysts also read their team's ClusterQueue and namespaces by name, and the cluster's
ClusterTrainingRuntimes (what the SDK lists; upstream leaves that binding to the installer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.objects import RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata
from infra.spec import Platform, TeamFacts
from infra.spec.hybrid.model import burst_queue
from infra.spec.teams import CI_SERVICE_ACCOUNT
from infra.vocabulary import PERSONA_LABEL, TEAM_LABEL

PLATFORM_ADMIN, ML_ENGINEER, ANALYST, CI = "platform-admin", "ml-engineer", "analyst", "ci"

# Kueue's chart names its aggregated roles after the Helm release, which is the Kueue component's chart
# resource name ("kueue"; kubernetes-sigs/kueue charts/kueue/templates/rbac/batch_{user,admin}_role.yaml).
KUEUE_RELEASE = "kueue"
KUEUE_BATCH_USER = f"{KUEUE_RELEASE}-batch-user-role"

READ = ("get", "list", "watch")
EDIT = (*READ, "create", "update", "patch", "delete")
CORE, BATCH, TRAINER, KUEUE, JOBSET = "", "batch", "trainer.kubeflow.org", "kueue.x-k8s.io", "jobset.x-k8s.io"
VISIBILITY = "visibility.kueue.x-k8s.io"
KSERVE = "serving.kserve.io"


def rule(group: str, resources: Sequence[str], verbs: Sequence[str],
         names: Sequence[str] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {"apiGroups": [group], "resources": list(resources), "verbs": sorted(verbs)}
    if names:
        entry["resourceNames"] = list(names)
    return entry


# Trainyard's persona roles: role name -> (persona, rules). Upstream roles are bound beside them.
PERSONA_ROLES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "trainyard-platform-admin": (PLATFORM_ADMIN, [
        rule(CORE, ["nodes"], (*READ, "patch")),  # cordon and uncordon
        rule(CORE, ["pods/eviction"], ["create"]),  # drain
        rule(CORE, ["pods"], (*READ, "delete")),
        rule(CORE, ["pods/log"], ["get"]),
        rule(CORE, ["namespaces", "resourcequotas", "limitranges", "persistentvolumes",
                    "persistentvolumeclaims", "services", "configmaps", "serviceaccounts", "events"], READ),
        rule(BATCH, ["jobs"], (*READ, "delete")),
        rule(TRAINER, ["trainjobs"], (*READ, "patch", "delete")),  # suspend or stop a runaway job
        rule(TRAINER, ["trainjobs/status"], ["get"]),
        rule(TRAINER, ["clustertrainingruntimes", "trainingruntimes"], READ),
        rule(JOBSET, ["jobsets"], (*READ, "delete")),
        rule(KUEUE, ["admissionchecks", "clusterqueues", "cohorts", "localqueues", "resourceflavors", "topologies",
                     "workloadpriorityclasses", "workloads"], READ),
        rule(VISIBILITY, ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"], READ),
        # access reviews
        rule(RBAC_GROUP, ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], READ),
        rule("storage.k8s.io", ["storageclasses"], READ),
    ]),
    "trainyard-ml-engineer": (ML_ENGINEER, [
        rule(CORE, ["pods"], (*READ, "delete")),  # restart a stuck worker
        rule(CORE, ["pods/log"], ["get"]),
        rule(CORE, ["pods/exec"], ["create"]),  # debug a hanging collective
        rule(CORE, ["events", "services", "resourcequotas", "limitranges"], READ),
        rule(CORE, ["configmaps", "secrets", "persistentvolumeclaims"], EDIT),
        rule(TRAINER, ["trainingruntimes"], READ),
        rule(BATCH, ["cronjobs"], EDIT),  # scheduled batch work on spare CPU; its Jobs meet the queue policy
    ]),
    "trainyard-analyst": (ANALYST, [
        rule(CORE, ["pods", "events"], READ),
        rule(CORE, ["pods/log"], ["get"]),
        rule(BATCH, ["jobs"], READ),
        rule(TRAINER, ["trainjobs"], READ),
        rule(TRAINER, ["trainjobs/status"], ["get"]),
        rule(JOBSET, ["jobsets"], READ),
        rule(KUEUE, ["localqueues", "workloads"], READ),
        rule(VISIBILITY, ["localqueues/pendingworkloads"], READ),
    ]),
    "trainyard-ci": (CI, [
        rule(TRAINER, ["trainjobs"], ("create", "get", "list", "watch")),
        rule(TRAINER, ["trainjobs/status"], ["get"]),
    ]),
}
ROLE_OF = {persona: name for name, (persona, _) in PERSONA_ROLES.items()}
# With `models`, bound in every team namespace like the personas' roles (one right per persona in all of a team's
# namespaces); trainyard-serving admits InferenceServices in the models namespace only: engineers and CI serve and
# roll back there (a change of storageUri), analysts follow what serves.
SERVING_EDIT, SERVING_VIEW = "trainyard-serving-edit", "trainyard-serving-view"
SERVING_ROLES: dict[str, list[dict[str, Any]]] = {
    SERVING_EDIT: [rule(KSERVE, ["inferenceservices"], EDIT), rule(KSERVE, ["inferenceservices/status"], ["get"])],
    SERVING_VIEW: [rule(KSERVE, ["inferenceservices"], READ), rule(KSERVE, ["inferenceservices/status"], ["get"])],
}


def team_role_name(team: str) -> str:
    return f"trainyard-team-{team}"


def team_rules(team: TeamFacts) -> list[dict[str, Any]]:
    """Cluster-scoped reads a team needs, limited by name to what is the team's own."""
    return [
        rule(CORE, ["namespaces"], ["get"], team.namespaces),
        rule(KUEUE, ["clusterqueues"], READ, [team.queue, *(burst_queue(team.name, w) for w in team.burst_queues)]),
        rule(TRAINER, ["clustertrainingruntimes"], READ),
    ]


def groups(platform: Platform, names: Sequence[str]) -> list[dict[str, str]]:
    identity = platform.spec.identity
    return [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": identity.group(name)} for name in names]


def ci_subjects(platform: Platform) -> tuple[list[str], list[str]]:
    """The CI persona's identities as the API server names them: its ServiceAccounts and its groups."""
    users = sorted(f"system:serviceaccount:{ns}:{CI_SERVICE_ACCOUNT}" for team in platform.teams
                   for ns in team.namespaces)
    names = sorted({g for spec in platform.spec.teams.values() for g in spec.groups.ci})
    return users, [platform.spec.identity.group(name) for name in names]


class Access(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainyard:platform:Access", name, None, opts)
        self._k8s = provider
        self._platform = platform
        for role_name, (persona, rules) in PERSONA_ROLES.items():
            self._role(f"role-{persona}", role_name, {PERSONA_LABEL: persona}, rules)
        admins = groups(platform, platform.spec.identity.platform_admins)
        if admins:
            self._binding("trainyard-platform-admin", PLATFORM_ADMIN, ROLE_OF[PLATFORM_ADMIN], admins, {})
        if platform.models is not None:
            for role_name, rules in SERVING_ROLES.items():
                self._role(f"role-{role_name}", role_name, {}, rules)
        for team in platform.teams:
            self._team(team, team_namespaces)
        self.register_outputs({"personas": sorted(ROLE_OF), "platformAdmins": len(admins)})

    def _team(self, team: TeamFacts, team_namespaces: Mapping[str, pulumi.Resource]) -> None:
        spec = self._platform.spec.teams[team.name].groups
        labels = {TEAM_LABEL: team.name}
        engineers, analysts = groups(self._platform, spec.engineers), groups(self._platform, spec.analysts)
        team_role = team_role_name(team.name)
        self._role(f"role-team-{team.name}", team_role, labels, team_rules(team))
        for persona, subjects in ((ML_ENGINEER, engineers), (ANALYST, analysts)):
            if subjects:
                self._binding(f"{team_role}-{persona}", persona, team_role, subjects, labels)
        for ns in team.namespaces:
            account = {"kind": "ServiceAccount", "name": CI_SERVICE_ACCOUNT, "namespace": ns}
            bindings = [(ROLE_OF[ML_ENGINEER], ML_ENGINEER, ROLE_OF[ML_ENGINEER], engineers),
                        (f"{ROLE_OF[ML_ENGINEER]}-kueue", ML_ENGINEER, KUEUE_BATCH_USER, engineers),
                        (ROLE_OF[ANALYST], ANALYST, ROLE_OF[ANALYST], analysts),
                        (ROLE_OF[CI], CI, ROLE_OF[CI], [account, *groups(self._platform, spec.ci)])]
            if self._platform.models is not None:
                bindings += [(SERVING_EDIT, ML_ENGINEER, SERVING_EDIT, engineers),
                             (f"{SERVING_EDIT}-ci", CI, SERVING_EDIT, [account, *groups(self._platform, spec.ci)]),
                             (SERVING_VIEW, ANALYST, SERVING_VIEW, analysts)]
            for binding, persona, role, subjects in bindings:
                if subjects:
                    self._binding(binding, persona, role, subjects, labels, ns, team_namespaces[ns])

    def _role(self, resource_name: str, name: str, labels: Mapping[str, str],
              rules: list[dict[str, Any]]) -> None:
        kube_object(resource_name, RBAC_API, "ClusterRole", metadata(name, labels=labels), child_opts(self, self._k8s),
                    rules=rules)

    def _binding(self, name: str, persona: str, role: str, subjects: list[dict[str, str]],
                 labels: Mapping[str, str], ns: str | None = None,
                 namespace: pulumi.Resource | None = None) -> None:
        """A RoleBinding in `ns` once its namespace exists, or a ClusterRoleBinding without `ns`."""
        meta = metadata(name, ns, {**labels, PERSONA_LABEL: persona})
        ref = {"kind": "ClusterRole", "apiGroup": RBAC_GROUP, "name": role}
        if ns is None:
            kube_object(f"crb-{name}", RBAC_API, "ClusterRoleBinding", meta, child_opts(self, self._k8s),
                        roleRef=ref, subjects=subjects)
            return
        kube_object(f"rb-{ns}-{name}", RBAC_API, "RoleBinding", meta,
                    child_opts(self, self._k8s, depends_on=[namespace] if namespace else []),
                    roleRef=ref, subjects=subjects)
