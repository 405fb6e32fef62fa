# Trainyard: everything a fresh machine with Python 3.11+ and make needs.
# `make plan` and `make test` install uv (into .tools/) and the locked environment (.venv/) themselves.

PYTHON ?= python3
# Python keeps compiled modules (.venv, __pycache__/) even where the environment says not to: without them every
# process of the test suite compiles the cloud providers' SDKs again (an AWS stack's plan: 8.3 s -> 4.5 s of CPU).
unexport PYTHONDONTWRITEBYTECODE
UV_VERSION := 0.13.8
UV := .tools/bin/uv
VENV := .venv
STACK ?= local
CRDS ?= ../shared/crds

.PHONY: plan test lint typecheck check install charts render validate benchmark benchmark-plan clean crds \
	determinism mutation benchmark-checks benchmark-fuzz

# uv goes into .tools by the host's pip when it has one (4 s); else into a virtualenv of its own, whose pip costs 7 s more.
$(UV):
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target .tools uv==$(UV_VERSION) 2>/dev/null \
		|| { rm -rf .tools && $(PYTHON) -m venv .tools && .tools/bin/pip install --quiet uv==$(UV_VERSION); }

# The KFP SDK (examples/pipelines) needs protobuf 6, the platform's environment holds 5.29: an environment of its own.
$(VENV)/.synced: $(UV) pyproject.toml uv.lock examples/pipelines/pyproject.toml examples/pipelines/uv.lock
	$(UV) sync --locked --quiet
	UV_PROJECT_ENVIRONMENT=$(abspath .venv-pipelines) $(UV) sync --locked --quiet --project examples/pipelines
	touch $@

install: $(VENV)/.synced

charts: install  ## pinned chart archives in .charts/, vendored manifests in .manifests/ (verified; ../shared)
	$(VENV)/bin/python scripts/fetch-charts
	$(VENV)/bin/python scripts/fetch-manifests

plan: charts  ## the main job: plan the default stack offline (no credentials, no cluster)
	$(VENV)/bin/trainyard plan $(STACK)

render: charts
	$(VENV)/bin/trainyard render $(STACK) --out build/$(STACK)

validate: charts
	$(VENV)/bin/trainyard validate $(STACK) --crds $(CRDS)

lint: install
	$(VENV)/bin/ruff check infra policies tests benchmarks scripts/fetch-charts scripts/fetch-manifests scripts/prune-cache \
		scripts/workloads-to-trace
	$(VENV)/bin/lint-imports --no-cache

typecheck: install
	$(VENV)/bin/mypy

# The suite runs on every core (pytest-xdist): the first worker that needs a stack's offline run computes it, the
# others read it (tests/conftest.py); runs, chart renders and parsed CRDs are kept in .cache/offline across
# sessions, keyed by everything they depend on (a stack's run: its file, the program's code, uv.lock, Python).
# Work stealing: each worker starts on its own half of the suite (so they rarely wait on one stack's first run at
# the same moment) and takes tests from the other's queue when its own runs out, so both finish together.
test: charts lint typecheck  ## lint, type check and the whole test suite (CRDs from $(CRDS))
	TRAINYARD_CRDS=$(abspath $(CRDS)) $(VENV)/bin/pytest -n auto --dist worksteal

# Every stack rendered by a child process under another hash seed with an empty cache and by the test process
# (make test: onprem-lab).
determinism: charts  ## byte-identical renders across processes and PYTHONHASHSEED, all six stacks (~4 min)
	TRAINYARD_CRDS=$(abspath $(CRDS)) TRAINYARD_ALL_STACKS=1 $(VENV)/bin/pytest tests/test_determinism.py

# Long (minutes to hours per module): run it when the machine is quiet, never as part of `make test`. MODULES picks
# some of the guarded modules (benchmarks/mutation_score.py GUARDED), e.g. MODULES=infra/review/risks.py.
mutation: charts  ## mutation testing (mutmut) of the modules that guard safety, then the score per module (goal 90%)
	TRAINYARD_CRDS=$(abspath $(CRDS)) $(VENV)/bin/python benchmarks/mutation_score.py run $(MODULES)
	$(VENV)/bin/python benchmarks/mutation_score.py $(MODULES)

crds: install  ## fetch the pinned upstream CRDs into $(CRDS) unless they are there (CI: CRDS=.cache/crds)
	test -d $(CRDS) || scripts/fetch-crds $(CRDS)

benchmark: charts
	$(VENV)/bin/python benchmarks/render_scale.py

benchmark-plan: charts  ## seconds of `trainyard plan` per stack, with an empty and a warm render cache
	$(VENV)/bin/python benchmarks/plan_stacks.py --crds $(CRDS)

benchmark-checks: charts  ## CPU seconds of each plan check per stack (infra/checks/catalogue.py)
	$(VENV)/bin/python benchmarks/check_costs.py --crds $(CRDS)

benchmark-fuzz: charts  ## every field of every stack against hostile values: one-line refusals, accepted ones render valid
	$(VENV)/bin/python -m benchmarks.stack_fuzz --quiet --render 20 --crds $(CRDS)

clean:
	rm -rf build .charts .manifests .cache/offline .pytest_cache .mypy_cache .ruff_cache
