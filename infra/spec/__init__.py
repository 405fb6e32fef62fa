"""Typed stack configuration: the only place that reads config, validates it and derives facts."""

from infra.spec.derive import Flavor, Platform, TeamFacts
from infra.spec.findings import Finding
from infra.spec.input.errors import SpecError
from infra.spec.input.load import (
    KUBECONFIG_KEY,
    PLATFORM_KEY,
    PROJECT,
    load_file,
    load_pulumi,
    secret,
    stack_path,
    validate,
)

__all__ = [
    "KUBECONFIG_KEY", "PLATFORM_KEY", "PROJECT", "Finding", "Flavor", "Platform", "SpecError", "TeamFacts",
    "load_file", "load_pulumi", "secret", "stack_path", "validate",
]
