# Two set-up commands for a fresh machine: `make run` and `make test`; `make prod` starts the
# production stack on this machine (PostgreSQL, Redis, gunicorn, Celery worker and beat).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run prod test test-postgres bench lint fmt demo migrate clean

$(STAMP): pyproject.toml setup.py core/formats/contextos/_compiled.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

migrate: $(STAMP)
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo

HOST ?= 127.0.0.1
PORT ?= 8000
WITNESS_PORT ?= 8207

# runserver with one local witness beside it (key and state under var/witness/; Ctrl-C stops
# both): deploy/devrun.py
run: demo
	@echo "Replay Audit Console on http://$(HOST):$(PORT) (sign in with a user printed above)"
	$(BIN)/python deploy/devrun.py --host $(HOST) --port $(PORT) --witness-port $(WITNESS_PORT)

# DEBUG off, secrets generated under var/prod/secrets/, migrate, collectstatic, demo users,
# then gunicorn + Celery worker + beat until Ctrl-C (deploy/stack.py, docs/deployment.md)
prod: $(STAMP)
	$(BIN)/python deploy/stack.py --demo

# the whole suite on every core (pytest-xdist: one test process per core; WORKERS=0 runs it in
# this one process, WORKERS=3 in three), then the 25 slowest tests
WORKERS ?= auto
TEST_ARGS := -q -n $(WORKERS) --dist loadgroup --durations=25

test: $(STAMP)
	$(BIN)/python -m pytest $(TEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# ruff, the import contracts of pyproject.toml's [tool.importlinter] (the pure core and the
# apps' layers, docs/architecture.md), then mypy
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis .import_linter_cache build core/formats/contextos/_compiled.*.so
