"""What every cloud cluster's spec shares: exactly one of a choice, the API server endpoint, the system pool."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from infra.spec.base import PositiveInt, Strict, ipv4_cidr
from infra.spec.clouds.facts import Machine, lookup


def exactly_one(model: BaseModel, what: str) -> None:
    chosen = [name for name, value in model if value is not None]
    if len(chosen) != 1:
        raise ValueError(f"set exactly one {what}: {', '.join(type(model).model_fields)}")


class Endpoint(Strict):
    """Who reaches the API server. `cidrs`: the networks allowed on the public endpoint; `private: true`: no
    public endpoint at all (Pulumi and kubectl then run from inside the cluster's network). The default is
    private; the whole internet (a /0) is refused."""

    cidrs: list[str] = Field(default_factory=list)
    private: bool = False

    @field_validator("cidrs")
    @classmethod
    def _networks(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            ipv4_cidr(cidr)
            if ipaddress.IPv4Network(cidr).prefixlen == 0:
                raise ValueError(f"'{cidr}' opens the API server to the whole internet: name your networks")
        if len(set(cidrs)) != len(cidrs):
            raise ValueError("a network is listed twice")
        return cidrs

    @model_validator(mode="after")
    def _one_way(self) -> Endpoint:
        if self.private and self.cidrs:
            raise ValueError("private: true has no public endpoint: drop `cidrs` or set private: false")
        if not self.private and not self.cidrs:
            raise ValueError("name the networks that reach the API server (cidrs: [...]) or set private: true")
        return self


def private() -> Endpoint:
    return Endpoint(private=True)


class SystemPool(Strict):
    """The small CPU node pool for the platform's own controllers; not a Kueue flavor. Each cloud subclasses it
    with its own instance catalogue, so a system pool names one of its cloud's CPU instance types."""

    catalogue: ClassVar[Mapping[str, Machine]] = {}
    instance_type: str = Field(alias="instanceType")
    count: PositiveInt = 2

    @field_validator("instance_type")
    @classmethod
    def _cpu_machine(cls, name: str) -> str:
        if lookup(name, cls.catalogue).gpu is not None:
            raise ValueError(f"{name} has GPUs: the system pool runs controllers on a CPU instance type")
        return name
