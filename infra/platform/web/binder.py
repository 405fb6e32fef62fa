"""Web access from directory groups (docs/front-door.md, "Each team sees only its own"): the web roles, and the
binder that gives a signed-in person their groups' web rights as per-user RoleBindings.

Why a binder: in Kubeflow Platform 26.03, Pipelines authorizes a request by a SubjectAccessReview that carries only
the user from `kubeflow-userid`, no groups (kubeflow-platform reference §2.3), and KFAM lists contributors by a
per-user RoleBinding (§2.4). A RoleBinding to a directory group therefore never matches on the web. So the
gateway, after it verified the person's token and wrote `kubeflow-userid`/`kubeflow-groups` from it, mirrors every
UI request to the binder (a VirtualService `mirror`, fire and forget) and routes /web-access/ to it; the binder
(infra/platform/web/server.py) writes one expiring RoleBinding per team namespace the groups reach and
deletes those the groups no longer justify. Revocation: a binding lives until the token that asked expires (at most
the session lifetime, oauth2-proxy's cookie), so a person removed from a group loses web access within one session.

Least rights, held by the API server rather than by the binder's good behaviour:
- the web roles carry only Pipelines' SubjectAccessReview rules (upstream's aggregate-to-kubeflow-pipelines-*
  minus their Argo Workflow and ScheduledWorkflow rules, real workload objects kubectl would honour: the personas
  run work through the queues, not around them); the only API objects they name are Pipelines' own pipeline
  definitions (its `pipelines`/`pipelineversions` CRDs, where installed), the same right as on the web;
- the binder's account has, in each team namespace only, a Role to manage RoleBindings and `bind` those two
  ClusterRoles by name: no cluster-wide right, no `escalate`, no other namespace;
- a ValidatingAdmissionPolicy refuses any RoleBinding write by the binder that is not one of ours (labelled,
  one User subject named in its `user` annotation, a web role), so it cannot delete or rewrite a persona binding;
- only the gateway's pods reach the binder (NetworkPolicy), and the gateway overwrites both identity headers from
  the verified token and refuses a request whose token lacks the claim a header would come from.
CI's `trainyard-ci` accounts get their web role by a static RoleBinding: their tokens carry no groups.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import GATEWAY_PEER, GROUPS_HEADER, ISTIO, USERID_HEADER
from infra.kit.objects import NETWORKING_API, RBAC_API, RBAC_GROUP, child_opts, kube_object, metadata
from infra.platform.web import server
from infra.spec.frontdoor.web_access import KFAM_ROLES, WEB_CI_ROLE, WEB_ROLES, FrontDoorFacts
from infra.spec.versions import WEB_BINDER_IMAGE
from infra.vocabulary import TEAM_LABEL

NAME = "trainyard-web-binder"
ACCOUNT = f"system:serviceaccount:{ISTIO.namespace}:{NAME}"
SERVICE_HOST = f"{NAME}.{ISTIO.namespace}.svc.cluster.local"
SERVICE_PORT, POD_PORT = 80, 8080
POD_LABELS = {"app.kubernetes.io/name": NAME}
CONFIG_DIR = "/etc/web-binder"
WEB_ACCESS_PATH = "/web-access/"  # a person's own web rights, refreshed now (the mirror does it on every request)
ADMISSION_API = "admissionregistration.k8s.io/v1"
PIPELINES = "pipelines.kubeflow.org"  # the SubjectAccessReview group of Pipelines' API (KFP common/const.go)


def _rule(resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [PIPELINES], "resources": resources, "verbs": verbs}


READ_RULES = [_rule(["pipelines", "pipelineversions", "experiments", "jobs"], ["get", "list"]),
              _rule(["runs"], ["get", "list", "readArtifact"]),
              _rule(["visualizations"], ["create"])]
EDIT_RULES = [*READ_RULES,
              _rule(["pipelines", "pipelineversions"], ["create", "delete", "update"]),
              _rule(["experiments"], ["archive", "create", "delete", "unarchive"]),
              _rule(["runs"], ["archive", "create", "delete", "retry", "terminate", "unarchive", "reportMetrics",
                               "readArtifact"]),
              _rule(["jobs"], ["create", "delete", "disable", "enable"])]
# CI submits: uploads pipelines, starts runs in experiments, reads them; never deletes or stops.
CI_RULES = [*READ_RULES,
            _rule(["pipelines", "pipelineversions", "experiments", "runs"], ["create"])]
ROLE_RULES = {WEB_ROLES["read"]: READ_RULES, WEB_ROLES["edit"]: EDIT_RULES, WEB_CI_ROLE: CI_RULES}
BOUND_ROLES = sorted({WEB_ROLES["read"], WEB_ROLES["edit"]})  # what the binder may bind
# The binder's own rights in a team namespace (and nowhere else).
BINDER_RULES = [
    {"apiGroups": [RBAC_GROUP], "resources": ["rolebindings"], "verbs": ["create", "delete", "get", "list", "patch"]},
    {"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": BOUND_ROLES},
]
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                  "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def grant_table(facts: FrontDoorFacts, session_seconds: int) -> dict[str, Any]:
    """The binder's configuration: each group's (namespace, right) pairs, the team namespaces it may write, the
    role per right, KFAM's role names, the identity headers the gateway writes, and the session lifetime."""
    groups = sorted({grant.group for grant in facts.grants})
    return {"port": POD_PORT, "userHeader": USERID_HEADER, "groupsHeader": GROUPS_HEADER,
            "sessionSeconds": session_seconds, "namespaces": list(facts.team_namespaces),
            "roles": dict(WEB_ROLES), "kfamRoles": dict(KFAM_ROLES),
            "groups": {group: [list(pair) for pair in facts.bindings_of(group)] for group in groups}}


def _managed(expression: str) -> str:
    return f"'{server.MANAGED_LABEL}' in {expression}.metadata.labels && " \
           f"{expression}.metadata.labels['{server.MANAGED_LABEL}'] == 'true'"


def binder_policy() -> dict[str, Any]:
    """What the binder may write, whatever its RBAC says: our web bindings only (an UPDATE cannot turn a persona
    binding into one, since a RoleBinding's roleRef is immutable)."""
    b = "variables.binding"
    roles = ", ".join(f"'{role}'" for role in BOUND_ROLES)
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [RBAC_GROUP], "apiVersions": ["*"],
                                                "operations": ["CREATE", "UPDATE", "DELETE"],
                                                "resources": ["rolebindings"]}]},
        "matchConditions": [{"name": "the-web-binder", "expression": f"request.userInfo.username == '{ACCOUNT}'"}],
        "variables": [{"name": "binding", "expression": "request.operation == 'DELETE' ? oldObject : object"}],
        "validations": [
            {"expression": f"has({b}.metadata.labels) && {_managed(b)}",
             "message": f"the web binder writes only RoleBindings labelled {server.MANAGED_LABEL}=true"},
            {"expression": f"{b}.roleRef.kind == 'ClusterRole' && {b}.roleRef.name in [{roles}]",
             "message": f"the web binder binds only the web roles ({', '.join(BOUND_ROLES)})"},
            {"expression": f"has({b}.subjects) && size({b}.subjects) == 1 && {b}.subjects[0].kind == 'User' && "
                           f"has({b}.metadata.annotations) && '{server.USER}' in {b}.metadata.annotations && "
                           f"{b}.metadata.annotations['{server.USER}'] == {b}.subjects[0].name",
             "message": "a web binding names one User, the one of its `user` annotation"},
        ],
    }


def binder_network_policy() -> dict[str, Any]:
    return {"podSelector": {"matchLabels": dict(POD_LABELS)}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [GATEWAY_PEER], "ports": [{"protocol": "TCP", "port": POD_PORT}]}]}


def binder_pod(config_version: str) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/healthz", "port": POD_PORT}, "periodSeconds": 20}
    return {
        "metadata": {"labels": dict(POD_LABELS), "annotations": {"trainyard.io/config": config_version}},
        "spec": {
            "serviceAccountName": NAME, "securityContext": RESTRICTED_POD,
            "containers": [{
                "name": "binder", "image": WEB_BINDER_IMAGE, "command": ["python", f"{CONFIG_DIR}/server.py"],
                "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                "ports": [{"name": "http", "containerPort": POD_PORT}],
                "readinessProbe": probe, "livenessProbe": probe,
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": RESTRICTED_CONTAINER,
                "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]}],
            "volumes": [{"name": "config", "configMap": {"name": NAME}}],
        },
    }


class WebBinder(pulumi.ComponentResource):
    """The web roles, CI's static web bindings, and the binder (account, rights per team namespace, admission
    policy, configuration, Deployment, Service, NetworkPolicy), all in the gateway's namespace."""

    def __init__(self, name: str, facts: FrontDoorFacts, teams: Mapping[str, str], session_seconds: int,
                 provider: k8s.Provider, after: list[pulumi.Resource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        """`teams`: each team namespace's team."""
        super().__init__("trainyard:platform:WebBinder", name, opts=opts)
        ns = ISTIO.namespace
        base = child_opts(self, provider, after)
        roles = [kube_object(f"web-role-{role}", RBAC_API, "ClusterRole", metadata(role), child_opts(self, provider),
                             rules=rules) for role, rules in ROLE_RULES.items()]
        account = kube_object("web-binder-account", "v1", "ServiceAccount", metadata(NAME, ns), base)
        bound = child_opts(self, provider, [*roles, account])
        for namespace in facts.team_namespaces:
            labels = {TEAM_LABEL: teams[namespace]}
            kube_object(f"web-ci-{namespace}", RBAC_API, "RoleBinding", metadata(WEB_CI_ROLE, namespace, labels), bound,
                        roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": WEB_CI_ROLE},
                        subjects=[{"kind": "ServiceAccount", "name": sa, "namespace": namespace}
                                  for sa_ns, sa in facts.machine_accounts if sa_ns == namespace])
            kube_object(f"web-binder-role-{namespace}", RBAC_API, "Role", metadata(NAME, namespace, labels), bound,
                        rules=BINDER_RULES)
            kube_object(f"web-binder-binding-{namespace}", RBAC_API, "RoleBinding", metadata(NAME, namespace, labels),
                        bound, roleRef={"apiGroup": RBAC_GROUP, "kind": "Role", "name": NAME},
                        subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": ns}])
        policy = kube_object("web-binder-policy", ADMISSION_API, "ValidatingAdmissionPolicy", metadata(NAME),
                             child_opts(self, provider), spec=binder_policy())
        kube_object("web-binder-policy-binding", ADMISSION_API, "ValidatingAdmissionPolicyBinding", metadata(NAME),
                    child_opts(self, provider, [policy]), spec={"policyName": NAME, "validationActions": ["Deny"]})
        table = json.dumps(grant_table(facts, session_seconds), indent=1, sort_keys=True)
        code = Path(server.__file__).read_text()
        config = kube_object("web-binder-config", "v1", "ConfigMap", metadata(NAME, ns), base,
                             data={"grants.json": table, "server.py": code})
        version = hashlib.sha256((table + code).encode()).hexdigest()[:16]  # a new table or code rolls the pod
        kube_object("web-binder", "apps/v1", "Deployment", metadata(NAME, ns, POD_LABELS),
                    child_opts(self, provider, [config, account, policy]),
                    spec={"replicas": 1, "selector": {"matchLabels": dict(POD_LABELS)},
                          "template": binder_pod(version)})
        kube_object("web-binder-service", "v1", "Service", metadata(NAME, ns, POD_LABELS), base,
                    spec={"selector": dict(POD_LABELS),
                          "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": POD_PORT}]})
        kube_object("web-binder-ingress", NETWORKING_API, "NetworkPolicy", metadata(f"allow-gateway-to-{NAME}", ns),
                    base, spec=binder_network_policy())
        self.register_outputs({"namespaces": list(facts.team_namespaces)})

