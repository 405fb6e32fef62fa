"""Small shared pieces for the platform components: child options and Kubernetes object helpers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kit.naming import named
from infra.kit.overlays import write_overlay
from infra.vocabulary import PSA_PREFIX

if TYPE_CHECKING:
    from infra.spec.versions import Chart, Manifests  # pinned sources: a chart archive, a manifests release

MANAGED_BY = {"app.kubernetes.io/managed-by": "trainyard"}
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"


def policy_rule(groups: list[str], resources: list[str], verbs: list[str],
                names: list[str] | None = None) -> dict[str, Any]:
    """An RBAC PolicyRule, narrowed to `names` when given."""
    body: dict[str, Any] = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        body["resourceNames"] = names
    return body
NETWORKING_API = "networking.k8s.io/v1"


def child_opts(parent: pulumi.Resource, provider: pulumi.ProviderResource,
               depends_on: Sequence[pulumi.Resource] = (), **options: Any) -> pulumi.ResourceOptions:
    """Options for a resource owned by a component, on the cluster's provider."""
    return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on), **options)


def metadata(name: str, namespace: str | None = None, labels: Mapping[str, str] | None = None,
             annotations: Mapping[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgsDict:
    meta: k8s.meta.v1.ObjectMetaArgsDict = {"name": name, "labels": {**MANAGED_BY, **(labels or {})}}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def type_token(api_version: str, kind: str) -> str:
    """The type pulumi-kubernetes registers a kind under; core-group versions are spelled `core/v1`."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def kube_object(resource_name: str, api_version: str, kind: str, meta: k8s.meta.v1.ObjectMetaArgsDict,
                opts: pulumi.ResourceOptions, **fields: Any) -> pulumi.CustomResource:
    """One Kubernetes object with its top-level fields spelled as the API spells them (camelCase), as in
    manifests/. It is registered under the same type as pulumi-kubernetes' class for the kind, so the
    provider, policy packs and state see the same resource. The generated classes are not used: they
    translate every nested field name and attach aliases to long-removed API versions (extensions/v1beta1,
    rbac v1alpha1/v1beta1) that the SDK resolves for every object: together about a third of the time of a
    100-team plan (benchmarks/render_scale.py)."""
    props = {"apiVersion": api_version, "kind": kind, "metadata": meta, **fields}
    return pulumi.CustomResource(type_token(api_version, kind), named(resource_name), props, opts)


def retained(type_suffix: str) -> pulumi.ResourceTransform:
    """A transform that keeps the objects of one type (their Pulumi type ends with `type_suffix`) on `pulumi
    destroy` and on the removal of the chart or kustomization that declares them."""
    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_.endswith(type_suffix):
            kept = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(retain_on_delete=True))
            return pulumi.ResourceTransformResult(props=args.props, opts=kept)
        return None
    return transform


# CRDs that a chart installs survive: deleting a CRD deletes every object of that kind (all TrainJobs, all queues).
_retain_crds = retained("apiextensions.k8s.io/v1:CustomResourceDefinition")


def helm_chart(name: str, chart: Chart, namespace: str, values: Mapping[str, Any],
               opts: pulumi.ResourceOptions, skip_crds: bool = False) -> k8s.helm.v4.Chart:
    """A pinned upstream chart, installed from its verified archive in the local chart cache
    (scripts/fetch-charts; the digest is in the path), so an install downloads nothing and installs exactly
    what `trainyard plan` rendered. Pulumi renders it (previews show every object)."""
    # In a cluster's scope the resource name carries the cluster; the release keeps its own name.
    release = {"name": name} if named(name) != name else {}
    return k8s.helm.v4.Chart(
        named(name),
        chart=chart.path,
        version=chart.version,
        namespace=namespace,
        values=dict(values),
        skip_crds=skip_crds,
        **release,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transforms=[_retain_crds])),
    )



def kustomize_directory(name: str, release: Manifests, path: str, opts: pulumi.ResourceOptions,
                        namespace: str | None = None,
                        patches: Sequence[Mapping[str, Any]] | pulumi.Output[Sequence[Mapping[str, Any]]] = (),
                        ) -> k8s.kustomize.v2.Directory:
    """A folder of a vendored release of upstream manifests (`path` inside `release`, e.g. common/cert-manager/base),
    installed from its verified, extracted tree in `.manifests/<sha256>/` (scripts/fetch-manifests) through an
    overlay of ours (infra/kit/overlays.py) that lists `patches` as kustomize applies them. `pulumi up` builds it
    with the provider's kustomize and downloads nothing; `trainyard plan` builds the same overlay with
    `kubectl kustomize` and checks every object. `namespace` goes to namespaced objects the folder leaves without
    one (the provider's default namespace otherwise). CRDs are retained on delete, as a chart's are. `patches` that
    hold an output (a value only the created cluster knows) write the overlay once it is known."""
    directory = patches.apply(lambda known: write_overlay(release, path, known)) \
        if isinstance(patches, pulumi.Output) else write_overlay(release, path, patches)
    return k8s.kustomize.v2.Directory(
        named(name),
        directory=directory,
        namespace=namespace,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transforms=[_retain_crds])),
    )

def namespace(name: str, resource_name: str, opts: pulumi.ResourceOptions,
              labels: Mapping[str, str] | None = None) -> pulumi.CustomResource:
    return kube_object(resource_name, "v1", "Namespace", metadata(name, labels=labels), opts)


def psa_labels(level: str, kubernetes: str) -> dict[str, str]:
    """Enforce the team's level; audit and warn always at `restricted`, so an exception stays visible.
    Versions are pinned to the cluster's minor: a Kubernetes upgrade does not tighten rules unreviewed."""
    labels = {}
    for mode, mode_level in (("enforce", level), ("audit", "restricted"), ("warn", "restricted")):
        labels[f"{PSA_PREFIX}/{mode}"] = mode_level
        labels[f"{PSA_PREFIX}/{mode}-version"] = f"v{kubernetes}"
    return labels
