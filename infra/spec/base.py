"""Shared building blocks of the stack schema: strict frozen models and Kubernetes name/quantity types."""

from __future__ import annotations

import ipaddress
import re
from decimal import Decimal
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from infra.spec.input.errors import CONTROL_CHARACTERS
from infra.spec.names import dns1123_label, dns1123_subdomain, label_value, qualified_name


def text_problem(value: str, multiline: bool = False) -> str | None:
    """Why a text value cannot be what its writer meant, whatever its field: space or a line break at either end
    (a YAML block scalar keeps its final newline, `key: | ...`), a control character inside. Names, contexts, ids
    and paths are compared byte for byte by the systems that read them, so 'lab-admin\\n' names nothing."""
    if value != value.strip():
        return (f"{value!r} has space or a line break at its start or end: remove it (a YAML block scalar `|` keeps "
                "its final newline: write the value plain or with `|-`)")
    # a line break or another control character inside; text fields that may span lines list themselves in
    # Strict.multiline
    inner = CONTROL_CHARACTERS.search(value.replace("\n", "") if multiline else value)
    if inner:
        return f"{value!r} holds the control character {inner.group(0)!r}: remove it"
    return None


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(path, text) of a field's raw value: the text itself, or the text items of its list or mapping."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, list):
        return [(f"{where}[{index}]", item) for index, item in enumerate(value) if isinstance(item, str)]
    if isinstance(value, dict):
        return [(f"{where}.{key}", item) for key, item in value.items() if isinstance(item, str)]
    return []


class Strict(BaseModel):
    """Every stack-file model: unknown keys are errors, values are immutable once loaded, and no text value has
    space at either end or a control character (text_problem)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)
    # Fields (as the stack file spells them) whose text may span lines.
    multiline: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _plain_text(cls, data: Any) -> Any:
        for key, value in data.items() if isinstance(data, dict) else ():
            for where, text in _strings(value, str(key)):
                problem = text_problem(text, multiline=key in cls.multiline)
                if problem:
                    raise ValueError(f"{where}: {problem}")
        return data


def dns_label(value: str) -> str:
    if dns1123_label(value):
        raise ValueError(
            f"'{value}' is not a DNS label: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


def label_key(value: str) -> str:
    problems = qualified_name(value)
    if problems:
        raise ValueError(f"'{value}' is not a valid Kubernetes label key ([prefix/]name): {problems[0]}")
    return value


def _label_value(value: str) -> str:
    if label_value(value):
        raise ValueError(f"'{value}' is not a valid Kubernetes label value")
    return value


def _secret_name(value: str) -> str:
    problems = dns1123_subdomain(value)
    if problems:
        raise ValueError(f"'{value}' is not a Secret name: {'; '.join(problems)}")
    return value


DnsLabel = Annotated[str, AfterValidator(dns_label)]
SecretName = Annotated[str, AfterValidator(_secret_name)]
LabelKey = Annotated[str, AfterValidator(label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
Labels = dict[LabelKey, LabelValue]


def _host_bits_hint(value: str) -> str:
    """For an address with host bits under its prefix (10.50.0.0/14): the network it lies in, to give instead."""
    try:
        return f": its network is {ipaddress.ip_network(value, strict=False)}"
    except ValueError:
        return ""


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value))
    except ValueError:
        raise ValueError(f"'{value}' is not a network in CIDR form with its host bits zero "
                         f"(examples: 10.20.0.0/16, 198.51.100.10/32){_host_bits_hint(value)}") from None


def ipv4_cidr(value: str) -> str:
    """A cloud network range (VPCs, subnets, the sources allowed to an API server): IPv4 in CIDR form."""
    try:
        ipaddress.IPv4Network(value)
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 network in CIDR form with its host bits zero (e.g. 10.0.0.0/16)"
                         f"{_host_bits_hint(value)}") from None
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
# Fields that land in an int32 of a Kubernetes API or a controller's configuration (Kueue's backoff settings):
# a larger number is refused there, or stops the controller from reading its configuration.
INT32_MAX = 2**31 - 1
PositiveInt32 = Annotated[int, Field(gt=0, le=INT32_MAX)]
NonNegativeInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]

_SUFFIX = {
    "": Decimal(1), "m": Decimal("0.001"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$")


def parse_quantity(text: str | int | float) -> Decimal:
    """A Kubernetes resource quantity ('64', '500m', '512Gi') as a number of base units."""
    match = _QUANTITY.fullmatch(str(text))
    if not match:
        raise ValueError(f"'{text}' is not a Kubernetes quantity (examples: 64, 500m, 512Gi)")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]


def _quantity(value: str | int | float) -> str:
    parse_quantity(value)
    return str(value)


Quantity = Annotated[str | int, AfterValidator(_quantity)]

_BYTE_UNITS = ("k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi")


def _bytes(value: str | int) -> str:
    """Memory or storage with its unit: a bare number is bytes to Kubernetes, so `memory: 512` would mean 512
    bytes."""
    _quantity(value)
    match = _QUANTITY.fullmatch(str(value))
    unit = (match.group(2) or "") if match else ""
    if not unit and parse_quantity(value) != 0:  # nothing is nothing in every unit
        raise ValueError(f"{value!r} has no unit: Kubernetes reads a bare number as bytes; write it with a unit, "
                         "e.g. 512Gi or 64Gi")
    if unit and unit not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a size: '{unit}' is not a unit of bytes; write it with one (Ki, Mi, Gi, "
                         "Ti or k, M, G, T), e.g. 512Gi")
    return str(value)


def _volume_size(value: str | int) -> str:
    """A claim's size: the API server refuses a PersistentVolumeClaim that requests no storage."""
    _bytes(value)
    if parse_quantity(value) <= 0:
        raise ValueError(f"{value!r}: a volume needs a size above 0: give e.g. 100Gi")
    return str(value)


Bytes = Annotated[str | int, AfterValidator(_bytes)]
VolumeSize = Annotated[str | int, AfterValidator(_volume_size)]


def format_cpu(amount: Decimal) -> str:
    """Cores as an integer when whole, else millicores."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int(amount * 1000)}m"


def format_amount(resource: str, value: Decimal) -> str:
    """A quantity as Kubernetes writes it: memory and storage in Gi/Mi, cpu in cores or millicores."""
    if resource in {"memory", "storage", "requests.memory", "limits.memory", "requests.storage"} \
            or resource.endswith("memory"):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20)):
            if value % size == 0:
                return f"{int(value // size)}{unit}"
        return str(int(value))
    if resource.endswith("cpu"):
        return format_cpu(value)
    return str(int(value))
