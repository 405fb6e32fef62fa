"""Model Registry and KServe (docs/models.md)."""
