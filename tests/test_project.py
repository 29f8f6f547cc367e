"""Project-wide checks an operator relies on: migrations match the models, production settings are sound."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_no_missing_migrations():
    result = run("makemigrations", "--check", "--dry-run", env=dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr


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


def test_health_endpoint(client, db, settings):
    settings.SECURE_SSL_REDIRECT = False
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
