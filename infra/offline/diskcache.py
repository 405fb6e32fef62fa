"""Values that are slow to compute and fully decided by their inputs (chart renders, parsed CRDs), kept on disk by a
hash of those inputs, so repeated plans and parallel test workers compute each one once.

The key must name everything that decides the value, the code that computes it included (callers pass a hash of
their own source): any change gives another key, never a stale value. Each call unpickles afresh, so no two
callers share an object. $TRAINYARD_CACHE moves the cache (default `.cache/offline` in the repository).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from infra.kit import paths

ROOT = paths.ROOT
T = TypeVar("T")
_MEMORY: dict[str, bytes] = {}
CACHE_ENV = "TRAINYARD_CACHE"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or paths.CACHE)


def source_hash(*paths: Path) -> str:
    """A hash of source files: part of a key, so editing the code that computes a value invalidates it."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def content_key(value: Any) -> str:
    """A value's part of a key: the hash of its pickle, which holds every value, its type (1, 1.0, True and "1"
    differ) and which parts are one shared object (YAML anchors)."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def key_of(parts: Iterable[Any]) -> str:
    return hashlib.sha256(json.dumps(list(parts), sort_keys=True).encode()).hexdigest()


def cached(kind: str, key: Iterable[Any], compute: Callable[[], T]) -> T:
    """compute()'s value for `key` (JSON-serialisable), from this process, else from disk, else computed and stored.
    Processes that miss the same key at once wait for the first one's value instead of computing it again."""
    digest = key_of([kind, *key])
    if digest in _MEMORY:
        return pickle.loads(_MEMORY[digest])
    path = cache_dir() / kind / f"{digest}.pickle"
    found = _load(path)
    if found is None:
        with _locked(path):
            found = _load(path)
            if found is None:
                value = compute()
                found = (pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), value)
                _store(path, found[0])
    blob, value = found
    _MEMORY[digest] = blob
    return value


def remembered(kind: str, key: Iterable[Any], compute: Callable[[], T]) -> T:
    """compute()'s value for `key`, kept in this process only (no file: for values cheap to compute once but
    many, such as one parsed template); each call unpickles afresh, as cached() does."""
    digest = key_of([kind, *key])
    if digest in _MEMORY:
        return pickle.loads(_MEMORY[digest])
    value = compute()
    _MEMORY[digest] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return value


def latest(kind: str, slot: str, key: Iterable[Any], compute: Callable[[], T]) -> T:
    """compute()'s value for `key`, kept as the one value of `slot`: another key replaces it rather than adding a
    file beside it (a stack's whole run is tens of megabytes; a file per edit of the code would pile up). The
    file starts with its key's digest, so a stale value is never unpickled."""
    digest = key_of([kind, slot, *key])
    path = cache_dir() / kind / f"{slot}.pickle"
    found = _load_slot(path, digest)
    if found is None:
        with _locked(path):
            found = _load_slot(path, digest)
            if found is None:
                value = compute()
                _store(path, digest.encode() + b"\n" + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                return value
    return found[0]


def _load_slot(path: Path, digest: str) -> tuple[Any] | None:
    try:
        with path.open("rb") as handle:
            if handle.readline() != digest.encode() + b"\n":
                return None
            found = (pickle.load(handle),)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        return None
    _mark_used(path)
    return found


def _load(path: Path) -> tuple[bytes, Any] | None:
    """A stored value and its bytes; None when missing or unreadable (then computed again and replaced)."""
    try:
        blob = path.read_bytes()
        found = blob, pickle.loads(blob)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        return None
    _mark_used(path)
    return found


def _mark_used(path: Path) -> None:
    """A value read is marked as used now (its file's mtime), so prune() keeps what recent runs read."""
    with contextlib.suppress(OSError):  # a read-only cache is read all the same
        os.utime(path)


def prune(unused_since: float) -> tuple[int, int]:
    """Removes every file of the cache that no process has written or read since `unused_since` (seconds since the
    epoch): values of older code or inputs, which no key names any more. Returns (files, bytes) removed."""
    files = freed = 0
    for path in cache_dir().rglob("*"):
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another prune
            found = path.lstat()
            if stat.S_ISREG(found.st_mode) and found.st_mtime < unused_since:
                path.unlink()
                files, freed = files + 1, freed + found.st_size
    return files, freed


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 (held until the value is stored)
    except OSError:
        yield  # a read-only cache: nothing to share, nothing to lock
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _store(path: Path, blob: bytes) -> None:
    """Written whole under a temporary name, then renamed: a reader in another process sees all of it or nothing.
    A cache that cannot be written (read-only checkout) only costs time."""
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".partial", delete=False) as handle:
            handle.write(blob)
        os.replace(handle.name, path)
    except OSError:
        pass
