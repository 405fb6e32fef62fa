"""The stack's config as written in its stack file, for the rule that no secret sits there in plaintext.

The engine hands a policy pack the config already decrypted (PULUMI_CONFIG) and does not say which keys
were secret, so the pack reads stacks/Pulumi.<stack>.yaml, where a secret value is `{secure: ...}`.
The offline runner sets the config it ran with instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from infra.kit import paths
from infra.spec.input.load import read_stack_config
from infra.spec.input.secrets import is_secure, plaintext_secrets, secret_like

__all__ = ["current", "is_secure", "plaintext_secrets", "secret_like", "using"]

STACKS_DIR = paths.STACKS

_explicit: ContextVar[Mapping[str, Any] | None] = ContextVar("trainyard_stack_config", default=None)


@contextmanager
def using(config: Mapping[str, Any]) -> Iterator[None]:
    """Judge this config (a stack file's `config:` mapping) instead of the stack file of PULUMI_STACK."""
    token = _explicit.set(config)
    try:
        yield
    finally:
        _explicit.reset(token)


def current() -> Mapping[str, Any] | None:
    """The config to judge, or None when neither the runner nor the engine says which stack this is."""
    explicit = _explicit.get()
    if explicit is not None:
        return explicit
    stack = os.environ.get("PULUMI_STACK")
    path = STACKS_DIR / f"Pulumi.{stack}.yaml"
    return read_stack_config(path) if stack and path.is_file() else None
