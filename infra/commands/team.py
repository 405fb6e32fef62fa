"""`trainyard team add STACK NAME ...`: onboard a team in one pass by editing the stack file.

The file is edited as YAML round-trip (comments, key order and quoting kept), the result goes through the
same validation as `trainyard plan` before anything is written, and the command prints what the team adds
to the plan: objects per kind and its quota against the capacity that is still unguaranteed. A duplicate or
invalid team, or one whose guarantee does not fit in its pools, is refused (exit 2) and the file is untouched.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from infra.commands.common import ROOT, Subparsers
from infra.kit.tables import text_table
from infra.offline import engine
from infra.offline.plan import objects
from infra.spec import PLATFORM_KEY, Platform, SpecError, load_file, stack_path
from infra.spec.base import format_amount
from infra.spec.input.load import read_stack_config
from infra.spec.queues.capacity import capacity_findings
from infra.spec.teams import GROUP_PERSONAS


def _scalar(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _number(text: str) -> int | float:
    try:
        value = Decimal(text)
    except ArithmeticError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    return int(value) if value == value.to_integral_value() else float(value)


def parse_quota(items: list[str]) -> CommentedMap:
    """`POOL=N` (guaranteed GPUs) or `POOL=key:value,key:value` (e.g. cpu=cpu:16,memory:64Gi)."""
    quota = _flow()
    for item in items:
        pool, sep, value = item.partition("=")
        if not sep or not pool or not value:
            raise SpecError("--quota", f"'{item}': give POOL=GPUS or POOL=key:value,... (e.g. h100=8, "
                                       "cpu=cpu:16,memory:64Gi)")
        if pool in quota:
            raise SpecError("--quota", f"pool '{pool}' is given twice")
        if ":" not in value:
            quota[pool] = _scalar(value)
            continue
        fields = _flow()
        for pair in value.split(","):
            key, sep, amount = pair.partition(":")
            if not sep or not key or not amount:
                raise SpecError("--quota", f"'{item}': '{pair}' is not key:value")
            fields[key] = _scalar(amount)
        quota[pool] = fields
    return quota


def _flow(items: dict[str, Any] | None = None) -> CommentedMap:
    mapping = CommentedMap(items or {})
    mapping.fa.set_flow_style()
    return mapping


def team_entry(args: argparse.Namespace) -> CommentedMap:
    """The team as the stack file declares it, in the order a reader expects."""
    team = CommentedMap()
    if args.namespace:
        team["namespaces"] = _flow_list(args.namespace)
    team["quota"] = parse_quota(args.quota)
    if args.weight is not None:
        team["weight"] = args.weight
    if args.borrowing_limit is not None:
        team["borrowingLimit"] = args.borrowing_limit
    groups = {persona: _one_or_list(getattr(args, persona)) for persona in GROUP_PERSONAS
              if getattr(args, persona)}
    if groups:
        team["groups"] = _flow(groups)
    if args.pod_security:
        security: dict[str, Any] = {"level": args.pod_security}
        if args.pod_security_reason:
            security["reason"] = args.pod_security_reason
        team["podSecurity"] = _flow(security)
    return team


def _flow_list(values: list[str]) -> CommentedSeq:
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def _one_or_list(values: list[str]) -> Any:
    return values[0] if len(values) == 1 else _flow_list(values)


def edited_text(text: str, name: str, entry: CommentedMap) -> str:
    """The stack file with the team appended under trainyard:platform.teams, everything else as it was."""
    _, indent, offset = load_yaml_guess_indent(text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap existing lines
    yaml.indent(mapping=indent or 2, sequence=(indent or 2) + (offset or 0), offset=offset or 0)
    document = yaml.load(text)
    platform = document["config"][PLATFORM_KEY]
    if platform.get("teams") is None:
        platform["teams"] = CommentedMap()
    platform["teams"][name] = entry
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _load_text(path: Path, text: str) -> tuple[Platform, dict[str, Any]]:
    """Load the edited file exactly as `trainyard plan` would, from a scratch copy with the same name."""
    with tempfile.TemporaryDirectory() as scratch:
        candidate = Path(scratch) / path.name
        candidate.write_text(text, encoding="utf-8")
        return load_file(candidate), read_stack_config(candidate)


def _kinds(config: dict[str, Any], stack: str) -> Counter[str]:
    capture = engine.run(stack, config)
    return Counter(obj.get("kind", "?") for _, obj in objects(capture))


def _unguaranteed(platform: Platform, flavor: str, resource: str) -> Decimal:
    """What the capacity check still lets teams be guaranteed in a flavor (negative when overdrawn)."""
    capacity = platform.flavor(flavor).capacity.get(resource, Decimal(0))
    return capacity - platform.quota_sums[flavor].get(resource, Decimal(0))


def _capacity_rows(before: Platform, after: Platform, name: str) -> list[list[str]]:
    team = next(t for t in after.teams if t.name == name)
    rows = [["flavor", "resource", "team", "capacity", "unguaranteed before", "after"]]
    for flavor_name, quota in team.quota.items():
        flavor = after.flavor(flavor_name)
        for resource, amount in quota.items():
            if amount == 0 and resource not in flavor.gpu_resources:
                continue
            rows.append([flavor_name, resource, format_amount(resource, amount),
                         format_amount(resource, flavor.capacity.get(resource, Decimal(0))),
                         format_amount(resource, _unguaranteed(before, flavor_name, resource)),
                         format_amount(resource, _unguaranteed(after, flavor_name, resource))])
    return rows


def team_add(args: argparse.Namespace) -> int:
    path = stack_path(args.stack, ROOT)
    before = load_file(path)
    name = args.name
    if name in before.spec.teams:
        raise SpecError(f"{PLATFORM_KEY}.teams.{name}", f"team '{name}' already exists in {path.name}: "
                        "edit it there, or choose another name")
    text = path.read_text(encoding="utf-8")
    new_text = edited_text(text, name, team_entry(args))
    after, new_config = _load_text(path, new_text)
    known = set(capacity_findings(before))
    overdrawn = [f"{f.subject}: {f.message}" for f in capacity_findings(after)
                 if f.severity == "error" and f not in known]
    if overdrawn:
        raise SpecError(f"{PLATFORM_KEY}.teams.{name}.quota", "; ".join(overdrawn))
    added = _kinds(new_config, after.stack) - _kinds(read_stack_config(path), before.stack)
    _replace(path, new_text)
    team = next(t for t in after.teams if t.name == name)
    print(f"team {name} added to {path} (namespaces: {', '.join(team.namespaces)})")
    print("Objects it adds to the plan: " + ", ".join(f"{kind} {n}" for kind, n in sorted(added.items())))
    print("Its guaranteed quota against the capacity no team is guaranteed:")
    print("\n".join(text_table(_capacity_rows(before, after, name))))
    print(f"Next: review the diff of {path.name}, then `trainyard plan {args.stack}`.")
    return 0


def _replace(path: Path, text: str) -> None:
    """Write beside the file, then rename: an interrupted run never leaves half a stack file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def register(sub: Subparsers) -> None:
    team = sub.add_parser("team", help="onboard teams by editing the stack file")
    actions = team.add_subparsers(dest="team_command", required=True)
    add = actions.add_parser("add", help="add a team: namespaces, quota, groups; comments in the file are kept")
    add.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml) or path to a stack file")
    add.add_argument("name", help="team name (a DNS label)")
    add.add_argument("--quota", action="append", required=True, metavar="POOL=SPEC",
                     help="guarantee per pool: h100=8, or cpu=cpu:16,memory:64Gi (repeat per pool)")
    add.add_argument("--namespace", action="append", help="namespace (repeatable; default: the team name)")
    add.add_argument("--engineers", action="append", metavar="GROUP", help="ml-engineer group (repeatable)")
    add.add_argument("--analysts", action="append", metavar="GROUP", help="analyst group (repeatable)")
    add.add_argument("--ci", action="append", metavar="GROUP", help="CI identity group (repeatable)")
    add.add_argument("--weight", type=_number, help="fair-share weight (default 1)")
    add.add_argument("--borrowing-limit", type=int, help="GPUs the team may borrow beyond its quota per pool")
    add.add_argument("--pod-security", choices=["restricted", "baseline"],
                     help="Pod Security level (default restricted; baseline needs --pod-security-reason)")
    add.add_argument("--pod-security-reason", help="why the team's runtimes need baseline")
    add.set_defaults(func=team_add)
