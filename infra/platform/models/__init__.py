"""Model registry and serving (issue 31): the registries, KServe, and their observation (observability.py)."""
