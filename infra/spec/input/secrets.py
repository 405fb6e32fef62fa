"""Secrets written in plaintext in a stack file: secret-like keys whose value is not `{secure: ...}`, secret-like
keys inside structured config (Pulumi cannot keep a part of an object secret), private key material, tokens in
their issuers' published formats, and credentials inside URLs (`https://user:password@host`). Used when a stack
file is loaded (refused, exit 2, for whatever file is planned) and by the policy pack's no-plaintext-secrets rule
during `pulumi preview/up`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A key is secret-like when its last word is one of these, or its last two words one of the pairs.
SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "token", "secret", "kubeconfig", "credentials",
                          "apikey"})
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"),
                          ("account", "key"), ("client", "key")})
# Values that are credentials whatever their key is called: key material, and tokens in the formats their issuers
# publish (GitHub token prefixes, Slack tokens and incoming-webhook URLs, AWS access key ids, Google API keys), and
# bcrypt password hashes.
SECRET_VALUES = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|client-key-data:|\"client-key-data\""), "private key material"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_\w{22,})"), "a GitHub token"),
    (re.compile(r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9]+/"), "a Slack incoming-webhook URL"),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z2-7]{16}\b"), "an AWS access key id"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), "a Google API key"),
    # bcrypt (Dex's static users): a leaked hash is an offline guessing attack on the password.
    (re.compile(r"\$2[abxy]?\$[0-9]{2}\$[./A-Za-z0-9]{53}"), "a password hash (bcrypt)"),
)
# scheme://user:password@host: a password in the authority part of a URL (user alone, as in ssh://git@host, is fine).
URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def secret_like(key: str) -> bool:
    """'trainyard:kubeconfig', 'dbPassword', 'storage-access-key' yes; 'secretName', 'tokenTtl' no."""
    words = [w.lower() for w in _WORD.findall(key.rsplit(":", 1)[-1])]
    if not words:
        return False
    return words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS


def is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def plaintext_secret_paths(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field path, what to do) for every secret found in plaintext in a stack file's `config:` mapping."""
    problems: list[tuple[str, str]] = []
    for key, value in config.items():
        if is_secure(value):
            continue
        if secret_like(str(key)):
            problems.append((str(key), f"holds a secret in plaintext: set it with `pulumi config set --secret {key}`"))
        problems += _nested(str(key), value)
    return problems


def plaintext_secrets(config: Mapping[str, Any]) -> list[str]:
    """One message per plaintext secret, each naming its field path."""
    return [f"'{path}' {message}" for path, message in plaintext_secret_paths(config)]


def _nested(path: str, value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}"
            if secret_like(str(key)) and isinstance(item, str) and item:
                problems.append((where, "looks like a secret inside structured config, which Pulumi cannot keep "
                                        "secret: move it to its own key set with --secret"))
            else:
                problems += _nested(where, item)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            problems += _nested(f"{path}[{position}]", item)
    elif isinstance(value, str) and (material := _secret_material(value)):
        problems.append((path, f"contains {material} in plaintext: store it as a secret key "
                               "(`pulumi config set --secret`)"))
    elif isinstance(value, str) and URL_CREDENTIALS.search(value):
        problems.append((path, "has a password inside a URL (scheme://user:password@host): remove it from the URL "
                               "and give the credentials as a secret key"))
    return problems


def _secret_material(text: str) -> str:
    return next((what for pattern, what in SECRET_VALUES if pattern.search(text)), "")
