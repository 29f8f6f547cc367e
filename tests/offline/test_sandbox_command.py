"""`manage.py sandbox` (and `make sandbox`) as a developer runs it: the bot offline on the
in-memory Telegram."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.processes import sandbox_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_sandbox_welcomes_a_user(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\n"))
    call_command("sandbox", stdout=out)

    assert '-> 1001 #2 send "Hello User1001! I deliver files shared through my links."' in out.getvalue()


@pytest.mark.django_db
def test_sandbox_sends_one_at_a_time_and_gives_the_setting_back(monkeypatch):
    """Sends due together go out in their claim's order in the sandbox (its transcripts repeat):
    its worker keeps one send in flight, and the process' setting is as it was afterwards."""
    from django.conf import settings

    from scheduler.jobs.sweep import sends_in_flight

    seen = []
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\n"))
    monkeypatch.setattr("offline.management.commands.sandbox.Command.sandbox", lambda self, **kw: seen.append(sends_in_flight()))
    call_command("sandbox", stdout=io.StringIO())

    assert seen == [1]
    assert settings.SENDS_IN_FLIGHT is None and sends_in_flight() >= 4


@pytest.mark.django_db
def test_sandbox_json_lines_and_bad_input(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\nthis is not a line\n"))
    with pytest.raises(SystemExit) as exited:
        call_command("sandbox", "--json", stdout=out)

    assert exited.value.code == 1
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows[0] == {
        "chat": 1001,
        "action": "send",
        "message_ids": [2],
        "text": "Hello User1001! I deliver files shared through my links.",
    }
    assert "not understood" in rows[1]["note"]


@pytest.mark.slow
def test_make_sandbox_from_a_pipe(tmp_path):
    """The README's first command, end to end: a fresh PostgreSQL database of its own, no Redis."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "ARGS", "MAKEFLAGS", "MAKELEVEL")}
    result = subprocess.run(
        ["make", "--no-print-directory", "sandbox"],
        cwd=ROOT,
        env=sandbox_env(env),
        input="1001: /start\n",
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(".. demo file stored: send '1001: /start ")
    assert any(line.startswith('-> 1001 #2 send "Hello User1001!') for line in lines)


JOURNEY = """\
1001: /start demo
wait 30s
1001 tap Verify
wait 31m
1001 tap Get files again
"""


@pytest.mark.django_db
def test_sandbox_whole_journey(monkeypatch):
    """/start <id> -> Verify (through the shortener) -> files -> auto-delete and notice -> files again."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(JOURNEY))
    call_command("sandbox", "--demo", "--json", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    actions = [(r.get("action"), r.get("text", "")[:30]) for r in rows if "action" in r]

    verify = rows[1]
    assert verify["buttons"][0][0]["text"] == "✅ Verify"
    assert verify["buttons"][0][0]["url"].startswith("https://short.example/")
    assert actions == [
        ("send", "Verify once to get your files:"),
        ("send", "✅ You are verified for 1 day."),
        ("copy", "Courier handbook"),
        ("copy", "Thanks for trying Courier!"),
        ("send", "⏳ These files will be deleted "),
        ("send", "Welcome aboard! Our channel ha"),  # the demo onboarding sequence, 10 min after /start
        ("delete", ""),  # 30 min after the files
        ("send", "Previous message was deleted."),
        ("copy", "Courier handbook"),
        ("copy", "Thanks for trying Courier!"),
        ("send", "⏳ These files will be deleted "),
    ]
    deleted = next(r for r in rows if r.get("action") == "delete")
    assert deleted["message_ids"] == [5, 6, 7]
    notice = next(r for r in rows if r.get("text") == "Previous message was deleted.")
    assert notice["buttons"] == [
        [
            {"text": "♻️ Get files again", "url": "https://t.me/CourierBot?start=demo"},
            {"text": "❌ Close", "callback_data": "close"},
        ]
    ]


@pytest.mark.django_db
def test_the_sandbox_knows_its_own_storage_channel_and_admins(monkeypatch, settings):
    """The settings form refuses the sandbox's storage channel as the backup, as it would refuse
    STORAGE_CHANNEL_ID's; the sandbox's admin is one; and nothing of it outlives the sandbox."""
    settings.STORAGE_CHANNEL_ID = ""
    settings.ADMIN_IDS = ""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO("set backup_channel_id -1001000000001\n1000: /stats\n"))
    with pytest.raises(SystemExit) as exit_:
        call_command("sandbox", stdout=out)
    assert exit_.value.code == 1
    lines = out.getvalue().splitlines()
    assert (
        lines[0] == ".. Bot settings: backup_channel_id: That is the storage channel itself: the backup needs a second channel."
    )
    assert any(line.startswith("-> 1000 #") and "Users" in line for line in lines[1:]), lines
    assert settings.STORAGE_CHANNEL_ID == "" and settings.ADMIN_IDS == ""


@pytest.mark.django_db(transaction=True)  # committed: the step's wake-up is announced on commit
def test_the_sandbox_does_its_own_background_work_and_leaves_celery_as_it_found_it(monkeypatch):
    """No wake-up armed in Redis (which may be another Courier's), nothing left behind in this
    process: the scheduler's receivers are connected again and Celery's broker is the one it had."""
    import redis
    from celery import current_app
    from django.conf import settings

    from botapp.signals import broadcast_queued, work_scheduled
    from scheduler import wakeup

    def connected(signal, uid):
        return any(lookup[0] == uid for lookup, *_ in signal.receivers)

    broker = current_app.conf.broker_url
    armed = wakeup._key("send_sequence_messages", "armed")
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(armed)
    monkeypatch.setattr(sys, "stdin", io.StringIO("1001: /start\n"))  # the demo's sequence: a step in 10 min
    call_command("sandbox", "--demo", stdout=io.StringIO())

    assert not client.exists(armed)
    assert current_app.conf.broker_url == broker
    assert connected(work_scheduled, "scheduler.work_wake") and connected(broadcast_queued, "scheduler.broadcast_sender_wake")


@pytest.mark.parametrize(
    ("now", "start"),
    [
        ("2026-11-27 22:30", "2026-11-28 09:00"),
        ("2026-11-27 08:59", "2026-11-27 09:00"),
        ("2026-11-27 09:00", "2026-11-28 09:00"),
    ],
)
def test_a_demo_starts_at_the_next_morning_whenever_it_runs(settings, now, start):
    """A demo's clock starts at the next 09:00 in the operator's time zone: the campaign demo's two
    hours of waits, run at 22:30, no longer cross midnight into a new "today"."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from offline.management.commands.sandbox import demo_start

    settings.TIME_ZONE = "Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    moment = datetime.strptime(now, "%Y-%m-%d %H:%M").replace(tzinfo=berlin)
    assert demo_start(moment) == datetime.strptime(start, "%Y-%m-%d %H:%M").replace(tzinfo=berlin)


def test_fresh_drops_only_a_database_that_is_a_sandbox_s():
    """`--fresh` drops and creates its database: never a console's (`docker compose run --rm web
    python manage.py sandbox --fresh --demo` runs with the console's DATABASE_URL)."""
    from offline.management.commands.sandbox import sandbox_database_name

    assert sandbox_database_name("courier_sandbox") == "courier_sandbox"  # make sandbox's
    assert sandbox_database_name("test_courier_suite_sandbox") == "test_courier_suite_sandbox"
    assert sandbox_database_name("courier") == "courier_sandbox"


@pytest.mark.slow
def test_fresh_on_a_console_s_database_leaves_it_and_its_cache_alone(django_db_setup):
    """The sandbox run where the console runs, with its database and Redis: the console's database
    keeps its rows, the sandbox answers on a database of its own, and no key lands in the Redis."""
    import psycopg
    import redis
    from django.conf import settings
    from django.db import connection

    console = connection.settings_dict["NAME"] + "_console"
    params = {**connection.get_connection_params(), "dbname": "postgres"}
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{console}" WITH (FORCE)')
        admin.execute(f'DROP DATABASE IF EXISTS "{console}_sandbox" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{console}"')
    env = {**os.environ, "DATABASE_URL": _url(console), "REDIS_URL": settings.REDIS_URL, "CACHE_KEY_PREFIX": "sandboxcheck"}
    env.pop("CACHE_URL", None)

    def run(*args, stdin=None):
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=300
        )

    assert run("migrate", "--noinput").returncode == 0
    made = run("shell", "-c", "from botapp.models import TelegramUser as U; U.objects.create(telegram_id=77)")
    assert made.returncode == 0, made.stderr
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("sandboxcheck*"):
        client.delete(key)

    sandbox = run("sandbox", "--fresh", "--demo", stdin="1001: /start\n")

    assert sandbox.returncode == 0, sandbox.stderr
    assert f"on a database of its own, {console}_sandbox" in sandbox.stderr
    assert "-> 1001 #" in sandbox.stdout
    kept = run(
        "shell", "-c", "from botapp.models import TelegramUser as U; print(list(U.objects.values_list('telegram_id', flat=True)))"
    )
    assert kept.stdout.strip().splitlines()[-1] == "[77]"  # after the shell's banner
    assert list(client.scan_iter("sandboxcheck*")) == []


def _url(name: str) -> str:
    from tests.processes import database_url

    return database_url().rsplit("/", 1)[0] + "/" + name
