"""Plaintext secret detection pinned from both sides (infra/spec/input/secrets.py), on config mappings built by hand:
which keys are secret-like (the last word, or the last two) and which merely look alike, what `{secure: ...}` covers,
secrets at the top level, inside structured config and inside lists at any depth, each kind of secret value, and a
password inside a URL with and without a user. No stack file: the loader's and the policy pack's use of it is tested
in tests/test_bad_input.py and tests/test_policies.py."""

from __future__ import annotations

from typing import Any

import pytest

from infra.spec.input.secrets import is_secure, plaintext_secret_paths, plaintext_secrets, secret_like

TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"  # a GitHub token's published format (36 characters after ghp_)
TOP = "holds a secret in plaintext: set it with `pulumi config set --secret {}`"
NESTED = ("looks like a secret inside structured config, which Pulumi cannot keep secret: move it to its own key set "
          "with --secret")
MATERIAL = "contains {} in plaintext: store it as a secret key (`pulumi config set --secret`)"
URL = ("has a password inside a URL (scheme://user:password@host): remove it from the URL and give the credentials as "
       "a secret key")


@pytest.mark.parametrize("key", ["trainyard:kubeconfig", "dbPassword", "storage-access-key", "apiKey", "api_key",
                                 "apikey", "passwd", "passphrase", "token", "secret", "credentials", "privateKey",
                                 "secretKey", "accountKey", "clientKey", "SECRET_KEY", "x:y:AdminPassword", "PASSWORD"])
def test_a_key_whose_last_word_or_last_two_words_name_a_secret_is_secret_like(key: str) -> None:
    assert secret_like(key)


@pytest.mark.parametrize("key", ["secretName", "tokenTtl", "key", "publicKey", "monkey", "passwords", "keyApi",
                                 "password:name", "", "trainyard:", "password:", "access:key", "a:access:key", "::",
                                 "-", "accessKeyId"])
def test_a_key_that_only_contains_such_a_word_is_not(key: str) -> None:
    """Only the key's name counts, not its namespace (what comes before its last colon)."""
    assert not secret_like(key)


@pytest.mark.parametrize(("value", "secure"), [
    ({"secure": "AAE..."}, True), ({"secure": "AAE...", "other": 1}, False), ({}, False), ("secure", False),
    (["secure"], False), ({"insecure": 1}, False)])
def test_only_a_mapping_of_secure_alone_is_a_pulumi_secret(value: Any, secure: bool) -> None:
    assert is_secure(value) is secure


def test_a_secret_like_top_level_key_is_refused_unless_it_is_secure() -> None:
    assert plaintext_secret_paths({"trainyard:apiToken": "abc", "trainyard:name": "abc"}) == [
        ("trainyard:apiToken", TOP.format("trainyard:apiToken"))]
    assert plaintext_secret_paths({"trainyard:apiToken": {"secure": "AAE"}}) == []
    assert plaintext_secret_paths({"a:apiToken": {"secure": "AAE"}, "b:apiToken": "abc"}) == [
        ("b:apiToken", TOP.format("b:apiToken"))]
    assert plaintext_secrets({"trainyard:apiToken": ""}) == [
        f"'trainyard:apiToken' {TOP.format('trainyard:apiToken')}"]


def test_a_secure_value_is_not_searched_and_a_secret_like_mapping_is_searched_too() -> None:
    assert plaintext_secret_paths({"p": {"secure": TOKEN}}) == []
    assert plaintext_secret_paths({"p:credentials": {"url": TOKEN}}) == [
        ("p:credentials", TOP.format("p:credentials")),
        ("p:credentials.url", MATERIAL.format("a GitHub token"))]


def test_a_secret_like_key_inside_structured_config_is_refused_when_it_holds_text() -> None:
    """An empty text or a non-text value under such a key holds no secret; what is under it is searched."""
    config: dict[str, Any] = {"p": {"storage": {"password": "hunter2", "secretName": "velero", "token": "",
                                                "accessKey": {"secure": "AAE"}, "apiKey": 12,
                                                "credentials": {"note": TOKEN}}}}
    assert plaintext_secret_paths(config) == [
        ("p.storage.password", NESTED), ("p.storage.credentials.note", MATERIAL.format("a GitHub token"))]


def test_secrets_in_lists_are_found_at_any_depth_where_they_are() -> None:
    config = {"p": {"groups": ["read", [["x", TOKEN]], {"name": "x", "password": "hunter2"}]}}
    assert plaintext_secret_paths(config) == [
        ("p.groups[1][0][1]", MATERIAL.format("a GitHub token")), ("p.groups[2].password", NESTED)]
    clean = {"p": {"groups": ["vision-read", "ghp_short", "https://example.com/a:b", 3, None, True]}}
    assert plaintext_secret_paths(clean) == []


@pytest.mark.parametrize(("text", "what"), [
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", "private key material"),
    ("-----BEGIN PRIVATE KEY-----", "private key material"),
    ("users:\n- user:\n    client-key-data: LS0t", "private key material"),
    ('{"client-key-data": "LS0t"}', "private key material"),
    (TOKEN, "a GitHub token"), ("github_pat_" + "a" * 22, "a GitHub token"),
    ("xoxb-1234567890-abc", "a Slack token"),
    ("https://hooks.slack.com/services/T000/B000/XXXX", "a Slack incoming-webhook URL"),
    ("AKIA" + "ABCDEFGHIJKLMNOP", "an AWS access key id"), ("ASIA" + "ABCDEFGHIJ234567", "an AWS access key id"),
    ("AIza" + "a" * 35, "a Google API key"),
    ("$2y$10$" + "a" * 53, "a password hash (bcrypt)"),
])
def test_each_kind_of_secret_value_is_named_whatever_its_key(text: str, what: str) -> None:
    assert plaintext_secret_paths({"p": {"note": text}}) == [("p.note", MATERIAL.format(what))]
    assert plaintext_secret_paths({"p:note": text}) == [("p:note", MATERIAL.format(what))]


@pytest.mark.parametrize("text", ["ghp_short", "AKIA" + "ABCDEFGHIJKLMNO", "AIza" + "a" * 34, "AIza" + "a" * 36,
                                  "xoxb-123", "github_pat_" + "a" * 21, "-----BEGIN PUBLIC KEY-----",
                                  "$2y$10$" + "a" * 52, "https://hooks.slack.com/apps/T000/"])
def test_a_value_one_step_short_of_a_secret_format_is_clean(text: str) -> None:
    assert plaintext_secret_paths({"p": {"note": text}}) == []


@pytest.mark.parametrize(("url", "found"), [
    ("https://user:hunter2@example.com/repo", True), ("postgres://:hunter2@db:5432", True),
    ("ssh://git@example.com/repo", False), ("https://example.com/a:b@c", False), ("https://example.com", False)])
def test_a_password_inside_a_url_is_refused_and_a_user_alone_is_not(url: str, found: bool) -> None:
    assert plaintext_secret_paths({"p": {"repo": url}}) == ([("p.repo", URL)] if found else [])


def test_key_material_is_named_before_a_password_in_the_same_url() -> None:
    assert plaintext_secret_paths({"p": {"repo": f"https://x:{TOKEN}@example.com"}}) == [
        ("p.repo", MATERIAL.format("a GitHub token"))]
