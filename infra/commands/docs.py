"""`trainyard docs [STACK] [--check]`: regenerate the generated pages, or fail when they are stale."""

from __future__ import annotations

from pathlib import Path

from infra.commands.common import ROOT, Subparsers
from infra.docs.audit import audit_policy_file
from infra.docs.checks import checks_page
from infra.docs.reference import stack_reference
from infra.docs.stack import stack_page
from infra.offline import engine
from infra.spec import load_file, stack_path
from infra.spec.input.load import read_stack_config, stack_names


def generated(root: Path, stacks: list[str]) -> dict[Path, str]:
    pages = {root / "docs" / "stack-reference.md": stack_reference(), root / "docs" / "checks.md": checks_page(),
             root / "docs" / "audit-policy.yaml": audit_policy_file()}
    for stack in stacks:
        path = stack_path(stack, root)
        platform = load_file(path)
        capture = engine.run(platform.stack, read_stack_config(path))
        pages[root / "docs" / "stacks" / f"{platform.stack}.md"] = stack_page(platform, capture)
    return pages


def run(root: Path, stack: str | None, check: bool) -> int:
    stacks = [stack] if stack else stack_names(root)
    stale = []
    for path, text in generated(root, stacks).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(root))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check:
        for path in stale:
            print(f"stale: {path} (run `trainyard docs` and commit the result)")
        return 1 if stale else 0
    print(f"docs: {len(stale)} page(s) updated")
    return 0


def register(sub: Subparsers) -> None:
    docs = sub.add_parser("docs", help="regenerate docs/stacks/<stack>.md, docs/stack-reference.md, docs/checks.md "
                                         "and docs/audit-policy.yaml")
    docs.add_argument("stack", nargs="?", help="a stack name or stack file (default: every stack in stacks/)")
    docs.add_argument("--check", action="store_true", help="exit 1 when a generated page is stale")
    docs.set_defaults(func=lambda args: run(ROOT, args.stack, args.check))
