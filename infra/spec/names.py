"""Kubernetes name and label syntax (k8s.io/apimachinery/pkg/util/validation), as the API server and its webhooks
apply it (the spec checks Secret names with it too). Each function returns the problems found (empty when valid)."""

from __future__ import annotations

import re

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"  # validation.go httpPathFmt
_HTTP_PATH = re.compile(_HTTP_PATH_FMT)
_INVALID_PATH = f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')"  # RegexError("Invalid path", ...)


def _syntax(value: str, limit: int, pattern: re.Pattern[str], rule: str) -> list[str]:
    """The length and the pattern of one name syntax, with the API server's messages."""
    problems = [] if len(value) <= limit else [f"must be no more than {limit} characters"]
    return problems if pattern.fullmatch(value) else [*problems, rule]


def dns1123_subdomain(value: str) -> list[str]:
    return _syntax(value, 253, _DNS1123_SUBDOMAIN, "a lowercase RFC 1123 subdomain must consist of lower case "
                   "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")


def dns1035_label(value: str) -> list[str]:
    return _syntax(value, 63, _DNS1035_LABEL, "a DNS-1035 label must consist of lower case alphanumeric characters "
                   "or '-', start with an alphabetic character, and end with an alphanumeric character")


def dns1123_label(value: str) -> list[str]:
    return _syntax(value, 63, _DNS1123_LABEL, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                   "characters or '-', and must start and end with an alphanumeric character")


def qualified_name(value: str) -> list[str]:
    """A label key or resource name: an optional DNS subdomain prefix, '/', and a name of at most 63 chars."""
    prefix, _, name = value.rpartition("/")
    problems = []
    if "/" in value and (not prefix or dns1123_subdomain(prefix)):
        problems.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        problems.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                        "end with an alphanumeric character")
    return problems


def label_value(value: str) -> list[str]:
    return _syntax(value, 63, _LABEL_VALUE, "a valid label must be an empty string or consist of alphanumeric "
                   "characters, '-', '_' or '.', and must start and end with an alphanumeric character")


def domain_prefixed_path(value: str) -> list[str]:
    """`example.com/path`: a DNS subdomain, '/', then a non-empty HTTP path (IsDomainPrefixedPath). An empty value is
    a Required error, whose whole text is its type; the path must match to its very end (Go's `$`, not Python's,
    which lets a trailing newline through)."""
    if not value:
        return ["Required value"]
    domain, slash, path = value.partition("/")
    if not slash or not domain or not path:
        return ["must be a domain-prefixed path (such as \"acme.io/foo\")"]
    return dns1123_subdomain(domain) + ([] if _HTTP_PATH.fullmatch(path) else [_INVALID_PATH])
