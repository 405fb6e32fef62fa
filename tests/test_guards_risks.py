"""Every field the API server will not change in place on a StorageClass or a PersistentVolumeClaim produces its
`# risk:` line in `trainyard diff`, each tried alone (listed here from Kubernetes' update validation, not read
from infra/review/risks.py), and a field that may change produces none."""

from __future__ import annotations

from typing import Any

import pytest

from infra.review.risks import risks
from tests.test_risks import BASE, _files, claim, klass, namespace

# storage.k8s.io/v1 ValidateStorageClassUpdate: these four are forbidden to change.
CLASS_CHANGES = [("provisioner", "ebs.csi.aws.com"), ("parameters", {"fsName": "other"}),
                 ("parameters", {"fsName": "fs", "pool": "added"}), ("reclaimPolicy", "Delete"),
                 ("volumeBindingMode", "WaitForFirstConsumer")]
# ValidatePersistentVolumeClaimUpdate: the spec is immutable but for resources.requests (and, for bound claims,
# volumeAttributesClassName).
CLAIM_CHANGES = [("storageClassName", "scratch"), ("accessModes", ["ReadWriteOnce"]), ("volumeMode", "Block"),
                 ("volumeName", "pv-0001"), ("selector", {"matchLabels": {"tier": "fast"}}),
                 ("dataSource", {"kind": "PersistentVolumeClaim", "name": "seed"}),
                 ("dataSourceRef", {"kind": "PersistentVolumeClaim", "name": "seed"})]


def _replacing(original: dict[str, Any], changed: dict[str, Any]) -> list[str]:
    return risks(_files(*BASE), _files(*[changed if obj is original else obj for obj in BASE]))


@pytest.mark.parametrize(("field", "value"), CLASS_CHANGES)
def test_each_fixed_class_field_changed_alone_is_a_risk(field: str, value: Any) -> None:
    original = BASE[2]  # class datasets, reclaimPolicy Retain
    assert original["kind"] == "StorageClass" and original.get(field) != value
    changed = klass("datasets", reclaim=value) if field == "reclaimPolicy" else klass("datasets", **{field: value})
    assert _replacing(original, changed) == [
        f"StorageClass datasets: {field} cannot change on a class, so Pulumi replaces it; volumes made before keep "
        "the old settings"]


def test_reclaim_policy_set_where_it_was_defaulted_is_a_risk() -> None:
    original = BASE[3]  # class scratch, reclaimPolicy unset (Delete)
    assert _replacing(original, klass("scratch", reclaim="Retain")) == [
        "StorageClass scratch: reclaimPolicy cannot change on a class, so Pulumi replaces it; volumes made before "
        "keep the old settings"]


@pytest.mark.parametrize(("field", "value"), [("allowVolumeExpansion", True), ("mountOptions", ["noatime"])])
def test_a_class_field_that_may_change_is_no_risk(field: str, value: Any) -> None:
    assert _replacing(BASE[2], klass("datasets", **{field: value})) == []


@pytest.mark.parametrize(("field", "value"), CLAIM_CHANGES)
def test_each_fixed_claim_field_changed_alone_is_a_risk(field: str, value: Any) -> None:
    original = BASE[4]  # vision/datasets
    assert original["kind"] == "PersistentVolumeClaim" and original["spec"].get(field) != value
    found = _replacing(original, claim("vision", "datasets", **{field: value}))
    assert len(found) == 1, found
    assert found[0].startswith(f"PersistentVolumeClaim vision/datasets: {field} cannot change on a claim, so Pulumi "
                               "replaces it with a new, empty volume")


def test_a_claim_may_grow_without_a_risk() -> None:
    assert _replacing(BASE[4], claim("vision", "datasets", size="11Ti")) == []


# --- what mutation testing found unpinned (benchmarks/mutation_score.py, docs/testing.md) ----------------------

def test_several_fixed_fields_changed_at_once_are_each_named() -> None:
    changed = claim("vision", "datasets", storage_class="scratch", volumeMode="Block")
    found = _replacing(BASE[4], changed)
    assert found[0].startswith("PersistentVolumeClaim vision/datasets: storageClassName, volumeMode cannot change")
    assert _replacing(BASE[2], klass("datasets", reclaim="Delete", provisioner="ebs.csi.aws.com")) == [
        "StorageClass datasets: provisioner, reclaimPolicy cannot change on a class, so Pulumi replaces it; volumes "
        "made before keep the old settings"]


def test_a_deleted_namespace_names_its_own_claims_only_and_none_when_it_has_none() -> None:
    extra = namespace("empty")
    found = risks(_files(*BASE, extra), _files(*[o for o in BASE if o["metadata"].get("namespace") != "nlp"
                                                 and o["metadata"]["name"] != "nlp"]))
    assert found == [
        "Namespace empty is deleted, and every object in it with it",
        "Namespace nlp is deleted, and every object in it with it (claims: nlp/datasets: its volume stays as a "
        "Released PersistentVolume (reclaimPolicy Retain): bind a new claim to it to keep the data; nlp/scratch: its "
        "volume is deleted with its data (class scratch: reclaimPolicy Delete))"]


def test_a_claim_of_the_default_class_says_so() -> None:
    default = claim("vision", "notes")
    del default["spec"]["storageClassName"]
    assert risks(_files(*BASE, default), _files(*BASE)) == [
        "PersistentVolumeClaim vision/notes is deleted: its volume follows the reclaimPolicy of class (the default "
        "class), which this stack does not declare"]


def test_names_with_hyphens_and_files_besides_the_manifests() -> None:
    """Object names hold hyphens (the file is <Kind>-<name>.yaml); plan.json and other files are not objects, in
    whatever order the files come."""
    hyphenated = claim("vision", "team-scratch-data")
    # Gone from the head render, but none of them an object: no risk.
    stray = {"plan.json": "{}", "notes/vision/PersistentVolumeClaim-x.yaml": "spec: {}",
             "manifests/a/b/c/PersistentVolumeClaim-deep.yaml": "spec: {}"}
    empty = {"manifests/vision/PersistentVolumeClaim-empty.yaml": ""}  # in both: an empty document reads as {}
    assert risks(stray | empty | _files(*BASE, hyphenated), empty | _files(*BASE)) == [
        "PersistentVolumeClaim vision/team-scratch-data is deleted: its volume stays as a Released PersistentVolume "
        "(reclaimPolicy Retain): bind a new claim to it to keep the data"]


def test_a_cluster_removed_from_a_stack_of_several_deletes_its_namespaces() -> None:
    base = {path.replace("manifests/", "manifests/burst/", 1): text for path, text in _files(namespace("vision"))
            .items()}
    assert risks(base, {}) == ["burst: Namespace vision is deleted, and every object in it with it"]
