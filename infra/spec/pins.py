"""What counts as pinned: charts at an exact release, images at a tag other than latest, or a digest."""

from __future__ import annotations

import re

EXACT_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$")


def unpinned_image(image: str) -> bool:
    name, _, digest = image.partition("@")
    if digest:
        return not digest.startswith("sha256:")
    tag = name.rsplit("/", 1)[-1].partition(":")[2]
    return not tag or tag == "latest"
