"""Project-wide checks an operator relies on: migrations match the models, production settings are sound."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_no_missing_migrations():
    result = run("makemigrations", "--check", "--dry-run", env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_check_deploy_with_production_settings_is_clean():
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "k9$Vq2!mZ7x@Lp4#Rt8&Wn1^Hs6*Jd3(Fg5)Bc0-Ye2+Ua7=Xo9",
        "ALLOWED_HOSTS": "courier.example.com",
    }
    result = run("check", "--deploy", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    # HSTS preload is a commitment the operator opts into; with it, not even a warning remains.
    result = run("check", "--deploy", "--fail-level", "WARNING", env={**env, "SECURE_HSTS_PRELOAD": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_health_endpoint(client, db, plain_http):
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_health_says_what_is_down_without_internals(client, db, settings, monkeypatch, plain_http):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/health/")
    assert response.status_code == 200  # the admin and the API still work
    assert response.json() == {"status": "degraded", "database": "ok", "redis": "error", "degraded": ["redis"]}

    def refused():
        raise OSError("could not connect to server at 10.0.0.5 port 5432 database courier")

    monkeypatch.setattr("botapp.views._database_ok", refused)
    response = client.get("/health/")
    assert response.status_code == 503
    assert response.json() == {"status": "error", "database": "error", "redis": "error"}
    assert "5432" not in response.content.decode()


def test_tests_hash_passwords_fast(admin_user):
    """tests/conftest.py swaps Django's deliberately slow PBKDF2 for MD5 (tests only)."""
    assert admin_user.password.startswith("md5$")
    assert admin_user.check_password("password")


CELERY_LOGGING_PROBE = """
import logging, sys
import django
django.setup()
from config.celery import app
if sys.argv[1] == "worker":  # what `celery -A config worker --loglevel INFO` does before it connects
    app.Worker(loglevel="INFO", pool_cls="solo", quiet=True, hostname="probe@test")
else:  # `celery -A config beat --loglevel INFO`
    app.Beat(loglevel="INFO", quiet=True).setup_logging()
print(logging.getLevelName(logging.getLogger().level))
logging.getLogger("celery.worker").info("an info line")
logging.getLogger("scheduler.jobs.registry").warning("a warning line")
"""


@pytest.mark.parametrize(("process", "level"), [("worker", "WARNING"), ("worker", "DEBUG"), ("beat", "WARNING")])
@pytest.mark.slow
def test_celery_logs_at_log_level_through_djangos_logging(process, level):
    result = subprocess.run(
        [sys.executable, "-c", CELERY_LOGGING_PROBE, process],
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": level},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == level  # the root logger, whatever --loglevel said
    lines = [line for line in result.stderr.splitlines() if line.endswith((" an info line", " a warning line"))]
    # Django's format (settings.LOGGING), not Celery's "[time: LEVEL/MainProcess]"
    assert [line.split(" ", 2)[2] for line in lines] == (["INFO celery.worker an info line"] if level == "DEBUG" else []) + [
        "WARNING scheduler.jobs.registry a warning line"
    ]
