"""Reading Kubernetes manifests as the API server reads them (rendered charts, kustomizations, CRDs, examples)."""

from __future__ import annotations

from typing import Any

import yaml


class ManifestLoader(yaml.CSafeLoader):
    """PyYAML resolves a bare `=` to YAML 1.1's `value` type, which it cannot build; Kubernetes reads a string
    (the AlertmanagerConfig CRD's matchType enum)."""


def _string(loader: ManifestLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


ManifestLoader.add_constructor("tag:yaml.org,2002:value", _string)
