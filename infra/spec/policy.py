"""Policy settings of a stack: how strictly each CrossGuard rule is enforced, and what the in-cluster
admission policies let tenants run (image registries)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from infra.spec.base import Strict
from infra.vocabulary import PACK_RULES

Level = Literal["mandatory", "advisory", "disabled"]
DEFAULT_REGISTRY = "docker.io"
# Rules a stack may not lower: the stack file itself is what they protect.
ALWAYS_MANDATORY = frozenset({"no-plaintext-secrets"})
REPOSITORY_ENDS = ("/", ":", "@")  # what may follow a prefix in an image reference

_PREFIX = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*$")
_HOST = re.compile(r"^([^/]*[.:][^/]*|localhost)/")


def _registry_prefix(value: str) -> str:
    if not _PREFIX.fullmatch(value) or not _HOST.match(value + "/"):
        raise ValueError(f"'{value}' is not a registry prefix: give a registry host with an optional path, "
                         "e.g. nvcr.io/nvidia or registry.example.com:5000")
    return value


RegistryPrefix = Annotated[str, AfterValidator(_registry_prefix)]


class PolicySpec(Strict):
    """`policy:` in trainyard:platform. `levels` overrides the pack's level per rule name;
    `allowedRegistries` lists image prefixes tenants may run besides those of the stack's runtimes."""

    levels: dict[str, Level] = Field(default_factory=dict)
    allowed_registries: list[RegistryPrefix] | None = Field(default=None, alias="allowedRegistries", min_length=1)

    @field_validator("levels")
    @classmethod
    def _known_rules(cls, levels: dict[str, str]) -> dict[str, str]:
        for name, level in levels.items():
            if name not in PACK_RULES:
                raise ValueError(f"no policy named '{name}': use one of {', '.join(sorted(PACK_RULES))}")
            if name in ALWAYS_MANDATORY and level != "mandatory":
                raise ValueError(f"{name}: '{level}' is not allowed: {name} is always mandatory (a plaintext secret "
                                 "in a committed stack file is already leaked); remove this entry")
        return levels

    def registries(self, images: Iterable[str]) -> tuple[str, ...]:
        """The allowed prefixes: the repository of each image the platform's own runtimes run (always
        admitted, at any tag: they are reviewed here), plus the declared ones."""
        own = {repository(image) for image in images}
        return tuple(sorted(own | set(self.allowed_registries or ())))


def qualified(image: str) -> str:
    """An image reference with its registry spelled out, as the container runtime resolves it
    ('pytorch/pytorch:2' -> 'docker.io/pytorch/pytorch:2', 'busybox' -> 'docker.io/library/busybox')."""
    if _HOST.match(image):
        return image
    return f"{DEFAULT_REGISTRY}/{image}" if "/" in image else f"{DEFAULT_REGISTRY}/library/{image}"


def repository(image: str) -> str:
    """'pytorch/pytorch:2.10' -> 'docker.io/pytorch/pytorch' (no tag, no digest)."""
    name = qualified(image).partition("@")[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.partition(':')[0]}"


def allowed(image: str, prefixes: Iterable[str]) -> bool:
    """Whether the image is under one of the prefixes: a registry, a path in it, or a repository itself
    (the admission policy's CEL does the same)."""
    name = qualified(image)
    return any(name.startswith(prefix.rstrip("/") + end) for prefix in prefixes for end in REPOSITORY_ENDS)
