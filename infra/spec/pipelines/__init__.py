"""Kubeflow Pipelines: the stack section and its derived facts (model.py)."""
