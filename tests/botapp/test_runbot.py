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


@pytest.mark.slow
def test_runbot_and_check_refuse_an_empty_secret_key_with_debug_off_naming_it():
    offline = {"TELEGRAM_OFFLINE": "1", "ADMIN_IDS": "1000", "DEBUG": "0", "SECRET_KEY": ""}
    result = manage("runbot", env=offline)
    assert result.returncode == 2 and "SECRET_KEY is not set" in result.stderr
    check = manage("check", env=offline)
    assert check.returncode != 0 and "botapp.E002" in check.stderr and "SECRET_KEY is not set" in check.stderr


def test_runbot_warns_at_start_when_no_one_is_an_admin(settings, monkeypatch, capsys):
    from django.core.management import call_command

    from botapp.management.commands import runbot

    settings.TELEGRAM_OFFLINE, settings.ADMIN_IDS = True, ""
    monkeypatch.setattr(runbot.Command, "serve", lambda self, config, threads, **options: _done())
    call_command("runbot")
    assert "ADMIN_IDS is empty: no one can use the admin commands" in capsys.readouterr().err


async def _done():
    return None


def test_check_refuses_send_limits_that_would_let_more_through_than_telegram_allows(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.TELEGRAM_RATE_SPAN = 0.5
    settings.TELEGRAM_PAID_RATE_HEADROOM = 1.2
    with pytest.raises(SystemCheckError) as refused:
        call_command("check")
    assert "TELEGRAM_RATE_SPAN must be from 1 to 2 seconds" in str(refused.value)
    assert "TELEGRAM_PAID_RATE_HEADROOM must be above 0 and at most 1" in str(refused.value)
