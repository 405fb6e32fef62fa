"""The local chart cache (`.charts/`): archives placed by `scripts/fetch-charts`, each verified against its
pinned content digest before anything renders or installs it.

The digest covers the archive's content, not its bytes: sha256 over every file's path and sha256, in path
order. Repackaging the same chart (other timestamps, other compression) keeps the digest, so the archives
vendored in ../shared/charts and the ones an upstream repository publishes verify alike when their files do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from infra.kit import paths
from infra.spec.versions import Chart

ROOT = paths.ROOT
# The vendored archives: ../shared/charts beside the checkout, unless the environment names another place.
VENDORED_ENV = "TRAINYARD_VENDORED_CHARTS"
VENDORED = Path(os.environ.get(VENDORED_ENV) or paths.SHARED / "charts")


class ChartCacheError(Exception):
    """A chart archive is missing or does not match its pinned digest."""


def content_digest(archive: Path) -> str:
    digest = hashlib.sha256()
    with tarfile.open(archive, "r:gz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
        for member in members:
            stream = tar.extractfile(member)
            body = stream.read() if stream else b""
            digest.update(f"{member.name}\0{hashlib.sha256(body).hexdigest()}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def _verified(candidate: Path, chart: Chart) -> Path:
    found = content_digest(candidate)
    if found != chart.digest:
        raise ChartCacheError(f"{candidate}: content digest {found}, but infra/spec/versions.py pins "
                              f"{chart.archive} at {chart.digest}")
    return candidate


def place(chart: Chart, source: Path, root: Path = ROOT) -> Path:
    """Copy a verified archive into the cache under the name the program installs it from."""
    target = root / chart.path
    if target.is_file():
        return target
    _verified(source, chart)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own per writer: two renders placing the same chart at once (`trainyard diff` renders both
    # revisions together) must not rename each other's copy away.
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".partial", delete=False) as staging, \
            source.open("rb") as archive:
        shutil.copyfileobj(archive, staging)
    Path(staging.name).replace(target)
    return target


def download(chart: Chart, into: Path) -> Path:
    """The archive as the chart's upstream repository publishes it (needs network)."""
    from helm_python import registry

    if chart.oci:
        registry.pull(chart.repository, destination=into, version=chart.version)
    else:
        registry.pull(chart.name, destination=into, version=chart.version, repo_url=chart.repository)
    pulled = sorted(into.glob("*.tgz"))
    if len(pulled) != 1:
        raise ChartCacheError(f"pulling {chart.name} {chart.version} left {len(pulled)} archives")
    return pulled[0]


def ensure(chart: Chart, root: Path = ROOT, vendored: Path = VENDORED, allow_download: bool = False) -> Path:
    """The cached archive of a pinned chart: already there, or placed from the vendored copy, or (with
    allow_download) from the upstream repository; verified against the pin either way."""
    if not chart.digest:
        raise ChartCacheError(f"{chart.archive} has no digest in infra/spec/versions.py CHART_DIGESTS: run "
                              f"`scripts/fetch-charts --bump {chart.name} {chart.version}` on a connected machine "
                              "and add the digest it prints")
    target = root / chart.path
    if target.is_file():
        return target
    if (vendored / chart.archive).is_file():
        return place(chart, vendored / chart.archive, root)
    if not allow_download:
        raise ChartCacheError(f"{chart.path} is not in the chart cache and {vendored} has no {chart.archive}: "
                              "run scripts/fetch-charts")
    with tempfile.TemporaryDirectory() as scratch:
        return place(chart, download(chart, Path(scratch)), root)
