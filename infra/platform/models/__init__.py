"""Model versions and serving (docs/models.md): each team's Model Registry (registry.py, its patches to the vendored
overlay in registry_patches.py), KServe (serving.py, serving_patches.py; its admission policy in serving_policy.py)
and what observes them (observability.py)."""
