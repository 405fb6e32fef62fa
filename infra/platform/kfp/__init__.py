"""Kubeflow Pipelines' parts (infra/platform/kfp/pipelines.py builds them): the patches to the vendored install
(patches.py) and the objects of each team namespace (teams.py)."""
