# `make run` starts agentvisor's main job, `make test` runs the whole suite.
# Both go through `make install`, which installs only what is missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
SHARED ?= ../shared
# Modules held to mypy --strict: the ones made or moved since type checking began.
STRICT := src/agentvisor/records.py src/agentvisor/changes src/agentvisor/policy/facts.py \
  src/agentvisor/policy/analysis src/agentvisor/policy/judge src/agentvisor/policy/categories.py \
  src/agentvisor/policy/limits.py src/agentvisor/policy/verdicts.py src/agentvisor/policy/analyzed.py \
  src/agentvisor/policy/lookup.py src/agentvisor/sandbox/overlay.py \
  src/agentvisor/net/visible.py src/agentvisor/net/intercept.py src/agentvisor/net/http1.py \
  src/agentvisor/net/harness.py src/agentvisor/net/relay.py src/agentvisor/frontends/cli/run.py \
  src/agentvisor/exec src/agentvisor/hostprogs.py src/agentvisor/net/unixsock.py \
  src/agentvisor/config src/agentvisor/frontends/cli/trust.py
STRICT += src/agentvisor/sandbox/docker src/agentvisor/sandbox/fake.py src/agentvisor/sandbox/base.py
STRICT += src/agentvisor/sandbox/identity.py src/agentvisor/sandbox/idmap.py
STRICT += src/agentvisor/upstreams src/agentvisor/gateway/flow.py src/agentvisor/state/refusals.py
STRICT += src/agentvisor/gateway/heap.py

.PHONY: install run test check static lint format types layers bench bench-agentdojo escape clean wasm-examples postgres browser codex

install: $(STAMP)
	@scripts/install-system-deps.sh
	@# Byte-compile once: with PYTHONDONTWRITEBYTECODE set, every CLI start would recompile.
	@$(VENV)/bin/python -m compileall -q src >/dev/null
	@$(MAKE) --no-print-directory wasm-examples

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	@touch $(STAMP)

# The main job: the gateway (MCP at http://127.0.0.1:8765/mcp, the dashboard beside it) for
# the workspace scripts/run-workspace.sh chooses: WORKSPACE=DIR, else the directory make was
# called from ($(PWD) stays the caller's under `make -C`), else ~/agentvisor-workspace. It
# runs in the workspace, so that the project's agentvisor.yaml (which may only narrow) applies
# as it does to `agentvisor changes` there.
run: export CALLER_DIR := $(PWD)
run: install
	@workspace=$$(scripts/run-workspace.sh) && cd "$$workspace" && \
	  exec "$(CURDIR)/$(VENV)/bin/agentvisor" serve --workspace "$$workspace"

# PostgreSQL for the shared-state tests (tests/state) and benchmarks/gateway_load.py: the
# Debian package when missing. They start a throwaway server of their own (initdb in a temp
# dir, 127.0.0.1 on a free port, as the postgres user) and stop and remove it afterwards.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  EXTRA_PACKAGES=postgresql scripts/install-system-deps.sh

# The dashboard's browser tests (tests/dashboard) drive Debian's chromium with Playwright's
# Python package: the Debian package when missing, never a browser download.
browser:
	@EXTRA_PACKAGES="chromium fonts-dejavu-core" scripts/install-system-deps.sh

# The real Codex CLI (pinned) for the `agentvisor run` end-to-end test (tests/net/
# test_harness.py), from the npm registry into .cache/codex; skipped when npm is missing.
CODEX_VERSION := 0.171.0
codex:
	@test -x .cache/codex/node_modules/.bin/codex || ! command -v npm >/dev/null || \
	  npm install --silent --no-audit --no-fund --prefix .cache/codex @openai/codex@$(CODEX_VERSION)

# The whole suite. The static checks and the shared escape attempts run first, so that
# pytest's summary is the last line. The docker backend's tests need an engine:
# docker-start.sh installs docker.io when missing and starts dockerd (unless one runs
# already); docker-stop.sh stops only that.
test: install postgres browser codex static
	@$(MAKE) --no-print-directory escape
	@scripts/docker-start.sh
	@$(VENV)/bin/pytest -q; status=$$?; scripts/docker-stop.sh; exit $$status

# The shared escape attempts, when the shared corpus sits beside the checkout. They run the
# way a user's `agentvisor exec` does (through the exec helper after the first one); the
# helper is stopped afterwards rather than left idling for gateway.exec_helper_idle.
escape: install
	@if [ -x $(SHARED)/tools/escape-harness ] && [ -d $(SHARED)/corpus/escapes ]; then \
	  $(SHARED)/tools/escape-harness --agentvisor $(VENV)/bin/agentvisor $(SHARED)/corpus/escapes; \
	  status=$$?; $(VENV)/bin/agentvisor exec-helper --stop >/dev/null 2>&1; exit $$status; \
	else \
	  echo "skipped: $(SHARED)/tools/escape-harness not found (the project's own escape tests ran in pytest)"; \
	fi

# The example Wasm tools, compiled from C with Zig's clang from PyPI (examples/wasm/build.py).
WASM_EXAMPLES := $(patsubst %/main.c,%/tool.wasm,$(wildcard examples/wasm/*/main.c))
wasm-examples: $(WASM_EXAMPLES)
examples/wasm/%/tool.wasm: examples/wasm/%/main.c examples/wasm/include/agentvisor.h examples/wasm/build.py | $(STAMP)
	@$(VENV)/bin/python examples/wasm/build.py examples/wasm/$*

# The fast tier: static checks and the tests that need no docker engine, PostgreSQL or
# browser (markers set in tests/conftest.py). For a quick answer while working.
check: install static
	$(VENV)/bin/pytest -q -m "not docker and not postgres and not browser and not sandbox and not slow"

# Lint, formatting, types (mypy: default strictness everywhere, --strict on the modules listed
# in STRICT) and the import layers (import-linter contracts in .importlinter).
static: lint format types layers

lint: install
	$(VENV)/bin/ruff check src tests benchmarks scripts

format: install
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

types: install
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict --follow-imports=silent $(STRICT)

layers: install
	$(VENV)/bin/lint-imports

# Every benchmark script (benchmarks/_*.py are their helpers). agentdojo_replay.py needs the
# agentdojo extra (make bench-agentdojo installs it) and takes about ten minutes.
bench: install
	@for b in benchmarks/[!_]*.py; do echo "== $$b"; $(VENV)/bin/python $$b; done

bench-agentdojo: install
	$(VENV)/bin/pip install -q -e '.[agentdojo]'
	$(VENV)/bin/python benchmarks/agentdojo_replay.py --list-failures

clean:
	rm -rf $(VENV) build src/*.egg-info
