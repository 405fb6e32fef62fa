"""KServe 0.16.0 in Standard mode (docs/models.md "Serving"), from the vendored Kubeflow Platform 26.03
(applications/kserve/kserve), patched (infra/platform/models/serving_patches.py): no Knative, no Ingress, Deployments
that roll with maxUnavailable 0, predictor pods that pass PSA `restricted`.

Its controller runs in `kubeflow`, Pipelines' namespace (the folder renders there; on a stack without Pipelines the
same namespace folder is installed here). It needs cert-manager, which the front door installs: the webhooks'
serving certificates and their CA bundles come from it, so the install waits for the front door. Teams serve in
their models namespaces (`<team>-models`): the admission policy there (infra/platform/models/serving_policy.py)
holds each InferenceService to the team's own artifacts, its serving pool and its budget.

Its CRDs are applied server-side like every object (the provider's enable_server_side_apply,
infra/cluster/base.py): inferenceservices and the two LLM CRDs are larger than the 256 KiB a client-side
last-applied annotation may hold.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.components import KSERVE, Kustomize
from infra.kit.naming import named
from infra.kit.objects import NETWORKING_API, child_opts, kube_object, kustomize_directory, metadata
from infra.platform.kfp.patches import namespace_patches
from infra.platform.kfp.pipelines import NAMESPACE_PATH
from infra.platform.models.linear_runtime import LINEAR_RUNTIME, linear_runtime
from infra.platform.models.serving_patches import NS, serving_patches
from infra.platform.network import ANYWHERE, CLUSTER_PODS, tcp
from infra.spec import Platform
from infra.spec.versions import KUBEFLOW_MANIFESTS

(PATH,) = (source.path for source in KSERVE.sources if isinstance(source, Kustomize))
CONTROLLER_PODS = {"control-plane": "kserve-controller-manager"}  # the vendored controller's pod label
SERVING_API = "serving.kserve.io/v1alpha1"


def controller_policy() -> dict[str, object]:
    """The controller's ingress in `kubeflow` (whose vendored policy admits only same-namespace traffic; its own
    `kserve` policy goes with Pipelines' patches): the API server calls the webhooks from the control plane's
    network, which has no address known at plan time, so that flow is narrowed to its port; Prometheus scrapes the
    metrics behind kube-rbac-proxy."""
    (webhook,), (scrape,) = KSERVE.webhook_ports, KSERVE.metrics_ports
    return {"podSelector": {"matchLabels": dict(CONTROLLER_PODS)}, "policyTypes": ["Ingress"],
            "ingress": [{"from": ANYWHERE, "ports": tcp([webhook])}, {"from": CLUSTER_PODS, "ports": tcp([scrape])}]}


class Serving(pulumi.ComponentResource):
    def __init__(self, name: str, platform: Platform, provider: k8s.Provider, after: list[pulumi.Resource],
                 namespace: pulumi.Resource | None, opts: pulumi.ResourceOptions | None = None) -> None:
        """`after`: the front door (cert-manager); `namespace`: Pipelines' `kubeflow` namespace, None without it."""
        super().__init__("trainyard:platform:Serving", name, None, opts)
        models = platform.models
        assert models is not None
        if namespace is None:
            namespace = kustomize_directory("serving-namespace", KUBEFLOW_MANIFESTS, NAMESPACE_PATH,
                                            child_opts(self, provider), patches=namespace_patches())
        kserve = kustomize_directory(KSERVE.name, KUBEFLOW_MANIFESTS, PATH,
                                     child_opts(self, provider, [namespace, *after]), patches=serving_patches())
        kube_object("kserve-controller-ingress", NETWORKING_API, "NetworkPolicy",
                    metadata("kserve-controller", NS), child_opts(self, provider, [namespace]),
                    spec=controller_policy())
        # The example pipeline's model format (examples/serving/): after KServe, whose webhook validates runtimes.
        kube_object("kserve-runtime-linear", SERVING_API, "ClusterServingRuntime", metadata(LINEAR_RUNTIME),
                    child_opts(self, provider, [kserve]), spec=linear_runtime())
        self.register_outputs({"version": models.serving_version, "mode": "Standard",
                               "teams": [t.team for t in models.teams if t.serving is not None]})


def serving(platform: Platform, provider: k8s.Provider, after: list[pulumi.Resource],
            namespace: pulumi.Resource | None) -> Serving | None:
    """KServe, when the stack declares `models` (on the manager only: a worker's facts carry none)."""
    if platform.models is None:
        return None
    return Serving(named("serving"), platform, provider, after, namespace)
