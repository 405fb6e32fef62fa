"""`trainyard diff`: what a pull request changes in the rendered platform.

Renders the stack from the work tree (with the code that runs) and from GITREF (a detached git worktree, rendered
with that revision's own code in a process of its own, meanwhile) and prints a unified diff of the manifests and of
every chart's inputs, after one `# risk:` line per change that destroys data or that the API server will refuse
(infra/review/risks.py).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from infra.offline.chartcache import VENDORED, VENDORED_ENV
from infra.offline.diskcache import CACHE_ENV, cache_dir, cached, source_hash
from infra.offline.manifestcache import VENDORED_ENV as MANIFESTS_ENV
from infra.offline.manifestcache import vendored
from infra.offline.plan import render_stack
from infra.review.risks import risks
from infra.spec import load_file, stack_path
from infra.spec.input.errors import SpecError
from infra.spec.versions import CHART_CACHE


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def _start_render(tree: Path, stack: str, out: Path) -> subprocess.Popen[str]:
    """Render with the code in `tree`, in its own process. Charts and manifests come from this checkout's vendored
    archives wherever `tree` is (the base revision's tree lives in a scratch directory), and renders share this
    checkout's cache (content-addressed by inputs and code, so two revisions never read each other's values)."""
    # Revisions before the commands package ran the command from infra/cli.py.
    command = "infra.commands" if (tree / "infra" / "commands" / "__main__.py").exists() else "infra.cli"
    return subprocess.Popen(
        [sys.executable, "-m", command, "render", stack, "--out", str(out)],
        cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", VENDORED_ENV: str(VENDORED),
             MANIFESTS_ENV: str(vendored()), CACHE_ENV: str(cache_dir())},
    )


def _finished(render: subprocess.Popen[str]) -> str | None:
    """None when the render succeeded, else its last error line."""
    _, stderr = render.communicate()
    if render.returncode != 0:
        return (stderr.strip().splitlines() or ["render failed"])[-1]
    return None


def _chart_files(plan: dict[str, Any]) -> dict[str, str]:
    files = {}
    for resource in plan["resources"]:
        if resource["type"].startswith("kubernetes:helm.sh/"):
            inputs = resource["inputs"]
            chart = {key: inputs.get(key) for key in ("chart", "version", "namespace", "values")}
            files[f"charts/{resource['name']}.yaml"] = yaml.safe_dump(chart, sort_keys=True)
    return files


def rendered_files(out: Path) -> dict[str, str]:
    """Relative path -> text of every manifest and chart input in a render directory."""
    if not (out / "plan.json").is_file():
        return {}
    manifests = sorted((out / "manifests").rglob("*.yaml"))
    files = {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in manifests}
    files.update(_chart_files(json.loads((out / "plan.json").read_text(encoding="utf-8"))))
    return files


def unified(base: dict[str, str], head: dict[str, str]) -> list[str]:
    lines: list[str] = []
    for path in sorted(set(base) | set(head)):
        before, after = base.get(path, ""), head.get(path, "")
        if before != after:
            lines += difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                          fromfile=f"a/{path}" if path in base else "/dev/null",
                                          tofile=f"b/{path}" if path in head else "/dev/null")
    return lines


def base_worktree(root: Path, base_ref: str, work: Path) -> Path:
    """`base_ref` checked out detached in the scratch directory, sharing this checkout's chart cache (content-
    addressed: the digest is in the path)."""
    tree = work / "base-tree"
    added = _git(root, "worktree", "add", "--detach", str(tree), base_ref)
    if added.returncode != 0:
        raise SpecError("--base", f"cannot check out {base_ref}: {added.stderr.strip()}")
    (root / CHART_CACHE).mkdir(exist_ok=True)
    (tree / CHART_CACHE).symlink_to(root / CHART_CACHE, target_is_directory=True)
    return tree


def check_ref(root: Path, base_ref: str) -> None:
    if _git(root, "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}").returncode != 0:
        raise SpecError("--base", f"'{base_ref}' is not a git revision here: fetch it or name another")


@contextlib.contextmanager
def base_tree(root: Path, base_ref: str) -> Iterator[Path]:
    """`base_ref` checked out in a scratch directory while the block runs, removed afterwards."""
    check_ref(root, base_ref)
    with tempfile.TemporaryDirectory(prefix="trainyard-base-") as scratch:
        tree = base_worktree(root, base_ref, Path(scratch))
        try:
            yield tree
        finally:
            _git(root, "worktree", "remove", "--force", str(tree))


def _render_work_tree(root: Path, stack: str, out: Path) -> None:
    """The work tree's stack, rendered here: the code that runs is the work tree's. A stack that does not load or
    render stops the diff with its own error (exit 2, naming the field)."""
    path = stack_path(stack, root)
    path = path if path.is_absolute() else root / path
    render_stack(path, load_file(path), out)


_CODE = source_hash(Path(__file__))  # how the base is rendered and read back


class _BaseFailed(Exception):
    """The base revision did not render: said, not cached (the cause may be this machine's)."""


def _base_key(root: Path, base_ref: str, stack: str) -> list[str]:
    """What a base render depends on: every file of the revision (its tree), the stack named, and the Python and
    locked packages that run it."""
    tree = _git(root, "rev-parse", f"{base_ref}^{{tree}}").stdout.strip()
    named = root / stack  # an absolute path stays itself
    in_tree = named.resolve().is_relative_to(root.resolve())
    outside = source_hash(named) if named.is_file() and not in_tree else ""  # a stack file the tree does not hold
    lock = source_hash(root / "uv.lock") if (root / "uv.lock").is_file() else ""
    return [tree, stack, outside, sys.version, lock, _CODE]


def diff_stack(root: Path, stack: str, base_ref: str) -> int:
    check_ref(root, base_ref)
    with tempfile.TemporaryDirectory(prefix="trainyard-diff-") as scratch:
        work = Path(scratch)
        head = work / "head"

        def render_both() -> dict[str, str]:
            """The base revision's files, rendered in a process of its own while the work tree renders here."""
            tree = base_worktree(root, base_ref, work)
            try:
                base = _start_render(tree, stack, work / "base")
                try:
                    _render_work_tree(root, stack, head)
                except BaseException:
                    base.kill()
                    base.communicate()
                    raise
                base_error = _finished(base)
            finally:
                _git(root, "worktree", "remove", "--force", str(tree))
            if base_error:
                raise _BaseFailed(base_error)
            return rendered_files(work / "base")

        # A base revision renders the same files every time (the pull-request workflow diffs each push against
        # one base): kept in the cache by its tree, so the next diff against it renders the work tree only.
        try:
            base_files = cached("diff-base", _base_key(root, base_ref, stack), render_both)
        except _BaseFailed as failed:
            print(f"# {base_ref} does not render {stack} ({failed}); diffing against nothing")
            base_files = {}
        if not head.exists():
            _render_work_tree(root, stack, head)
        head_files = rendered_files(head)
        lines = unified(base_files, head_files)
    for risk in risks(base_files, head_files):
        print(f"# risk: {risk}")
    sys.stdout.writelines(lines)
    changed = sum(1 for line in lines if line.startswith("+++ "))
    print(f"# {stack}: {changed} file(s) differ between {base_ref} and the work tree")
    return 0
