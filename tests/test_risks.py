"""The risks `trainyard diff` lists above its diff: every change that loses data or that the API server refuses,
and nothing for changes that do neither."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from infra.review.risks import risks


def _file(obj: dict[str, Any]) -> tuple[str, str]:
    namespace = obj["metadata"].get("namespace") or "_cluster"
    return f"manifests/{namespace}/{obj['kind']}-{obj['metadata']['name']}.yaml", yaml.safe_dump(obj)


def _files(*objs: dict[str, Any]) -> dict[str, str]:
    return dict(_file(obj) for obj in objs)


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def klass(name: str, reclaim: str | None = "Retain", **fields: Any) -> dict[str, Any]:
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
           "provisioner": "rook-ceph.cephfs.csi.ceph.com", "parameters": {"fsName": "fs"}, **fields}
    if reclaim:
        obj["reclaimPolicy"] = reclaim
    return obj


def claim(ns: str, name: str, size: str = "10Ti", storage_class: str = "datasets", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}},
                     "storageClassName": storage_class, **spec}}


BASE = [namespace("vision"), namespace("nlp"), klass("datasets"), klass("scratch", reclaim=None),
        claim("vision", "datasets"), claim("nlp", "datasets"), claim("nlp", "scratch", "1Ti", "scratch")]


def _risks(*head: dict[str, Any]) -> list[str]:
    return risks(_files(*BASE), _files(*head))


def test_nothing_is_a_risk_when_nothing_or_only_harmless_things_change() -> None:
    assert _risks(*BASE) == []
    grown = [claim("vision", "datasets", "20Ti") if o is BASE[4] else o for o in BASE]  # claims may grow
    assert _risks(*grown) == []
    added = [*BASE, namespace("speech"), claim("speech", "datasets")]
    assert _risks(*added) == []


def test_a_deleted_namespace_names_each_claim_and_what_its_class_does_with_the_volume() -> None:
    found = _risks(*[o for o in BASE if o["metadata"].get("namespace") != "nlp" and o != namespace("nlp")])
    assert len(found) == 1, found  # the namespace once, not each claim again
    assert found[0].startswith("Namespace nlp is deleted")
    assert "nlp/datasets: its volume stays as a Released PersistentVolume (reclaimPolicy Retain)" in found[0]
    assert "nlp/scratch: its volume is deleted with its data (class scratch: reclaimPolicy Delete)" in found[0]


def test_a_claim_deleted_from_a_namespace_that_stays_is_named_alone() -> None:
    assert _risks(*[o for o in BASE if o is not BASE[6]]) == [
        "PersistentVolumeClaim nlp/scratch is deleted: its volume is deleted with its data (class scratch: "
        "reclaimPolicy Delete)"]


@pytest.mark.parametrize(("size", "refused"), [("10Ti", False), ("10240Gi", False), ("10239Gi", True), ("5Ti", True)])
def test_a_claim_may_keep_its_size_but_not_shrink(size: str, refused: bool) -> None:
    head = [claim("vision", "datasets", size) if o is BASE[4] else o for o in BASE]
    found = _risks(*head)
    assert bool(found) == refused, found
    if refused:
        assert found == [f"PersistentVolumeClaim vision/datasets: storage 10Ti -> {size}: the API server refuses to "
                         "shrink a claim, so `pulumi up` fails: keep 10Ti or more"]


@pytest.mark.parametrize(("field", "value"), [("storageClassName", "scratch"), ("accessModes", ["ReadWriteOnce"]),
                                              ("volumeMode", "Block")])
def test_a_claim_field_that_cannot_change_means_a_new_empty_volume(field: str, value: Any) -> None:
    changed = claim("vision", "datasets")
    changed["spec"][field] = value
    found = _risks(*[changed if o is BASE[4] else o for o in BASE])
    assert len(found) == 1 and found[0].startswith(f"PersistentVolumeClaim vision/datasets: {field} cannot change")
    assert "new, empty volume" in found[0] and "Released PersistentVolume" in found[0]


def test_a_class_changed_in_place_is_replaced_and_a_class_still_claimed_cannot_go() -> None:
    tuned = klass("datasets", parameters={"fsName": "fs2"})
    assert _risks(*[tuned if o is BASE[2] else o for o in BASE]) == [
        "StorageClass datasets: parameters cannot change on a class, so Pulumi replaces it; volumes made before "
        "keep the old settings"]
    found = _risks(*[o for o in BASE if o is not BASE[3]])
    assert found == ["PersistentVolumeClaim nlp/scratch names StorageClass scratch, which this change deletes: the "
                     "claim would stay Pending"]


def test_a_deleted_crd_takes_every_object_of_its_kind() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "trainjobs.trainer.kubeflow.org"}}
    assert risks(_files(*BASE, crd), _files(*BASE)) == [
        "CustomResourceDefinition trainjobs.trainer.kubeflow.org is deleted: every object of that kind in the "
        "cluster goes with it"]
    assert risks(_files(*BASE), _files(*BASE, crd)) == []  # a new one is no risk


def test_in_a_stack_of_several_clusters_each_risk_names_its_cluster() -> None:
    def in_cluster(cluster: str, files: dict[str, str]) -> dict[str, str]:
        return {path.replace("manifests/", f"manifests/{cluster}/", 1): text for path, text in files.items()}

    base = in_cluster("core", _files(*BASE)) | in_cluster("burst", _files(*BASE))
    head = in_cluster("core", _files(*BASE)) | in_cluster("burst", _files(*[o for o in BASE if o is not BASE[6]]))
    assert risks(base, head) == ["burst: PersistentVolumeClaim nlp/scratch is deleted: its volume is deleted with "
                                 "its data (class scratch: reclaimPolicy Delete)"]
