"""Model versions and serving (docs/models.md): each team's Model Registry (registry.py, its patches to the vendored
overlay in registry_patches.py) and KServe (serving.py, serving_patches.py; its admission policy in
serving_policy.py)."""
