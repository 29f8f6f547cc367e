"""`manage.py runbot` as an operator runs it."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

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


def test_runbot_without_credentials_exits_2_and_names_them():
    result = manage("runbot")

    assert result.returncode == 2
    for name in ("BOT_TOKEN", "API_ID", "API_HASH"):
        assert f"{name} is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_runbot_names_malformed_variables():
    result = manage("runbot", env={"BOT_TOKEN": "nope", "API_ID": "abc", "API_HASH": "0" * 32, "ADMIN_IDS": "1,x"})

    assert result.returncode == 2
    assert "BOT_TOKEN does not look like a bot token" in result.stderr
    assert "API_ID must be a number" in result.stderr
    assert "ADMIN_IDS must be comma-separated" in result.stderr
    assert "API_HASH" not in result.stderr


@pytest.mark.django_db
def test_sandbox_welcomes_a_user(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\n"))
    call_command("runbot", "--sandbox", stdout=out)

    assert '-> 1001 #2 send "Hello User1001! I deliver files shared through my links."' in out.getvalue()


@pytest.mark.django_db
def test_sandbox_json_lines_and_bad_input(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\nthis is not a line\n"))
    with pytest.raises(SystemExit) as exited:
        call_command("runbot", "--sandbox", "--json", stdout=out)

    assert exited.value.code == 1
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows[0] == {
        "chat": 1001,
        "action": "send",
        "message_ids": [2],
        "text": "Hello User1001! I deliver files shared through my links.",
    }
    assert "not understood" in rows[1]["note"]


def test_make_sandbox_from_a_pipe(tmp_path):
    """The README's first command, end to end: a fresh SQLite file, no PostgreSQL, no Redis."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "ARGS", "MAKEFLAGS", "MAKELEVEL")}
    result = subprocess.run(
        ["make", "--no-print-directory", "sandbox"],
        cwd=ROOT,
        env=env,
        input="1001: /start\n",
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(".. demo file stored: send '1001: /start ")
    assert any(line.startswith('-> 1001 #2 send "Hello User1001!') for line in lines)
