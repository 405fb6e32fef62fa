"""Model versions and serving: the stack's `models` section and each team's `serving` budget (model.py)."""
