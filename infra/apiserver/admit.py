"""Would this stack's cluster admit these manifests (`trainyard admit`), and if not, which rule refuses each object
and why. Exit 0 all admitted, 1 something refused, 2 bad input (one line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.apiserver import identity as identities
from infra.apiserver.quota import Quotas
from infra.apiserver.rbac import Authorizer, Identity, forbidden
from infra.apiserver.resources import resource
from infra.apiserver.review import Reviewer
from infra.apiserver.schema import CrdIndex
from infra.apiserver.state import ClusterState, decoded
from infra.apiserver.verdict import Refusal, subject
from infra.offline import engine
from infra.offline.clusters import split
from infra.offline.plan import objects
from infra.spec import Platform, SpecError, load_file, stack_path
from infra.spec.input import yaml_input
from infra.spec.input.load import read_stack_config

CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "ClusterTrainingRuntime", "ClusterQueue",
                            "ResourceFlavor", "Cohort", "Topology", "WorkloadPriorityClass", "PriorityClass",
                            "StorageClass", "PersistentVolume", "CustomResourceDefinition", "Node",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})


def read_manifests(files: list[str]) -> list[dict[str, Any]]:
    """Every document of every file; a file that cannot be read or a document that is not a Kubernetes
    object is bad input (SpecError: one line naming the file and document)."""
    found: list[dict[str, Any]] = []
    for name in files:
        text = ""
        try:
            text = Path(name).read_text(encoding="utf-8")
            documents = yaml_input.load_all(text)  # aliases bounded, no key given twice
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or error
            raise SpecError(name, f"cannot read it ({reason}); give a readable YAML file") from error
        except yaml_input.YamlInputError as error:
            raise SpecError(f"{name}: {error.path}" if error.path else name, str(error)) from None
        except yaml.YAMLError as error:
            raise SpecError(name, f"not valid YAML{yaml_input.syntax_problem(error, text)}") from error
        for position, document in enumerate(documents, start=1):
            if document is None:
                continue
            if not (isinstance(document, dict) and isinstance(document.get("apiVersion"), str)
                    and isinstance(document.get("kind"), str) and isinstance(document.get("metadata"), dict)
                    and isinstance(document["metadata"].get("name"), str)):
                raise SpecError(f"{name} document {position}", "not a Kubernetes object: it needs apiVersion, "
                                "kind and metadata.name")
            if document["kind"] not in CLUSTER_SCOPED:
                document["metadata"].setdefault("namespace", "default")  # as kubectl applies it
            found.append(document)
    if not found:
        raise SpecError(" ".join(files), "no Kubernetes object in the file(s)")
    return found


def _missing_namespace(obj: dict[str, Any], cluster: ClusterState) -> list[Refusal]:
    namespace = obj.get("metadata", {}).get("namespace")
    if namespace and cluster.namespace_labels(namespace) is None:
        return [Refusal("namespace", "metadata.namespace", f"namespaces \"{namespace}\" not found: the stack "
                        "declares no such namespace")]
    return []


def _rbac(obj: dict[str, Any], who: Identity, authorizer: Authorizer, cluster: ClusterState) -> list[Refusal]:
    """The RBAC authorizer's answer to `create` on the object's resource, before any admission plugin."""
    found = resource(obj, cluster)
    namespace = str(obj.get("metadata", {}).get("namespace", "")) if found.namespaced else ""
    if authorizer.allows(who, "create", found.group, found.plural, namespace):
        return []
    name = str(obj.get("metadata", {}).get("name", ""))
    return [Refusal("rbac", "", forbidden(who, "create", found.group, found.plural, namespace, name), "Forbidden")]


def submitted_to(platform: Platform, capture: engine.Capture) -> tuple[Platform, engine.Capture]:
    """The cluster tenants submit to: the stack's only one, or a multi-cluster stack's manager (MultiKueue
    dispatches from there to the workers), with that cluster's own Platform and objects."""
    if platform.hybrid is None:
        return platform, capture
    return split(platform, capture)[platform.hybrid.manager]


def answer(platform: Platform, capture: engine.Capture, submitted: list[dict[str, Any]],
           crds: CrdIndex | None, as_: str | None = None) -> tuple[list[str], int]:
    """The answer per submitted object (lines to print) and how many are refused, in the stack's cluster:
    what the stack renders plus what is submitted together, each object created in turn by the identity `--as`
    names: RBAC first, then admission, the namespace's quotas last (an admitted object counts against them for
    the next). Each is a CREATE: the API server drops `status` before admission (it is the controllers' to
    write, through the status subresource), except for a custom kind whose CRD has no status subresource."""
    platform, capture = submitted_to(platform, capture)
    rendered = [obj for _, obj in objects(capture)]
    if crds is not None:  # the kinds the stack's charts and kustomizations define (Argo's Workflow in KFP's)
        crds.install(obj for obj in rendered if obj.get("kind") == "CustomResourceDefinition")
    submitted = [decoded({key: value for key, value in obj.items() if key != "status" or (
        crds is not None and crds.keeps_status(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))})
        for obj in submitted]
    cluster = ClusterState(rendered + submitted)
    _, who = identities.resolve(platform, as_, submitted)
    authorizer = Authorizer(rendered)
    quotas = Quotas(cluster, rendered)
    reviewer = Reviewer(platform.spec.versions, crds, cluster, platform.queueing.exclude_resource_prefixes)
    lines: list[str] = []
    refused = 0
    unchecked = set()
    for obj in submitted:
        refusals = _missing_namespace(obj, cluster) or _rbac(obj, who, authorizer, cluster)
        warnings: list[Refusal] = []
        if not refusals:
            verdict = reviewer.review(obj, user=who.user, groups=who.groups)
            unchecked.update(verdict.unchecked)
            warnings = verdict.warnings
            refusals = verdict.refusals or quotas.review(obj)
        if not refusals:
            quotas.add(obj)
        refused += bool(refusals)
        lines += [f"refused {subject(obj)}: {r.line()}" for r in refusals] or [f"admitted {subject(obj)}"]
        lines += [f"warning {subject(obj)}: {w.line()}" for w in warnings]
    lines += [f"not checked offline: {item.where}: {item.why}" for item in sorted(unchecked)]
    if crds is None:
        lines.append("not checked offline: custom resources against their CRDs (no CRD directory; pass --crds DIR)")
    return lines, refused


def admit(stack: str, files: list[str], crds_dir: Path | None, root: Path, as_: str | None = None) -> int:
    submitted = read_manifests(files)
    path = stack_path(stack, root)
    platform = load_file(path)
    who_name, who = identities.resolve(platform, as_, submitted)  # bad --as is bad input before any work
    capture = engine.run(platform.stack, read_stack_config(path))
    crds = CrdIndex(crds_dir, platform.spec.versions.crd_dirs()) if crds_dir else None
    lines, refused = answer(platform, capture, submitted, crds, as_)
    print(f"as {who_name}: user {who.user!r}, groups {', '.join(who.groups)}")
    print("\n".join(lines))
    print(f"admit {platform.stack}: {len(submitted) - refused} admitted, {refused} refused")
    return 1 if refused else 0
