"""Mutation testing of the modules that guard safety (mutmut): how many of the one-line bugs mutmut makes in a module
the tests written for that module catch. Goal: 90% killed in each module; every survivor judged: a test added, or
an entry in benchmarks/mutation_judged/<module>.toml (an equivalent mutant and why; benchmarks/mutation_judging.py).

    python benchmarks/mutation_score.py run [MODULE ...]   # mutate and test (all guarded modules when none named)
    python benchmarks/mutation_score.py [MODULE ...]       # print the score per module and the survivors

Each module runs in a folder of its own, .cache/mutation/<module>/: the repository linked in, a pyproject.toml whose
[tool.mutmut] table names that module alone and the test files that cover it (mutmut then runs, for each mutant,
those of them that call the mutated function), and an empty render cache, so no mutant reads a stack's run computed
by another. Long (minutes to hours per module on 2 cores): `make mutation`, never part of `make test`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code  # the pinned mutmut's own reading of a test run's exit code

from benchmarks.mutation_judging import judgments, verdicts
from infra.offline.chartcache import VENDORED as VENDORED_CHARTS
from infra.offline.chartcache import VENDORED_ENV as CHARTS_ENV
from infra.offline.manifestcache import VENDORED_ENV as MANIFESTS_ENV
from infra.offline.manifestcache import vendored as vendored_manifests

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "mutation"
GOAL = 0.90
# One mutation run at a time on this machine: two at once on 2 cores each take twice as long and time mutants out.
LOCK = Path("/tmp/trainyard-mutation.lock")
# module -> the test files that cover it (what a mutant in it must fail)
GUARDED: dict[str, tuple[str, ...]] = {
    "infra/platform/admission.py": ("test_admission_rules.py", "test_admission_rules_pods.py",
                                    "test_admission_rules_identity.py", "test_admission_cel.py", "test_attacks.py"),
    "infra/platform/admission_cel.py": ("test_admission_rules.py", "test_admission_rules_pods.py",
                                        "test_admission_rules_identity.py", "test_admission_cel.py", "test_attacks.py"),
    # The platform modules' tests run the components alone (tests/parts.py), each test its own run: the stack tests
    # read cached renders, and run_raw renders a whole stack per mutant.
    "infra/platform/rbac.py": ("test_persona_rules.py",),
    "infra/apiserver/rbac.py": ("test_access_model_rules.py", "test_rbac.py", "test_guards_access.py"),
    "infra/platform/tenancy.py": ("test_tenancy_rules.py", "test_attacks.py"),
    "infra/platform/network.py": ("test_network_rules.py", "test_tenancy_rules.py"),
    "infra/spec/queues/capacity.py": ("test_capacity_rules.py", "test_kueue_capacity.py", "test_serving_capacity.py"),
    "infra/spec/queues/borrowing.py": ("test_borrowing_rules.py", "test_kueue_capacity.py", "test_kueue.py",
                                       "test_reach.py"),
    "infra/spec/prerequisites.py": ("test_prerequisites_rules.py", "test_prerequisites.py", "test_guards_admission.py"),
    "infra/apiserver/webhooks/*": ("test_apiserver_webhooks.py", "test_apiserver_jobset.py", "test_apiserver_tas.py",
                                   "test_apiserver_torchtune.py", "test_apiserver_trainer.py",
                                   "test_apiserver_workload.py", "test_guards_webhooks.py",
                                   "test_apiserver_kueue_jobs.py", "test_webhooks_kueue_rules.py",
                                   "test_webhooks_tas_rules.py", "test_webhooks_jobs_rules.py",
                                   "test_webhooks_jobset_rules.py", "test_webhooks_trainer_rules.py",
                                   "test_webhooks_trainer_runtime_rules.py", "test_webhooks_podsets_rules.py",
                                   "test_webhooks_workload_rules.py", "test_webhooks_registry_rules.py",
                                   "test_webhooks_tas_layers_rules.py", "test_webhooks_sparse_objects.py"),
    "infra/review/risks.py": ("test_risks.py", "test_guards_risks.py"),
    "infra/checks/hybrid.py": ("test_hybrid.py", "test_hybrid_data.py", "test_guards_rules.py", "test_hybrid_rules.py"),
    "infra/spec/input/secrets.py": ("test_secrets_rules.py", "test_guards_rules.py", "test_policies.py"),
}
# What the tests read besides infra/ and tests/ (mutmut copies these into its mutants/ tree).
ALSO_COPY = ["policies", "stacks", "runtimes", "examples", "docs", "scripts", "benchmarks", ".charts", "Pulumi.yaml",
             "README.md", "CHANGELOG.md", "Makefile"]


def folder(module: str) -> Path:
    return WORK / module.replace("/*", "").replace("/", ".").removesuffix(".py")


def prepare(module: str) -> Path:
    """The module's folder: every top-level entry of the repository linked, and pyproject.toml with its
    [tool.mutmut] table (mutmut reads its configuration from the working directory's pyproject.toml only). The last
    run's mutants and render cache go first: mutmut keeps a mutant's result across runs, so a test added since
    would not be tried on the mutants it kills."""
    where = folder(module)
    for old in ("mutants", "render-cache"):
        shutil.rmtree(where / old, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        link = where / entry.name
        if entry.name not in ("pyproject.toml", ".cache", ".git", "mutants") and not link.exists():
            link.symlink_to(entry)
    table = {"source_paths": ["infra"], "only_mutate": [module], "also_copy": ALSO_COPY,
             "pytest_add_cli_args": ["-p", "no:cacheprovider"],
             # The offline engine talks gRPC: a worker forked from the process that ran the tests for mutmut's stats
             # (engine runs included) deadlocks in its first engine run, and the CPU-time limit never fires.
             "process_isolation": "forkserver",
             "pytest_add_cli_args_test_selection": [f"tests/{name}" for name in GUARDED[module]]}
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (where / "pyproject.toml").write_text(text + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return where


def run(modules: list[str]) -> int:
    with LOCK.open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {LOCK}: another mutation run holds it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _run(modules)


def _run(modules: list[str]) -> int:
    worst = 0
    for module in modules:
        where = prepare(module)
        # The vendored archives are found beside this checkout, not beside mutmut's copy of it.
        env = {**os.environ, "TRAINYARD_CACHE": str(where / "render-cache"),
               CHARTS_ENV: str(VENDORED_CHARTS), MANIFESTS_ENV: str(vendored_manifests())}
        print(f"== {module} (in {where.relative_to(ROOT)})", flush=True)
        worst = max(worst, subprocess.call([sys.executable, "-m", "mutmut", "run"], cwd=where, env=env))
    return worst



UNCAUGHT = ("survived", "no tests", "suspicious", "segfault")


def results(module: str) -> dict[str, str]:
    """Mutant name -> status, from the .meta files mutmut writes beside each mutated file."""
    found: dict[str, str] = {}
    for meta in sorted((folder(module) / "mutants").rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
        found |= {name: status_by_exit_code[code] for name, code in codes.items()}
    return found


def score(modules: list[str]) -> int:
    """Killed (a timeout counts: the mutant hung the tests) over every mutant tried, per module, and each survivor
    with its judgment (benchmarks/mutation_judging.py). Fails when a module is below the goal, a survivor is not
    judged, or a judgment is stale."""
    failing = 0
    known = judgments()
    print(f"{'module':38} {'mutants':>7} {'killed':>7} {'survived':>8} {'judged':>7} {'score':>6}")
    for module in modules:
        statuses = results(module)
        if not statuses:
            print(f"{module:38} not run (python benchmarks/mutation_score.py run {module})")
            continue
        counts = Counter(statuses.values())
        tried = len(statuses) - counts["not checked"] - counts["skipped"]
        survivors = sorted(name for name, status in statuses.items() if status in UNCAUGHT)
        timeouts = sorted(name for name, status in statuses.items() if status == "timeout")
        # A timeout (the CPU-time limit, SIGXCPU) counts as killed, as mutmut counts it (the mutant hung the tests),
        # except for a mutant judged equivalent: then the limit was the machine's load, not the mutant.
        killed = (counts["killed"] + counts["caught by type check"]
                  + sum(name not in known for name in timeouts))
        ratio = killed / tried if tried else 0.0
        found = verdicts(survivors, folder(module) / "mutants", folder(module).name + ".", known, timeouts)
        failing += ratio < GOAL or bool(found.unjudged) or bool(found.stale)
        print(f"{module:38} {tried:7} {killed:7} {len(survivors):8} {len(found.judged):7} {ratio:6.1%}")
        for name, line in found.unjudged.items():
            print(f"    {statuses[name]}, not judged: {name}: {line}")
        for name, problem in found.stale.items():
            print(f"    stale judgment: {name}: {problem}")
        for name in timeouts:
            counted = "judged equivalent, not counted killed" if name in known else "counted killed"
            print(f"    timeout ({counted}): {name}")
    return 1 if failing else 0


def main(argv: list[str]) -> int:
    command = argv[0] if argv and argv[0] == "run" else "score"
    modules = [m for m in argv if m != "run"] or list(GUARDED)
    unknown = [m for m in modules if m not in GUARDED]
    if unknown:
        print(f"not a guarded module: {', '.join(unknown)} (one of: {', '.join(GUARDED)})", file=sys.stderr)
        return 2
    return run(modules) if command == "run" else score(modules)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
