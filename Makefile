# `make run` starts agentvisor's main job, `make test` runs the whole suite.
# Both go through `make install`, which installs only what is missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
SHARED ?= ../shared
# Modules held to mypy --strict: the ones made or moved since type checking began.
STRICT := src/agentvisor/records.py

.PHONY: install run test check static lint format types layers bench escape clean wasm-examples postgres browser

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

# The main job: the gateway (MCP over HTTP at http://127.0.0.1:8765/mcp).
run: install
	$(VENV)/bin/agentvisor serve

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

# The whole suite. The static checks and the shared escape attempts run first, so that
# pytest's summary is the last line. The docker backend's tests need an engine:
# docker-start.sh installs docker.io when missing and starts dockerd (unless one runs
# already); docker-stop.sh stops only that.
test: install postgres browser static
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
	$(VENV)/bin/pytest -q -m "not docker and not postgres and not browser and not slow"

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

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(VENV)/bin/python $$b; done

clean:
	rm -rf $(VENV) build src/*.egg-info
