"""The stack's config as written in its stack file, for the rule that no secret sits there in plaintext.

The engine hands a policy pack the config already decrypted (PULUMI_CONFIG) and does not say which keys
were secret, so the pack reads stacks/Pulumi.<stack>.yaml, where a secret value is `{secure: ...}`.
The offline runner sets the config it ran with instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from infra.spec.load import read_stack_config

STACKS_DIR = Path(__file__).resolve().parents[1] / "stacks"

# A key is secret-like when its last word is one of these, or its last two words one of the pairs.
SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "token", "secret", "kubeconfig", "credentials",
                          "apikey"})
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"),
                          ("account", "key"), ("client", "key")})
# Values that are secret material whatever their key is called.
SECRET_VALUES = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|client-key-data:|\"client-key-data\"")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

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


def secret_like(key: str) -> bool:
    """'trainyard:kubeconfig', 'dbPassword', 'storage-access-key' yes; 'secretName', 'tokenTtl' no."""
    words = [w.lower() for w in _WORD.findall(key.rsplit(":", 1)[-1])]
    if not words:
        return False
    return words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS


def is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def plaintext_secrets(config: Mapping[str, Any]) -> list[str]:
    """One message per secret found in plaintext: secret-like keys not `secure`, secret-like keys inside a
    structured value (Pulumi cannot keep those secret), and private key material anywhere."""
    problems: list[str] = []
    for key, value in config.items():
        if is_secure(value):
            continue
        if secret_like(key):
            problems.append(f"config key '{key}' holds a secret in plaintext: set it with "
                            f"`pulumi config set --secret {key}`")
        problems += _nested(str(key), value)
    return problems


def _nested(path: str, value: Any) -> list[str]:
    problems: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}"
            if secret_like(str(key)) and isinstance(item, str) and item:
                problems.append(f"'{where}' looks like a secret inside structured config, which Pulumi cannot "
                                "keep secret: move it to its own key set with --secret")
            else:
                problems += _nested(where, item)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            problems += _nested(f"{path}[{position}]", item)
    elif isinstance(value, str) and SECRET_VALUES.search(value):
        problems.append(f"'{path}' contains private key material in plaintext: store it as a secret")
    return problems
