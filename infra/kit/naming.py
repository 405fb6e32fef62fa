"""Resource names in a stack of several clusters: each cluster's resources carry its name as a prefix.

A Pulumi URN is made of the parent *types* and the resource's own name, so two clusters building the same
platform would register the same URNs; and a reviewer must see which cluster an object lands on. The prefix
is set while one cluster is built (`cluster_scope`) and is empty in a single-cluster stack, whose names (and
so its URNs and state) stay exactly as they were. A context variable, so that a resource created later in an
Output.apply callback started inside the scope still gets its cluster's prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CLUSTER: ContextVar[str] = ContextVar("trainyard_cluster", default="")


@contextmanager
def cluster_scope(cluster: str) -> Iterator[None]:
    """Build one cluster's resources: every name given to `named` inside gets the cluster's prefix."""
    token = _CLUSTER.set(cluster)
    try:
        yield
    finally:
        _CLUSTER.reset(token)


def named(resource_name: str) -> str:
    """`<cluster>-<name>` while a cluster of a multi-cluster stack is built, else the name unchanged."""
    cluster = _CLUSTER.get()
    return f"{cluster}-{resource_name}" if cluster else resource_name


def current_cluster() -> str:
    return _CLUSTER.get()
