"""The project's root and its standard paths: the one place that knows where the checkout is.

Everything else asks here, so a module can move without its paths breaking.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "infra" / "__main__.py"  # the Pulumi program, run by `pulumi up` and by the offline engine
STACKS = ROOT / "stacks"
RUNTIMES = ROOT / "runtimes"
DOCS = ROOT / "docs"
CACHE = ROOT / ".cache" / "offline"
SHARED = ROOT.parent / "shared"  # the reference material beside the checkout (CRDs, charts, kustomize)
# Relative to the project root, where `pulumi up` runs the program: the extracted manifest releases (like .charts/)
# and the overlay kustomize_directory() writes per use.
MANIFEST_CACHE = ".manifests"
OVERLAYS = f"{MANIFEST_CACHE}/overlays"
