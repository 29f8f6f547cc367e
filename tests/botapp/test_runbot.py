"""`manage.py runbot` as an operator runs it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def manage(*args, env=None, stdin=""):
    base = {
        k: v for k, v in os.environ.items() if k not in ("BOT_TOKEN", "API_ID", "API_HASH", "ADMIN_IDS", "STORAGE_CHANNEL_ID")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_runbot_without_credentials_exits_2_and_names_them():
    result = manage("runbot")

    assert result.returncode == 2
    for name in ("BOT_TOKEN", "API_ID", "API_HASH"):
        assert f"{name} is not set" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_runbot_names_malformed_variables():
    result = manage("runbot", env={"BOT_TOKEN": "nope", "API_ID": "abc", "API_HASH": "0" * 32, "ADMIN_IDS": "1,x"})

    assert result.returncode == 2
    assert "BOT_TOKEN does not look like a bot token" in result.stderr
    assert "API_ID must be a number" in result.stderr
    assert "ADMIN_IDS must be comma-separated" in result.stderr
    assert "API_HASH" not in result.stderr
