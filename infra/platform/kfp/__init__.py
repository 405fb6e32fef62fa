"""Kubeflow Pipelines' parts (infra/platform/kfp/pipelines.py builds them): the patches to the vendored install
(patches.py), the objects of each team namespace (teams.py), and the drill that restores the run journal
(journal_drill.py). On rook-ceph the team bucket's keys reach a team's other namespaces by the storage layer's copy
(infra/platform/storage.py bucket_keys)."""
