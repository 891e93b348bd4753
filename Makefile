# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/portal
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# Test processes (pytest-xdist): the tests mostly wait on workers, clusters and browsers, so
# three share two cores well; each takes its own database and Redis database. A file's
# tests stay in one process (their module fixtures start once).
TEST_PROCESSES ?= 3

.PHONY: run test lint format bench kubesim messages

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

# The compiled translations (locale/*/LC_MESSAGES/django.mo) from their catalogs (.po), with
# GNU gettext's msgfmt; without it the committed .mo files serve as they are.
messages: $(VENV)/.installed
	@if command -v msgfmt >/dev/null; then \
		DEBUG=True $(PY) manage.py compilemessages --ignore=.venv --ignore=var --ignore=node_modules; \
	else echo 'no msgfmt (GNU gettext): using the committed locale/*/LC_MESSAGES/django.mo'; fi

# DEBUG=True (unless given): a local key, static files, and the demo logins.
run: $(VENV)/.installed messages
	DEBUG=$${DEBUG:-True} $(PY) manage.py rundemo

kubesim: $(VENV)/.installed
	$(PY) -m kubesim serve --kubeconfig var/kubeconfig

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy dracel kubesim claims portal bench

format: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: $(VENV)/.installed lint
	.ci/ensure-chromium
	# The utilisation tests run a real Prometheus (Debian's package) scraping kubesim.
	.ci/ensure-prometheus
	# The catalog tests run makemessages and msgfmt: GNU gettext, installed when missing.
	.ci/ensure-gettext
	$(MAKE) messages
	# tests/deploy renders deploy/ with kubectl kustomize and applies it to kubesim: no skipping in CI.
	@command -v kubectl >/dev/null || { echo 'make test needs kubectl (deploy/ and kubesim tests)'; exit 1; }
	DEBUG=True $(PY) manage.py makemigrations --check --dry-run
	# The documented production environment (docs/deploy.md) passes Django's deploy checks.
	set -a && . ./docs/production.env && SECRET_KEY=$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))') \
		CLUSTER_CREDENTIALS_KEYS=$$($(PY) -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())') \
		$(PY) manage.py check --deploy --fail-level WARNING
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) $(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist loadfile

# Loopback only, bounded in time (about 15-25 minutes on 2 cores); each prints JSON, kept in
# var/bench/, and the following figures are drawn into docs/benchmarks-following.svg.
BENCH_ENV := DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=redis://127.0.0.1:6379/12 SECRET_KEY=bench-only-insecure-0123456789abcdefghijklmnopqrstuvwxyz
bench: $(VENV)/.installed
	.ci/ensure-chromium
	mkdir -p var/bench
	$(PY) -m bench.kubesim_bench > var/bench/kubesim.json
	$(PY) -m bench.follow_bench --sizes 10,100,1000 > var/bench/follow.json
	$(BENCH_ENV) $(PY) -m bench.idle_bench --sizes 10,1000 > var/bench/idle.json
	$(BENCH_ENV) $(PY) -m bench.pages_bench > var/bench/pages.json
	$(BENCH_ENV) $(PY) -m bench.flow_bench > var/bench/flow.json
	$(BENCH_ENV) $(PY) -m bench.flow_bench --lifted > var/bench/flow-lifted.json
	$(BENCH_ENV) $(PY) -m bench.live_bench > var/bench/live.json
	$(BENCH_ENV) $(PY) -m bench.open_pages_bench --browser > var/bench/open-pages.json
	$(PY) -m bench.plot var/bench/follow.json var/bench/live.json docs/benchmarks-following.svg
	@cat var/bench/*.json
