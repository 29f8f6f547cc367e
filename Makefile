# Courier: `make sandbox` (offline bot), `make test` (the suite), `make run` (the real processes).
# Each target sets up what it needs first: a virtualenv in .venv with the pinned requirements.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Tests use real PostgreSQL and Redis (override for another machine).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/courier
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# The chaos suite's own database and Redis database (it starts its own Redis server too, on a free
# port), so that .ci/run runs it beside `make test`.
CHAOS_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/courier_chaos
CHAOS_REDIS_URL ?= redis://127.0.0.1:6379/13

# The browser tests (tests/browser/) drive Debian's Chromium through Playwright; never a browser
# build of Playwright's own. Installed here when missing (root, or sudo).
CHROMIUM := /usr/bin/chromium

.PHONY: setup sandbox test chaos run lint migrate bench clean image

setup: $(STAMP) $(CHROMIUM)

$(CHROMIUM):
	@echo "setup: installing Debian's chromium for the browser tests"
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null

$(STAMP): requirements/base.txt requirements/dev.txt requirements/constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check -r requirements/dev.txt -c requirements/constraints.txt
	@touch $@

# Offline: in-memory Telegram, a fresh PostgreSQL database of its own, background jobs in-process,
# the cache in the process (no Redis). Extra flags: make sandbox ARGS=--json. The demo data:
# DEMO=files (a file link), DEMO=campaign (a drip bot's campaign, docs/onboarding.md) or DEMO=stream
# (the demo video on the streaming process, docs/sandbox.md; it counts open streams in Redis).
SANDBOX_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/courier_sandbox
DEMO ?= files

sandbox: $(STAMP)
	@scripts/services-up postgres $(if $(filter stream,$(DEMO)),redis)
	@DEBUG=1 DATABASE_URL=$(SANDBOX_DATABASE_URL) CACHE_URL=locmemcache:// $(BIN)/python manage.py sandbox --fresh --demo $(DEMO) $(ARGS)

test: $(STAMP) $(CHROMIUM)
	@scripts/services-up postgres redis
	@DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) SECRET_KEY=test-only-secret DEBUG=0 \
		$(BIN)/python -m pytest $(ARGS)

# Faults under load against real processes (Celery workers, PostgreSQL, a Redis server of its own,
# telegram_server); prints a table of figures per scenario (docs/reliability.md). About 20 minutes:
# the 10-minute deletion outage (a module of its own, with the restore of a backup) runs in one xdist
# worker beside the others; test_upgrade.py runs the previous release's processes (from git).
chaos: $(STAMP)
	@scripts/services-up postgres redis
	@DATABASE_URL=$(CHAOS_DATABASE_URL) REDIS_URL=$(CHAOS_REDIS_URL) SECRET_KEY=test-only-secret DEBUG=0 \
		$(BIN)/python -m pytest -m chaos tests/chaos -n 2 --dist loadfile --ignore=tests/chaos/test_upgrade.py $(ARGS)
	@# The previous release's processes in a pytest of its own: after another module in the same
	@# process, its broker calls went to that module's stopped redis-server (not yet explained).
	@DATABASE_URL=$(CHAOS_DATABASE_URL) REDIS_URL=$(CHAOS_REDIS_URL) SECRET_KEY=test-only-secret DEBUG=0 \
		$(BIN)/python -m pytest -m chaos tests/chaos/test_upgrade.py $(ARGS) || [ $$? -eq 5 ]

# What CI checks before the tests (.ci/run): lint rules and formatting. `ruff format .` fixes the latter.
lint: $(STAMP)
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .

migrate: $(STAMP)
	@$(BIN)/python manage.py migrate

# The real processes (web, bot, worker, beat) from the Procfile; needs the variables in .env.
run: $(STAMP)
	@$(BIN)/python manage.py migrate --noinput
	@$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/honcho start web bot worker beat  # release: migrate, done above

# The container image (Dockerfile), built with podman and run against PostgreSQL and Redis on
# 127.0.0.1, then compose.yaml's services under podman-compose; prints the image's size and web's
# start-up time (docs/operating.md, "Containers"). As root; minutes. ARGS=--no-compose: the image only.
image:
	@scripts/services-up postgres redis
	@scripts/container-test $(ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache staticfiles
