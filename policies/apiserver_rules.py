"""What the API server itself would refuse in what the stack registers: the CEL rules of the CRDs
(`x-kubernetes-validations`) and the validating webhooks of the installed Kueue, Trainer and JobSet, as
infra/offline/apiserver re-checks them. Under `pulumi preview` the refusal comes before anything is applied;
`trainyard validate` runs these same rules through the offline runner (no plan check repeats them).

The CRDs: the offline runner hands over the index of its run (`using`); under the Pulumi CLI, the pinned
directories ($TRAINYARD_CRDS, else ../shared/crds) completed by the CRDs the stack registers. The versions (which
CRD directories, which webhook rules): those of the Kueue, Trainer and JobSet charts the stack registers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pulumi_policy import PolicyResource, ReportViolation, StackValidationArgs
from pulumi_policy.proxy import UnknownValueError

from infra.apiserver import webhooks
from infra.apiserver.plan import crd_cel_refusals, unevaluable_crd_rules, webhook_refusals
from infra.apiserver.schema import CrdIndex, default_crds_dir
from infra.apiserver.verdict import Refusal, subject
from infra.kit import paths
from infra.spec.versions import Versions
from policies.kube import CHART_TYPES, chart_versions, get, is_list, is_map

ROOT = paths.ROOT
NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")
CHART_FIELDS = {"kueue": "kueue", "kubeflow-trainer": "trainer", "jobset": "jobset"}

_index: ContextVar[CrdIndex | None] = ContextVar("trainyard_crd_index", default=None)
Wanted = Callable[[str, str], bool]  # (apiVersion, kind) -> whether a rule reads such objects


@contextmanager
def using(index: CrdIndex | None) -> Iterator[None]:
    """Judge custom resources against this index (the offline run's) instead of building one."""
    token = _index.set(index)
    try:
        yield
    finally:
        _index.reset(token)


CRD_TYPE = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def _type_of(resource_type: str) -> tuple[str, str] | None:
    """'kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue' -> ('kueue.x-k8s.io/v1beta2', 'ClusterQueue'); core kinds
    drop the `core/` group; None for what is not a Kubernetes object (charts, providers, other clouds)."""
    if not resource_type.startswith("kubernetes:") or resource_type.startswith(NOT_OBJECTS) \
            or resource_type in CHART_TYPES:
        return None
    _, group_version, kind = resource_type.split(":", 2)
    return group_version.removeprefix("core/"), kind


def _types(resources: Sequence[PolicyResource]) -> Iterator[tuple[str, str]]:
    """(apiVersion, kind) of every registered Kubernetes object."""
    for resource in resources:
        typed = _type_of(resource.resource_type)
        if typed is not None:
            yield typed


def _plain(value: Any) -> Any:
    """The object as plain dicts and lists; raises UnknownValueError at a value unknown during preview."""
    if is_map(value):
        return {str(key): _plain(value[key]) for key in value}
    if is_list(value):
        return [_plain(item) for item in value]
    return value


def kube_objects(resources: Sequence[PolicyResource], wanted: Wanted,
                 ) -> tuple[list[tuple[PolicyResource, dict[str, Any]]], list[tuple[PolicyResource, str]]]:
    """(resource, object) for the Kubernetes objects `wanted` picks, and (resource, why) for those whose values are
    not known yet (a preview of objects that read other resources' outputs)."""
    known: list[tuple[PolicyResource, dict[str, Any]]] = []
    unknown: list[tuple[PolicyResource, str]] = []
    for resource in resources:
        typed = _type_of(resource.resource_type)
        if typed is None or not wanted(*typed):
            continue
        try:  # the provider sends apiVersion and kind from the type when the inputs leave them out
            known.append((resource, {"apiVersion": typed[0], "kind": typed[1], **_plain(resource.props)}))
        except UnknownValueError as error:
            unknown.append((resource, error.message))
    return known, unknown


def installed_versions(resources: Sequence[PolicyResource]) -> Versions:
    """The pinned versions of the charts the stack registers (the defaults for a component it does not install)."""
    charts: dict[str, Any] = {CHART_FIELDS[name]: version for name, (version, _) in chart_versions(resources).items()}
    return Versions.model_construct(**charts)


def crd_index(resources: Sequence[PolicyResource]) -> CrdIndex:
    explicit = _index.get()
    if explicit is not None:
        return explicit
    # Only CRDs of kinds the stack registers objects of: no other schema is looked up, and reading a CRD whole
    # through the analyzer's proxies is most of this rule's time (an operator's CRDs are megabytes).
    used = {(api_version.rpartition("/")[0], kind) for api_version, kind in _types(resources)}
    defining = [resource for resource in resources if _type_of(resource.resource_type) == CRD_TYPE
                and (get(resource.props, "spec", "group"), get(resource.props, "spec", "names", "kind")) in used]
    registered, _ = kube_objects(defining, lambda *_: True)
    return CrdIndex(default_crds_dir(ROOT), installed_versions(resources).crd_dirs(), [o for _, o in registered])


def _say(obj: dict[str, Any], refusal: Refusal, prefix: str = "") -> str:
    where = f"{refusal.field}: " if refusal.field else ""
    return f"{prefix}{subject(obj)}: {where}{refusal.message}"


def crd_cel(args: StackValidationArgs, report: ReportViolation) -> None:
    index = crd_index(args.resources)
    found, _ = kube_objects(args.resources, lambda api_version, kind: index.schema(api_version, kind) is not None)
    for position, refusal in crd_cel_refusals([obj for _, obj in found], index):
        resource, obj = found[position]
        report(_say(obj, refusal), resource.urn)


def _webhook_groups(api_version: str, _: str) -> bool:
    return api_version.rpartition("/")[0] in webhooks.GROUPS


def operator_webhooks(args: StackValidationArgs, report: ReportViolation) -> None:
    found, _ = kube_objects(args.resources, _webhook_groups)
    for position, refusal in webhook_refusals([obj for _, obj in found], installed_versions(args.resources)):
        resource, obj = found[position]
        report(_say(obj, refusal, f"{refusal.family.removeprefix('webhook:')}: "), resource.urn)


def not_checked(args: StackValidationArgs, report: ReportViolation) -> None:
    """What the two rules above could not judge, listed rather than passed over in silence."""
    index = crd_index(args.resources)
    custom, unknown = kube_objects(args.resources, lambda api_version, kind: index.schema(api_version, kind)
                                   is not None or _webhook_groups(api_version, kind))
    for item in unevaluable_crd_rules([obj for _, obj in custom], index):
        report(f"CRD rule of {item.where} not evaluated ({item.why}): {item.rule}", None)
    for item in webhooks.rules_for(installed_versions(args.resources))[1]:
        report(f"{item.where} {item.rule} not re-checked: {item.why}", None)
    for resource, why in unknown:
        report(f"not checked before apply: {why}", resource.urn)
