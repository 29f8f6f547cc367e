"""`manage.py doctor` as an operator runs it: one line per check, exit 1 naming what to fix.

Each area is first shown green on a correct set-up, then each misconfiguration turns its line red.
Telegram is the in-memory one, reached as offline processes reach it (its socket)."""

import io
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
import redis
from django.core.management import call_command

from botapp.services.health import heartbeat_forget, heartbeat_record
from tests.conftest import ADMIN, STORAGE
from tests.factories import ForceSubChannelFactory, telegram_on_socket
from tests.processes import ROOT, database_url, manage, manage_env, redis_server, wait_for

BACKUP = -1001000000002
FORCE = -1001000000003
BROADCAST = -1001000000004
SECRET = "k" * 20 + "Q7w-Z2p_Xy9" * 4  # 64 characters, not the development key


def doctor(*areas):
    """Run the command; (exit code, {"name": (mark, text)}) of the lines it printed."""
    out = io.StringIO()
    args = [a for area in areas for a in ("--only", area)]
    try:
        call_command("doctor", *args, stdout=out)
        code = 0
    except SystemExit as exc:
        code = exc.code
    lines = {}
    for line in out.getvalue().splitlines()[:-1]:  # the last line is the summary
        mark, _, rest = line.partition(" ")
        name, _, text = rest[10:].partition(": ")
        lines[name] = (mark, text)
    return code, lines


def red(lines):
    return {name: text for name, (mark, text) in lines.items() if mark == "✘"}


@pytest.fixture
def secure(settings):
    settings.SECRET_KEY = SECRET
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["courier.example.com"]
    settings.PUBLIC_URL = "https://courier.example.com"
    settings.CSRF_TRUSTED_ORIGINS = ["https://courier.example.com"]
    settings.SECURE_HSTS_PRELOAD = True
    return settings


# --- settings ---------------------------------------------------------------------------------


def test_secure_settings_are_all_green(secure):
    code, lines = doctor("settings")

    assert code == 0, lines
    assert set(lines) == {"SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "HTTPS", "metrics", "error reports", "check --deploy"}
    assert lines["metrics"] == ("✔", "off (/metrics answers 404)")


def test_metrics_without_a_multiprocess_folder_are_named(secure, monkeypatch, tmp_path):
    secure.METRICS_TOKEN = "scrape-token"
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert red(doctor("settings")[1]) == {
        "metrics": "on, but PROMETHEUS_MULTIPROC_DIR is not set: set it for every process (docs/operating.md)"
    }
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    code, lines = doctor("settings")

    assert code == 0
    assert lines["metrics"] == ("✔", f"on, every process counting in {tmp_path}")


@pytest.mark.parametrize(
    ("change", "name", "says"),
    [
        ({"SECRET_KEY": ""}, "SECRET_KEY", "not set"),
        ({"SECRET_KEY": "short-secret"}, "SECRET_KEY", "weak"),
        ({"DEBUG": True}, "DEBUG", "on"),
        ({"ALLOWED_HOSTS": []}, "ALLOWED_HOSTS", "empty"),
        ({"ALLOWED_HOSTS": ["*"]}, "ALLOWED_HOSTS", "'*'"),
        ({"SECURE_SSL_REDIRECT": False}, "HTTPS", "SECURE_SSL_REDIRECT off"),
        ({"SESSION_COOKIE_SECURE": False}, "HTTPS", "SESSION_COOKIE_SECURE off"),
        ({"PUBLIC_URL": "http://courier.example.com"}, "HTTPS", "not https: http://courier.example.com"),
        ({"X_FRAME_OPTIONS": "SAMEORIGIN"}, "check --deploy", "security.W019"),
    ],
)
def test_each_unsafe_setting_is_named(secure, change, name, says):
    for key, value in change.items():
        setattr(secure, key, value)

    code, lines = doctor("settings")

    assert code == 1
    assert list(red(lines)) == [name]
    assert says in red(lines)[name]


# --- PostgreSQL -------------------------------------------------------------------------------


def test_a_migrated_database_is_green(db):
    code, lines = doctor("database")

    assert code == 0, lines
    assert "all applied" in lines["migrations"][1]


@pytest.mark.slow
def test_an_unreachable_database_is_named_and_what_needs_it_is_not_checked(db):
    result = manage(
        "doctor", "--only", "database", "--only", "shortener", env=manage_env(DATABASE_URL="postgres://postgres@127.0.0.1:1/x")
    )

    assert result.returncode == 1, result.stdout + result.stderr
    assert "✘ database  PostgreSQL: not reachable at 127.0.0.1:1" in result.stdout
    assert "✘ shortener shortener: not checked: it needs the database" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.fixture
def empty_database(db):
    """A database with no tables, as on a new host before `migrate`."""
    url = database_url().rsplit("/", 1)[0]
    name = "courier_doctor_empty"
    with psycopg.connect(f"{url}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    yield f"{url}/{name}"
    with psycopg.connect(f"{url}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.slow
def test_a_database_not_migrated_says_migrate(empty_database):
    result = manage("doctor", "--only", "database", env=manage_env(DATABASE_URL=empty_database))

    assert result.returncode == 1, result.stdout + result.stderr
    assert "✔ database  PostgreSQL: courier_doctor_empty" in result.stdout
    assert "✘ database  migrations:" in result.stdout and "run python manage.py migrate" in result.stdout


# --- Redis ------------------------------------------------------------------------------------


@pytest.fixture
def persistent_redis(tmp_path, settings):
    with redis_server(tmp_path, "--appendonly", "yes") as url:
        settings.REDIS_URL = settings.CELERY_BROKER_URL = url
        yield url


def test_redis_with_an_append_only_file_is_green(persistent_redis):
    code, lines = doctor("redis")

    assert code == 0, lines
    assert "append-only file on" in lines["Redis persistence"][1]


def test_redis_without_persistence_says_what_a_restart_loses(tmp_path, settings):
    with redis_server(tmp_path) as url:
        settings.REDIS_URL = settings.CELERY_BROKER_URL = url
        code, lines = doctor("redis")

    assert code == 1
    assert list(red(lines)) == ["Redis persistence"]
    assert "every queued Celery task" in red(lines)["Redis persistence"]


def test_redis_that_may_evict_queued_tasks_is_named(persistent_redis):
    redis.Redis.from_url(persistent_redis).config_set("maxmemory", "100mb")
    redis.Redis.from_url(persistent_redis).config_set("maxmemory-policy", "allkeys-lru")

    code, lines = doctor("redis")

    assert code == 1
    assert "allkeys-lru" in red(lines)["Redis eviction"]


def test_an_unreachable_redis_is_named(settings, persistent_redis):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    code, lines = doctor("redis")

    assert code == 1
    assert list(red(lines)) == ["Redis"]  # the broker (another URL now) still answers
    assert "not answering at 127.0.0.1:1/0" in red(lines)["Redis"]


# --- Celery and the processes -----------------------------------------------------------------


def test_no_worker_no_beat_and_no_runbot_are_each_named(db):
    code, lines = doctor("celery")

    assert code == 1
    assert "none answered a ping" in red(lines)["workers"]
    assert "not running: start it (celery -A config beat" in red(lines)["beat"]
    assert "not running: start it (python manage.py runbot)" in red(lines)["runbot"]


def test_two_runbots_are_one_too_many(db):
    heartbeat_record(process="bot", name="host-a")
    heartbeat_record(process="bot", name="host-b")
    heartbeat_record(process="beat", name="host-a")
    try:
        code, lines = doctor("celery")
    finally:
        for name in ("host-a", "host-b"):
            heartbeat_forget(process="bot", name=name)
        heartbeat_forget(process="beat", name="host-a")

    assert code == 1
    assert lines["beat"][0] == "✔"
    assert "2 running (host-a, host-b): exactly one may run" in red(lines)["runbot"]


# --- Telegram ---------------------------------------------------------------------------------


@pytest.fixture
def offline(telegram, settings, tmp_path, conf):
    """A correct Telegram set-up on the in-memory Telegram: storage, backup and broadcast channels
    and a force-subscribe channel with expiring links, the bot an admin of each."""
    for chat_id in (BACKUP, FORCE, BROADCAST):
        telegram.create_channel(chat_id)
    conf.backup_channel_id = BACKUP
    conf.save()
    ForceSubChannelFactory(chat_id=FORCE, title="News", invite_ttl_minutes=60)
    with telegram_on_socket(telegram) as path:
        settings.TELEGRAM_OFFLINE = True
        settings.TELEGRAM_OFFLINE_SOCKET = path
        settings.TELEGRAM_SESSION_DIR = tmp_path / "sessions"
        settings.ADMIN_IDS = str(ADMIN)
        settings.STORAGE_CHANNEL_ID = str(STORAGE)
        settings.BROADCAST_CHANNEL_ID = str(BROADCAST)
        yield telegram


def test_a_correct_telegram_set_up_is_all_green(offline):
    code, lines = doctor("telegram")

    assert code == 0, lines
    assert lines["sign-in"] == ("✔", "signed in as @CourierBot")
    assert lines[f"storage channel {STORAGE}"][0] == "✔"
    assert lines[f"backup channel {BACKUP}"][0] == "✔"
    assert lines[f"broadcast channel {BROADCAST}"][0] == "✔"
    assert lines[f"force-subscribe “News” {FORCE}"] == ("✔", "the bot is an admin (Invite users via link)")
    assert lines["ADMIN_IDS"] == ("✔", f"1 admin(s): {ADMIN}")


def test_a_refused_token_is_named(offline):
    offline.revoke_token()

    code, lines = doctor("telegram")

    assert code == 1
    assert "Telegram refused BOT_TOKEN" in red(lines)["sign-in"]


def test_a_malformed_storage_channel_id_is_named(offline, settings):
    settings.STORAGE_CHANNEL_ID = "1234"

    code, lines = doctor("telegram")

    assert code == 1
    assert red(lines) == {
        "configuration": "STORAGE_CHANNEL_ID must be a channel id like -1001234567890, from -1997852516352 to "
        "-1000000000001 (got '1234')"
    }


def test_a_storage_channel_that_does_not_exist_is_named(offline, settings):
    settings.STORAGE_CHANNEL_ID = "-1009999999999"

    code, lines = doctor("telegram")

    assert code == 1
    assert list(red(lines)) == ["storage channel -1009999999999"]
    assert "the bot cannot see it (400 CHANNEL_INVALID)" in red(lines)["storage channel -1009999999999"]


def test_no_storage_channel_is_named(offline, settings):
    settings.STORAGE_CHANNEL_ID = ""

    code, lines = doctor("telegram")

    assert red(lines) == {"storage channel": "STORAGE_CHANNEL_ID is not set: no file can be stored"}


def test_a_storage_channel_where_the_bot_may_not_post_is_named(offline):
    offline.bot_rights(STORAGE, post=False)

    code, lines = doctor("telegram")

    assert code == 1
    assert red(lines) == {f"storage channel {STORAGE}": "the bot is an admin without Post messages: give it"}


def test_share_buttons_on_storage_posts_need_the_edit_right(offline, conf):
    from botapp.models import BotSettings

    offline.bot_rights(STORAGE, edit=False)
    assert doctor("telegram")[0] == 0  # share links as replies need no editing
    conf.channel_post_links = BotSettings.ChannelPostLinks.BUTTON
    conf.save()

    code, lines = doctor("telegram")

    assert code == 1
    assert red(lines) == {f"storage channel {STORAGE}": "the bot is an admin without Edit messages of others: give it"}


def test_a_backup_channel_the_bot_was_removed_from_is_named(offline):
    offline.remove_bot(BACKUP)

    code, lines = doctor("telegram")

    assert code == 1
    assert list(red(lines)) == [f"backup channel {BACKUP}"]


def test_a_broadcast_channel_the_bot_is_not_in_is_named(offline, settings):
    settings.BROADCAST_CHANNEL_ID = "-1008888888888"

    code, lines = doctor("telegram")

    assert list(red(lines)) == ["broadcast channel -1008888888888"]


def test_a_force_subscribe_channel_without_the_bot_as_admin_is_named(offline):
    offline.remove_bot(FORCE)

    code, lines = doctor("telegram")

    assert code == 1
    assert list(red(lines)) == [f"force-subscribe “News” {FORCE}"]


def test_expiring_links_need_the_invite_right(offline):
    offline.bot_rights(FORCE, invite=False)

    code, lines = doctor("telegram")

    assert code == 1
    assert red(lines) == {f"force-subscribe “News” {FORCE}": "the bot is an admin without Invite users via link: give it"}


def test_no_admin_ids_is_named(offline, settings):
    settings.ADMIN_IDS = ""

    code, lines = doctor("telegram")

    assert code == 1
    assert red(lines) == {"ADMIN_IDS": "empty: nobody can use the admin commands; set your Telegram user id"}


# --- the shortener ----------------------------------------------------------------------------


@pytest.fixture
def shortener_api():
    """A shortener's HTTP API (GET ?api=KEY&url=...) that knows one key, "good-key"."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            query = parse_qs(urlsplit(self.path).query)
            if query.get("api") == ["good-key"]:
                body = {"status": "success", "shortenedUrl": "https://sho.rt/abc"}
            else:
                body = {"status": "error", "message": "Invalid API key"}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/api"
    server.shutdown()
    thread.join(10)


def test_a_shortener_that_shortens_is_green(conf, shortener_api):
    conf.shortener_api_url, conf.shortener_api_key = shortener_api, "good-key"
    conf.save()

    code, lines = doctor("shortener")

    assert code == 0, lines
    assert lines["shortener"] == ("✔", f"{shortener_api} answered https://sho.rt/abc")


def test_a_refused_shortener_key_is_named_without_showing_it(conf, shortener_api):
    conf.shortener_api_url, conf.shortener_api_key = shortener_api, "wrong-key-123"
    conf.save()

    code, lines = doctor("shortener")

    assert code == 1
    assert "Invalid API key" in red(lines)["shortener"] and "check the API URL and key" in red(lines)["shortener"]
    assert "wrong-key-123" not in red(lines)["shortener"]


# --- media ------------------------------------------------------------------------------------


def test_a_writable_media_root_is_green(settings, tmp_path, db):
    settings.MEDIA_ROOT = tmp_path / "media"

    code, lines = doctor("media")

    assert code == 0, lines
    assert lines["storage"] == ("✔", f"FileSystemStorage {tmp_path / 'media'}: writable and readable from this host")
    assert not list((tmp_path / "media" / "doctor").iterdir())  # the probe is gone


def test_a_media_root_that_cannot_be_written_is_named(settings, tmp_path, db):
    (tmp_path / "file").write_text("not a folder")
    settings.MEDIA_ROOT = tmp_path / "file" / "media"

    code, lines = doctor("media")

    assert code == 1
    assert "cannot write and read a file here" in red(lines)["storage"]


def test_workers_on_other_hosts_with_a_local_media_root_are_warned_of(settings, tmp_path, db):
    settings.MEDIA_ROOT = tmp_path / "media"
    heartbeat_record(process="worker", name="celery@other-host")
    try:
        code, lines = doctor("media")
    finally:
        heartbeat_forget(process="worker", name="celery@other-host")

    assert code == 0  # a shared folder (NFS) works: a warning, not a failure
    assert lines["shared"][0] == "!" and "workers run on other-host" in lines["shared"][1]


# --- session files ----------------------------------------------------------------------------


def test_a_session_held_by_one_process_is_green(settings, tmp_path, db):
    settings.TELEGRAM_SESSION_DIR = tmp_path
    (tmp_path / "bot.session").write_bytes(b"")
    with open(tmp_path / "bot.session", "rb"):
        code, lines = doctor("sessions")

    assert code == 0, lines
    assert lines["bot.session"][1].startswith("in use by process ")


def test_a_session_file_open_in_two_processes_is_named(settings, tmp_path, db):
    settings.TELEGRAM_SESSION_DIR = tmp_path
    session = tmp_path / "bot.session"
    session.write_bytes(b"")
    other = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(session)!r}, 'rb'); print('open', flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout.readline() == "open\n"
        with open(session, "rb"):
            code, lines = doctor("sessions")
    finally:
        other.communicate("\n", timeout=10)

    assert code == 1
    assert "open in 2 processes" in red(lines)["bot.session"] and "stop all but one" in red(lines)["bot.session"]


# --- everything, as deployed ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_correct_deployment_is_all_green_and_exits_0(telegram, tmp_path):
    """runbot, a Celery worker and beat running (offline), Redis with an append-only file, the
    database migrated, safe settings: every line is green."""
    from botapp.models import BotSettings

    conf = BotSettings.load()
    conf.bot_username = "CourierBot"
    conf.save()
    (tmp_path / "redis").mkdir()
    with redis_server(tmp_path / "redis", "--appendonly", "yes") as url, telegram_on_socket(telegram) as socket_path:
        env = manage_env(
            REDIS_URL=url,
            CELERY_BROKER_URL=url,
            SECRET_KEY=SECRET,
            DEBUG="0",
            ALLOWED_HOSTS="courier.example.com",
            PUBLIC_URL="https://courier.example.com",
            SECURE_HSTS_PRELOAD="1",
            TELEGRAM_OFFLINE="1",
            TELEGRAM_OFFLINE_SOCKET=str(socket_path),
            TELEGRAM_SESSION_DIR=str(tmp_path / "sessions"),
            MEDIA_ROOT=str(tmp_path / "media"),
            ADMIN_IDS=str(ADMIN),
            STORAGE_CHANNEL_ID=str(STORAGE),
        )
        logs = open(tmp_path / "processes.log", "w")  # noqa: SIM115 - the processes hold it
        commands = [
            [sys.executable, "manage.py", "runbot", "--threads", "2"],
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "-n", "doctor@%h"],
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
        ]
        procs = [subprocess.Popen(c, cwd=ROOT, env=env, stdout=logs, stderr=logs) for c in commands]
        try:
            heartbeats = redis.Redis.from_url(url)

            def all_beating():
                kinds = {
                    field.decode().partition(":")[0] for field in heartbeats.hgetall(f"{env['CACHE_KEY_PREFIX']}:heartbeats")
                }
                return {"bot", "worker", "beat"} <= kinds

            wait_for(all_beating, timeout=60, what="runbot, the worker and beat to start")
            result = manage("doctor", env=env)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
            logs.close()

    assert result.returncode == 0, result.stdout + result.stderr + (tmp_path / "processes.log").read_text()[-3000:]
    lines = result.stdout.splitlines()
    assert lines[-1] == "All good"
    assert all(line.startswith("✔") for line in lines[:-1]), result.stdout
    names = " ".join(lines)
    for shown in ("PostgreSQL", "Redis persistence", "workers: 1 answering (doctor@", "beat: running", "runbot: running"):
        assert shown in names
    assert "sessions  bot.session: in use by process" in names


def test_stream_bots_that_are_admins_of_the_storage_channel_are_green_and_others_named(offline, settings):
    assert doctor("stream") == (
        0,
        {"stream bots": ("✔", "none besides the main bot (STREAM_BOT_TOKENS is empty): streams read with it alone")},
    )
    offline.bot_add("7000000002:reader-token", username="ReaderBot", admin_of=[STORAGE])
    offline.bot_add("7000000003:outsider-token", username="OutsiderBot")
    settings.STREAM_BOT_TOKENS = ["7000000002:reader-token", " 7000000003:outsider-token", "7000000004:unknown-token", ""]

    code, lines = doctor("stream")

    assert code == 1
    assert lines["@ReaderBot"] == ("✔", f"an admin of the storage channel {STORAGE}")
    assert red(lines) == {
        "@OutsiderBot": f"cannot read the storage channel {STORAGE} (CHANNEL_INVALID): add the bot there as an admin",
        "bot 7000000004": "Telegram refused its token (AUTH_KEY_UNREGISTERED): copy it again from @BotFather",
    }


def test_a_stream_bot_token_that_is_not_one_is_named(offline, settings):
    settings.STREAM_BOT_TOKENS = ["not-a-token"]

    code, lines = doctor("stream")

    assert (code, red(lines)) == (
        1,
        {"STREAM_BOT_TOKENS": "a bot token looks like 123456789:AA… (from @BotFather); separate tokens with commas"},
    )
