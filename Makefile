# `make run` starts agentvisor's main job, `make test` runs the whole suite.
# Both go through `make install`, which installs only what is missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
SHARED ?= ../shared

.PHONY: install run test lint bench escape clean

install: $(STAMP)
	@scripts/install-system-deps.sh
	@# Byte-compile once: with PYTHONDONTWRITEBYTECODE set, every CLI start would recompile.
	@$(VENV)/bin/python -m compileall -q src >/dev/null

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	@touch $(STAMP)

# The main job: the gateway (MCP over HTTP at http://127.0.0.1:8765/mcp).
run: install
	$(VENV)/bin/agentvisor serve

test: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/pytest -q
	@$(MAKE) --no-print-directory escape

# The shared escape attempts, when the shared corpus sits beside the checkout.
escape: install
	@if [ -x $(SHARED)/tools/escape-harness ] && [ -d $(SHARED)/corpus/escapes ]; then \
	  $(SHARED)/tools/escape-harness --agentvisor $(VENV)/bin/agentvisor $(SHARED)/corpus/escapes; \
	else \
	  echo "skipped: $(SHARED)/tools/escape-harness not found (the project's own escape tests ran in pytest)"; \
	fi

lint: install
	$(VENV)/bin/ruff check src tests benchmarks

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(VENV)/bin/python $$b; done

clean:
	rm -rf $(VENV) build src/*.egg-info
