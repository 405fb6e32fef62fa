"""Kubeflow Pipelines 2.16.0 in multi-user mode (docs/pipelines.md), from the vendored Kubeflow Platform 26.03:
the `kubeflow` namespace and its NetworkPolicies (common/kubeflow-namespace/base/kubeflow), then the multi-user
install with cert-manager (applications/pipeline/upstream/env/cert-manager/platform-agnostic-multi-user), patched
(infra/platform/kfp/patches.py), our Secrets in place of the archive's placeholders, and each team
namespace's objects (infra/platform/kfp/teams.py).

People reach the UI through the front door under /pipeline, as who the gateway says they are (`kubeflow-userid`);
the API server asks the cluster (SubjectAccessReview) whether that user may act in the run's namespace. Pipelines'
own pods run with Istio sidecars, so the vendored AuthorizationPolicies hold: only the gateway may hand the UI an
identity header, only Pipelines' own accounts may hand the API server one; a team pod (no sidecar) calls the API
server without the header, with a token. Team namespaces never get sidecars (the injector skips them).

Built in two steps, because the front door serves the UI: the namespace first (the front door's policy for the UI
lands in it), then, once the front door's mesh is up (its sidecar injector must run before these pods start), the
rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pulumi
import pulumi_kubernetes as k8s

from infra.components import PIPELINES, Kustomize
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, child_opts, kube_object, kustomize_directory, metadata, retained
from infra.platform.frontdoor import ISTIO_SECURITY_API
from infra.platform.frontdoor_identity import checked, derived
from infra.platform.kfp.egress import egress_policies
from infra.platform.kfp.observability import SCRAPE_POLICY, mesh_scrape_policy
from infra.platform.kfp.patches import DB_SECRET, STORE_SECRET, namespace_patches, pipelines_patches
from infra.platform.kfp.teams import team_objects
from infra.spec import Platform
from infra.spec.pipelines.model import PipelinesFacts
from infra.spec.versions import KUBEFLOW_MANIFESTS

INSTALL_PATH, NAMESPACE_PATH = (source.path for source in PIPELINES.sources if isinstance(source, Kustomize))
STORE_ADMIN = "kfp-admin"  # the SeaweedFS admin user's access key (its secret key is derived from ours)


def secret_data(facts: PipelinesFacts, value: str) -> dict[str, dict[str, str]]:
    """Secret name -> data: MySQL's root login, and SeaweedFS' admin key (derived: one secret key to keep)."""
    password = checked(facts.secret_key, value)
    return {DB_SECRET: {"username": "root", "password": password},
            STORE_SECRET: {"accesskey": STORE_ADMIN, "secretkey": derived(password, "pipelines-seaweedfs-admin")}}


def _pick(name: str) -> Callable[[dict[str, dict[str, str]]], dict[str, str]]:
    return lambda data: data[name]


class Pipelines(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider,
                 team_namespaces: Mapping[str, pulumi.Resource], opts: pulumi.ResourceOptions | None = None) -> None:
        """The `kubeflow` namespace and its policies; install() adds the rest."""
        super().__init__("trainyard:platform:Pipelines", name, None, opts)
        facts = platform.pipelines
        assert facts is not None
        self.facts, self.provider, self.team_namespaces = facts, provider, team_namespaces
        self.namespace = kustomize_directory("pipelines-namespace", KUBEFLOW_MANIFESTS, NAMESPACE_PATH,
                                             child_opts(self, provider), patches=namespace_patches())

    def install(self, secret: pulumi.Output[str] | None, after: list[pulumi.Resource]) -> None:
        """The install, after `after` (the front door: Istio's CRDs and sidecar injector, cert-manager)."""
        facts, provider = self.facts, self.provider
        # The run journal's and the definitions' volumes survive `pulumi destroy` and the install's removal.
        opts = child_opts(self, provider, [self.namespace, *after],
                          transforms=[retained("core/v1:PersistentVolumeClaim")])
        kfp = kustomize_directory(PIPELINES.name, KUBEFLOW_MANIFESTS, INSTALL_PATH, opts,
                                  patches=pipelines_patches(facts))
        # Prometheus' scrape of the workflow controller through its sidecar (infra/platform/kfp/observability.py).
        kube_object("pipelines-scrape-mesh", ISTIO_SECURITY_API, "AuthorizationPolicy",
                    metadata(SCRAPE_POLICY, PIPELINES.namespace), child_opts(self, provider, [kfp]),
                    spec=mesh_scrape_policy())
        if secret is not None:  # absent while the key is unset: MySQL and the API server wait for it
            data = secret.apply(lambda v: secret_data(facts, v))
            for name in (DB_SECRET, STORE_SECRET):
                kube_object(f"pipelines-{name}", "v1", "Secret", metadata(name, PIPELINES.namespace),
                            child_opts(self, provider, [self.namespace]), type="Opaque",
                            stringData=pulumi.Output.secret(data.apply(_pick(name))))
        for policy, spec in egress_policies(facts).items():  # what Pipelines' pods may call
            kube_object(f"{PIPELINES.namespace}-{policy}", NETWORKING_API, "NetworkPolicy",
                        metadata(policy, PIPELINES.namespace), child_opts(self, provider, [self.namespace]), spec=spec)
        for namespace, created in sorted(self.team_namespaces.items()):
            opts = child_opts(self, provider, [created, kfp])
            for api_version, kind, name, fields in team_objects(facts, namespace):
                annotations = fields.get("annotations")
                body = {key: value for key, value in fields.items() if key != "annotations"}
                kube_object(f"{namespace}-pipelines-{kind.lower()}-{name}", api_version, kind,
                            metadata(name, namespace, annotations=annotations), opts, **body)
        self.register_outputs({"version": facts.version, "artifacts": facts.artifacts,
                               "database": "/".join(facts.database)})


def pipelines(platform: Platform, provider: k8s.Provider,
              team_namespaces: Mapping[str, pulumi.Resource]) -> Pipelines | None:
    """Pipelines' first step, when the stack declares them (on the manager only: a worker's facts carry none)."""
    if platform.pipelines is None:
        return None
    return Pipelines(named("pipelines"), platform, provider, team_namespaces)
