# The two commands: `make demo` runs the portal with demo tasks on embedded defaults;
# `make test` runs the whole test suite. Both create .venv and install the project first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000
WORKERS ?= 2

.PHONY: venv demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	DEBUG=1 $(BIN)/python manage.py migrate --noinput
	DEBUG=1 $(BIN)/python manage.py seed_demo
	DEBUG=1 $(BIN)/python manage.py rundemo --port $(PORT) --workers $(WORKERS)

# Tests use their own var/ directory (embedded Redis and SQLite file) unless DATABASE_URL and
# REDIS_URL point at real servers, as .ci/run does.
test: venv
	SECRET_KEY=$${SECRET_KEY:-insecure-test-only-key} PORTAL_VAR_DIR=$${PORTAL_VAR_DIR:-$(CURDIR)/var/test} \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	DEBUG=1 $(BIN)/mypy portal submissions evaluation

# Issue 3's figures (README, Benchmarks): runner vs bare onnxruntime, latency, throughput.
# Latency and throughput need DATABASE_URL (PostgreSQL) and REDIS_URL; without them only the
# runner benchmark runs (SQLite cannot take several workers writing at once).
bench: venv
	SECRET_KEY=$${SECRET_KEY:-insecure-bench-only-key} PORTAL_VAR_DIR=$${PORTAL_VAR_DIR:-$(CURDIR)/var/bench} \
		$(BIN)/python -m benchmarks

clean:
	rm -rf var staticfiles .pytest_cache .mypy_cache .ruff_cache
