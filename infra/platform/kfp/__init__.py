"""Kubeflow Pipelines' parts (infra/platform/kfp/pipelines.py builds them): the patches to the vendored install
(patches.py), the objects of each team namespace (teams.py), the team bucket's keys copied into a team's other
namespaces on rook-ceph (bucket_keys.py), and the drill that restores the run journal
(journal_drill.py)."""
