"""Kubernetes resource quantities with the whole grammar of k8s.io/apimachinery/pkg/api/resource (signs,
n/u/m/k/M/G/T/P/E, Ki…Ei, decimal exponents), as webhooks and the CEL quantity library parse them."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
           "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
           **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))}}


def parse(value: Any) -> Decimal:
    """The quantity's value; ValueError when it is not a quantity."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _SUFFIX[suffix]


def valid(value: Any) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True
