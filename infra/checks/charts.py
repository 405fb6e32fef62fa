"""Checks of what the charts install: values Helm would ignore or refuse, hooks helm.v4.Chart would skip,
objects declared twice (by a chart and by us, or by two charts), and every image of the stack."""

from __future__ import annotations

from typing import Any

from infra.checks.context import Context
from infra.offline.charts import HOOK
from infra.offline.images import qualified, stack_images
from infra.spec import Finding
from infra.spec.cluster import GpuStack

# Hook phases a working install or upgrade depends on; delete and test hooks only matter on removal or
# `helm test`, which a Pulumi-managed release never runs.
INSTALL_PHASES = frozenset({"pre-install", "post-install", "pre-upgrade", "post-upgrade"})
# (release, kind, name) of a hook the platform does another way -> how; see docs/charts.md.
COVERED_HOOKS: dict[tuple[str, str, str], str] = {}


def check_chart_values(ctx: Context) -> list[Finding]:
    return [Finding("chart", f"chart {rendered.source.release}", problem)
            for rendered in ctx.capture.charts for problem in rendered.problems]


def check_chart_hooks(ctx: Context) -> list[Finding]:
    """helm.v4.Chart does not run hooks (pulumi-kubernetes#3284): an install-time hook is work nobody does."""
    findings = []
    for rendered in ctx.capture.charts:
        for hook in rendered.hooks:
            meta = hook["metadata"]
            phases = {phase.strip() for phase in str(meta["annotations"][HOOK]).split(",")}
            if phases & INSTALL_PHASES and (rendered.source.release, hook["kind"], meta["name"]) not in COVERED_HOOKS:
                findings.append(Finding(
                    "chart", f"chart {rendered.source.release}",
                    f"{hook['kind']} {meta['name']} is a Helm hook ({meta['annotations'][HOOK]}) and helm.v4.Chart "
                    "does not run hooks: switch it off with a chart value and cover its work (docs/charts.md)"))
    return findings


def check_declared_once(ctx: Context) -> list[Finding]:
    """One owner per object: the same object from a chart and from us (or from two charts) would flap."""
    owners: dict[tuple[str, str, str, str], list[str]] = {}
    for record, obj in ctx.records():
        meta = obj.get("metadata", {})
        key = (str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind")), meta.get("namespace") or "",
               meta.get("name", ""))
        owners.setdefault(key, []).append(record.chart or "the program")
    return [Finding("objects", "/".join(filter(None, key[1:])),
                    f"declared {len(who)} times, by {', '.join(sorted(who))}")
            for key, who in sorted(owners.items()) if len(who) > 1]


def check_images(ctx: Context) -> list[Finding]:
    return image_findings(ctx.objects(), ctx.platform.gpu_stack)


def image_findings(objects: list[dict[str, Any]], gpu: GpuStack | None = None) -> list[Finding]:
    return [Finding("images", users[0], f"image '{image}' is not fully qualified and pinned: write it as "
                    "registry/repository:tag (or @sha256:...)" + (f"; also used by {len(users) - 1} more object(s)"
                                                                   if len(users) > 1 else ""))
            for image, users in stack_images(objects, gpu).items() if not qualified(image)]


def check_driver_image_known(ctx: Context) -> list[Finding]:
    """The operator appends the GPU nodes' OS to the driver's tag: unknown, the mirror list cannot name the image
    the nodes will pull."""
    stack, cluster = ctx.platform.gpu_stack, ctx.platform.spec.cluster
    if not stack.driver or stack.driver_os is not None:
        return []
    if cluster.existing is not None:
        return [Finding("images", "cluster.existing.gpuNodeOs", "the GPU Operator installs the driver and pulls it "
                        "tagged <version>-<os of the GPU nodes>: declare that OS (e.g. ubuntu24.04) so `trainyard "
                        "images` names the image the nodes pull")]
    return [Finding("images", f"cluster.{cluster.kind}.gpuDriver", "Trainyard does not know the OS of this cloud's "
                    "GPU node image, which the GPU Operator appends to the driver's tag: use gpuDriver: cloud")]
