"""The pack's configuration for one stack: the `--policy-pack-config` JSON the Pulumi CLI reads, and what
the offline runner applies. Levels come from the stack's `policy.levels`; rule settings from the spec.

    .venv/bin/python -m policies.config aws-prod > build/policy-config.aws-prod.json
    pulumi preview --stack aws-prod --policy-pack policies --policy-pack-config build/policy-config.aws-prod.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from infra.kit import paths
from infra.spec import Platform, SpecError, load_file, stack_path

ROOT = paths.ROOT
TENANT_RULES = ("no-tenant-cluster-admin", "tenant-rbac")  # the rules that must know who the admins are


def pack_config(platform: Platform) -> dict[str, Any]:
    """{policy name: {"enforcementLevel": level, setting: value}}, the format of --policy-pack-config."""
    config: dict[str, dict[str, Any]] = {
        name: {"enforcementLevel": level} for name, level in sorted(platform.spec.policy.levels.items())
    }
    identity = platform.spec.identity
    for rule in TENANT_RULES:
        config.setdefault(rule, {})["adminGroups"] = [identity.group(g) for g in identity.platform_admins]
    return config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.config",
                                     description="Print the policy pack config JSON for a stack.")
    parser.add_argument("stack", help="a stack name (stacks/Pulumi.<stack>.yaml) or a stack file")
    args = parser.parse_args(argv)
    try:
        platform = load_file(stack_path(args.stack, ROOT))
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(pack_config(platform), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
