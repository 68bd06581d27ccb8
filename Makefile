# The two commands: `make demo` runs the portal with demo tasks on embedded defaults;
# `make test` runs the whole test suite, browser tests included. Both create .venv and install the
# project first. `make stop` stops whatever the demo or the tests of this checkout left running.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000
WORKERS ?= 2
VAR_DIR ?= $(CURDIR)/var

.PHONY: venv demo test browser lint typecheck bench bench-http chaos gpu-check stack-test stop clean

# The demo needs only the project's own dependencies; the development extras (test tools,
# Playwright, linters, validators) come with the targets that use them.
DEMO_STAMP := $(VENV)/.installed-demo-stamp

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml $(DEMO_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The port first: a taken port stops the demo before it migrates or seeds anything.
demo: $(DEMO_STAMP)
	DEBUG=1 $(BIN)/python manage.py rundemo --port $(PORT) --check-port
	DEBUG=1 $(BIN)/python manage.py migrate --noinput
	DEBUG=1 $(BIN)/python manage.py seed_demo
	DEBUG=1 $(BIN)/python manage.py rundemo --port $(PORT) --workers $(WORKERS)

# Tests use their own var/ directory (embedded Redis and SQLite file) unless DATABASE_URL and
# REDIS_URL point at real servers, as .ci/run does. They test what CI tests: the browser tests
# need Chromium, which `browser` installs (as root) or names the command that does.
test: venv browser
	SECRET_KEY=$${SECRET_KEY:-insecure-test-only-key} PORTAL_VAR_DIR=$${PORTAL_VAR_DIR:-$(CURDIR)/var/test} \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

browser:
	@sh .ci/install-browser

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# django-stubs imports the settings, and mypy leaves with os._exit (no atexit): a REDIS_URL that
# nothing connects to keeps the settings import from starting an embedded Redis it would leave.
typecheck: venv
	DEBUG=1 REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} $(BIN)/mypy portal accounts plumbing queueing submissions workers evaluation

# Issue 12's figures (docs/benchmarks.md): ours against the bare-rq floor, interleaved: latency,
# a burst, the runner vs a bare loop. It runs this one benchmark (benchmarks/floor_bench.py); the
# others have their own commands, listed in docs/benchmarks.md. Latency and burst need DATABASE_URL (PostgreSQL) and
# REDIS_URL; without them only the runner rows run (SQLite cannot take several workers writing).
# Without REDIS_URL the embedded Redis serves, which only DEBUG allows outside the tests.
bench: venv
	$(if $(REDIS_URL),,DEBUG=$${DEBUG:-1}) SECRET_KEY=$${SECRET_KEY:-insecure-bench-only-key} PORTAL_VAR_DIR=$${PORTAL_VAR_DIR:-$(CURDIR)/var/bench} \
		$(BIN)/python -m benchmarks

# Issue 40's figures (docs/benchmarks.md, "The participant's path over HTTP"): the portal under
# gunicorn with the production settings (DEBUG off), driven over HTTP (uploads and polling, a
# burst, board and API reads at 8 and 64 clients), alternated with the bare-rq floor. Needs
# DATABASE_URL (PostgreSQL) and a REDIS_URL that no other worker serves. A quick run:
# make bench-http HTTP_BENCH_ARGS="--runs 1 --burst 40 --reads 5".
bench-http: venv
	SECRET_KEY=$${SECRET_KEY:-insecure-bench-only-key} PORTAL_VAR_DIR=$${PORTAL_VAR_DIR:-$(CURDIR)/var/bench} \
		$(BIN)/python -m benchmarks.http_bench $(HTTP_BENCH_ARGS)

# Issue 37's fault suite (docs/operations.md, "Fault suite"): kills workers, Redis and the
# database's connections during bursts of uploads and prints what became of them. It starts its
# own redis-server and database (on CHAOS_POSTGRES_URL's server, default the local PostgreSQL as
# postgres) and stops them; DEBUG stays off, as in production. CHAOS_ARGS: e.g. --faults redis-down.
chaos: venv
	SECRET_KEY=$${SECRET_KEY:-insecure-chaos-only-key} \
		$(BIN)/python -m benchmarks.chaos $(CHAOS_ARGS)

# The first thing to run on a new GPU host, with the worker's environment (docs/operations.md,
# "GPU acceptance check"): exits 1 on any failed check, or when there is no GPU at all.
gpu-check: venv
	$(if $(REDIS_URL),,DEBUG=$${DEBUG:-1}) SECRET_KEY=$${SECRET_KEY:-insecure-gpu-check-only-key} \
		$(BIN)/python manage.py gpu_check --require-gpu

# The production stack, built and run on this machine (docs/operations.md, "The stack test"):
# the images on a local Debian base, docker-compose.yml up with docker/stack-test's override, a
# model uploaded and scored through it, restarts, then down. As root it installs Docker and
# Compose from Debian when missing. Not part of `make test`; needs no venv.
stack-test:
	$(PYTHON) docker/stack-test/stack_test.py

# Every process the demo or the tests of this checkout started, found by its pid file under var/
# (the demo and the test session stop their own on exit; this is for one that was killed outright).
stop:
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m portal.pidfiles stop $(VAR_DIR); fi

clean: stop
	rm -rf var staticfiles .pytest_cache .mypy_cache .ruff_cache
