"""`manage.py doctor`: everything a deployment depends on, checked from where it runs, one finding
per check. A finding says what was found, and when something is wrong, what to do about it.

The checks only read, except for a probe file written to the media storage and removed again. The
Telegram checks go through the Gateway, with a session of the doctor's own
(in memory: it never touches runbot's or a worker's session file).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import redis
from celery import current_app
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from botapp.config import ConfigError, admin_ids_load, bot_config_load, env_aliases_found
from botapp.models import BotSettings, ForceSubChannel, PostsCommand
from botapp.services.health import database_problem, processes_state
from botapp.services.shortener import DirectLinks, ShortenerError, shortener_for
from botapp.telegram.gateway import BotUnauthorized, ChatRights, Gateway, TelegramError
from botapp.telegram.user_session import user_session_account

log = logging.getLogger(__name__)

OK, WARN, FAIL = "ok", "warn", "fail"
AREAS = ("settings", "database", "redis", "celery", "telegram", "stream", "shortener", "media", "sessions")
# What `check --deploy` says that the settings checks above it already say in their own words.
DEPLOY_IDS_COVERED = {
    "security.W004",  # HSTS
    "security.W008",  # SECURE_SSL_REDIRECT
    "security.W009",  # SECRET_KEY
    "botapp.E002",  # SECRET_KEY empty with DEBUG off (botapp/checks.py)
    "security.W012",  # SESSION_COOKIE_SECURE
    "security.W016",  # CSRF_COOKIE_SECURE
    "security.W018",  # DEBUG
    "security.W020",  # ALLOWED_HOSTS
}
DEV_SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"
PING_TIMEOUT = 2.0  # seconds for a Celery worker to answer


@dataclass(frozen=True)
class Finding:
    area: str  # one of AREAS
    name: str  # what was checked
    status: str  # ok | warn (works, but know this) | fail (fix it)
    text: str  # what was found; for warn and fail, what to do

    @property
    def ok(self) -> bool:
        return self.status != FAIL


def _ok(area: str, name: str, text: str) -> Finding:
    return Finding(area, name, OK, text)


def _warn(area: str, name: str, text: str) -> Finding:
    return Finding(area, name, WARN, text)


def _fail(area: str, name: str, text: str) -> Finding:
    return Finding(area, name, FAIL, text)


# --- settings ---------------------------------------------------------------------------------


def doctor_settings() -> list[Finding]:
    """SECRET_KEY, DEBUG, ALLOWED_HOSTS, HTTPS, and whatever else `check --deploy` reports."""
    a = "settings"
    found = []
    try:
        key = settings.SECRET_KEY
    except ImproperlyConfigured:  # Django refuses to hand out an empty one
        key = ""
    if not key:
        found.append(_fail(a, "SECRET_KEY", "not set: set it to a random value of 50+ characters"))
    elif key == DEV_SECRET_KEY or key.startswith("django-insecure-") or len(key) < 50 or len(set(key)) < 5:
        found.append(
            _fail(a, "SECRET_KEY", "weak (under 50 characters, or the development key): set a random value of 50+ characters")
        )
    else:
        found.append(_ok(a, "SECRET_KEY", f"set ({len(key)} characters)"))
    if settings.DEBUG:
        found.append(_fail(a, "DEBUG", "on: anyone who hits an error sees settings and code; set DEBUG=0"))
    else:
        found.append(_ok(a, "DEBUG", "off"))
    hosts = settings.ALLOWED_HOSTS
    if not hosts:
        found.append(_fail(a, "ALLOWED_HOSTS", "empty: the web process answers 400 to every request; set the site's host name"))
    elif "*" in hosts:
        found.append(_fail(a, "ALLOWED_HOSTS", "'*' accepts any Host header: name the site's host(s)"))
    else:
        found.append(_ok(a, "ALLOWED_HOSTS", ", ".join(hosts)))
    found.append(_https())
    found += _reporting()
    # The old bot's variable names (shared/seeds/) left in the environment: what Courier does with each.
    found += [_warn(a, old, what) for old, what in env_aliases_found()]
    messages = [
        m
        for m in checks.run_checks(include_deployment_checks=True)
        if m.level >= checks.WARNING and not m.is_silenced() and m.id not in DEPLOY_IDS_COVERED
    ]
    if messages:
        listed = "; ".join(f"{m.id}: {m.msg}" + (f" ({m.hint})" if m.hint else "") for m in messages)
        found.append(_fail(a, "check --deploy", listed))
    else:
        found.append(_ok(a, "check --deploy", "no problems"))
    return found


def _reporting() -> list[Finding]:
    """/metrics and error reports: off is fine; on needs what they need."""
    a = "settings"
    found = []
    if not (settings.METRICS_TOKEN or settings.METRICS_ALLOWED_IPS):
        found.append(_ok(a, "metrics", "off (/metrics answers 404)"))
    else:
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
        if not folder:
            found.append(
                _fail(a, "metrics", "on, but PROMETHEUS_MULTIPROC_DIR is not set: set it for every process (docs/operating.md)")
            )
        elif not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
            found.append(_fail(a, "metrics", f"PROMETHEUS_MULTIPROC_DIR {folder} is not a writable folder: create it"))
        else:
            found.append(_ok(a, "metrics", f"on, every process counting in {folder}"))
    dsn = getattr(settings, "SENTRY_DSN", "")
    found.append(_ok(a, "error reports", f"to {urlsplit(dsn).hostname}" if dsn else "off (SENTRY_DSN empty)"))
    return found


def _https() -> Finding:
    missing = [
        name
        for name, on in (
            ("SECURE_SSL_REDIRECT", getattr(settings, "SECURE_SSL_REDIRECT", False)),
            ("SESSION_COOKIE_SECURE", settings.SESSION_COOKIE_SECURE),
            ("CSRF_COOKIE_SECURE", settings.CSRF_COOKIE_SECURE),
            ("SECURE_HSTS_SECONDS", getattr(settings, "SECURE_HSTS_SECONDS", 0)),
            ("SECURE_PROXY_SSL_HEADER", getattr(settings, "SECURE_PROXY_SSL_HEADER", None)),
        )
        if not on
    ]
    plain = [u for u in [settings.PUBLIC_URL, *settings.CSRF_TRUSTED_ORIGINS] if u and not u.startswith("https://")]
    if missing or plain:
        what = (f"{', '.join(missing)} off" if missing else "") + ("; " if missing and plain else "")
        what += f"not https: {', '.join(plain)}" if plain else ""
        return _fail("settings", "HTTPS", f"{what}: serve the site over https behind the proxy (docs/operating.md)")
    return _ok("settings", "HTTPS", "redirect, secure cookies, HSTS; PUBLIC_URL https" if settings.PUBLIC_URL else "on")


# --- PostgreSQL -------------------------------------------------------------------------------


def doctor_database() -> list[Finding]:
    """PostgreSQL answers, and every migration is applied."""
    a = "database"
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            (version,) = cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - whatever stops it, the operator is told
        where = f"{connection.settings_dict.get('HOST') or 'localhost'}:{connection.settings_dict.get('PORT') or 5432}"
        return [_fail(a, "PostgreSQL", f"not reachable at {where} ({type(exc).__name__}): check DATABASE_URL")]
    found = [_ok(a, "PostgreSQL", f"{connection.settings_dict['NAME']} on PostgreSQL {version}")]
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5]) + (" …" if len(plan) > 5 else "")
        found.append(_fail(a, "migrations", f"{len(plan)} not applied ({names}): run python manage.py migrate"))
    else:
        found.append(_ok(a, "migrations", "all applied"))
    return found


# --- Redis ------------------------------------------------------------------------------------


def doctor_redis() -> list[Finding]:
    """Redis (cache, limiter, heartbeats) and the Celery broker answer, keep their data
    over a restart, and never evict queued work."""
    found = _redis_checks("Redis", settings.REDIS_URL)
    if settings.CELERY_BROKER_URL != settings.REDIS_URL:
        found += _redis_checks("Celery broker", settings.CELERY_BROKER_URL)
    if not settings.CACHES["default"]["BACKEND"].endswith("RedisCache"):
        found.append(
            _warn(
                "redis",
                "cache",
                "the cache is inside each process (CACHE_URL): fine for one process, but several cannot share "
                "settings; leave CACHE_URL empty to use REDIS_URL",
            )
        )
    return found


def _redis_checks(label: str, url: str) -> list[Finding]:
    a = "redis"
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return [_ok(a, label, f"not Redis ({url.split(':', 1)[0]}): not checked here")]
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2, retry=None)
    try:
        info = client.info("server")
    except redis.RedisError as exc:
        return [_fail(a, label, f"not answering at {_where(url)} ({type(exc).__name__}): check the URL and that it runs")]
    found = [_ok(a, label, f"Redis {info.get('redis_version', '?')} at {_where(url)}")]
    found.append(_persistence(client, label))
    found.append(_eviction(client, label))
    return found


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}{parts.path or ''}"


def _persistence(client: redis.Redis, label: str) -> Finding:
    name = f"{label} persistence"
    persistence = client.info("persistence")
    if persistence.get("aof_enabled"):
        return _ok("redis", name, "append-only file on: a restart loses at most about a second of writes")
    try:
        save = client.config_get("save").get("save", "")
    except redis.ResponseError:  # CONFIG disabled (managed Redis): the snapshot's age says whether one is made
        save = "unknown"
    if save and save != "unknown":
        return _warn(
            "redis",
            name,
            f"snapshots only (save {save}): a crash loses the writes since the last one (queued tasks); "
            "appendonly yes keeps them",
        )
    return _fail(
        "redis",
        name,
        "off: a restart loses every queued Celery task (beat queues its jobs again within a minute); set appendonly "
        "yes (docs/operating.md, Redis)",
    )


def _eviction(client: redis.Redis, label: str) -> Finding:
    memory = client.info("memory")
    policy, limit = memory.get("maxmemory_policy", "noeviction"), int(memory.get("maxmemory", 0) or 0)
    if limit and policy.startswith("allkeys"):
        return _fail(
            "redis",
            f"{label} eviction",
            f"maxmemory-policy {policy}: when full, Redis drops queued tasks and the limiter's state; use noeviction "
            "or volatile-lru",
        )
    return _ok("redis", f"{label} eviction", f"{policy}" + (f", maxmemory {limit} bytes" if limit else ", no memory limit"))


# --- Celery -----------------------------------------------------------------------------------


def doctor_celery() -> list[Finding]:
    """A Celery worker answers a ping; beat and runbot beat their hearts, one of each."""
    a = "celery"
    found = []
    try:
        replies = current_app.control.ping(timeout=PING_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - a broker that is down is reported under redis too
        replies = []
        log.warning("celery ping failed: %s", exc)
    names = sorted(name for reply in replies for name in reply)
    if names:
        found.append(_ok(a, "workers", f"{len(names)} answering ({', '.join(names)})"))
    else:
        found.append(
            _fail(
                a,
                "workers",
                f"none answered a ping in {PING_TIMEOUT:g} s: nothing runs the background jobs; start one "
                "(celery -A config worker)",
            )
        )
    state = processes_state()
    for process, label, how in (
        ("beat", "beat", "celery -A config beat -S django_celery_beat.schedulers:DatabaseScheduler"),
        ("bot", "runbot", "python manage.py runbot"),
    ):
        s = state[process]
        if s.unknown:
            found.append(_fail(a, label, "unknown: Redis is not answering"))
        elif len(s.alive) > 1:
            hosts = ", ".join(name for name, _ in s.alive)
            found.append(_fail(a, label, f"{len(s.alive)} running ({hosts}): exactly one may run; stop the others"))
        elif s.alive:
            found.append(_ok(a, label, f"running on {s.alive[0][0]}, last heartbeat {s.alive[0][1]:.0f} s ago"))
        else:
            found.append(_fail(a, label, f"{s.summary}: start it ({how})"))
    return found


# --- Telegram ---------------------------------------------------------------------------------

# What each kind of channel needs the bot to be allowed (ChatRights fields), and why.
RIGHT_NAMES = {"post": "Post messages", "edit": "Edit messages of others", "invite": "Invite users via link"}


def doctor_telegram(*, gateway_open: Callable[[], Gateway]) -> list[Finding]:
    """The configuration is complete, the token signs in, and every channel the bot uses exists and
    has the bot as an admin with the rights it needs. `gateway_open()` signs in and returns a
    started gateway (stopped here)."""
    a = "telegram"
    try:
        config = bot_config_load()
    except ConfigError as exc:
        return [_fail(a, "configuration", problem) for problem in exc.problems]
    found = []
    try:
        gateway = gateway_open()
    except (BotUnauthorized, TelegramError) as exc:
        return [_fail(a, "sign-in", f"Telegram refused BOT_TOKEN ({_short(exc)}): get the token from @BotFather")]
    try:
        found.append(_ok(a, "sign-in", f"signed in as @{gateway.bot_username}"))
        conf = BotSettings.load()
        if conf.bot_username and conf.bot_username != gateway.bot_username:
            found.append(
                _warn(a, "username", f"links use @{conf.bot_username}, the token is @{gateway.bot_username}: runbot fixes it")
            )
        if config.storage_channel_id is None:
            found.append(_fail(a, "storage channel", "STORAGE_CHANNEL_ID is not set: no file can be stored"))
        else:
            needs = ("post", "edit") if conf.channel_post_links == BotSettings.ChannelPostLinks.BUTTON else ("post",)
            found.append(_channel(gateway, "storage channel", config.storage_channel_id, needs))
        if conf.backup_channel_id:
            found.append(_channel(gateway, "backup channel", conf.backup_channel_id, ("post",)))
        if config.broadcast_channel_id is not None:
            found.append(_channel(gateway, "broadcast channel", config.broadcast_channel_id, ()))
        for channel in ForceSubChannel.objects.filter(enabled=True):
            needs = ("invite",) if channel.invite_ttl_minutes else ()
            found.append(_channel(gateway, f"force-subscribe “{channel.title}”", channel.chat_id, needs))
    finally:
        gateway.stop()
    found += _user_session(config.session_dir)
    admins = admin_ids_load()
    if admins:
        found.append(_ok(a, "ADMIN_IDS", f"{len(admins)} admin(s): {', '.join(map(str, sorted(admins)))}"))
    else:
        found.append(_fail(a, "ADMIN_IDS", "empty: nobody can use the admin commands; set your Telegram user id"))
    return found


def _user_session(session_dir: Path) -> list[Finding]:
    """Whether the user session is logged in, when an enabled posts command reads a public channel
    through it (nothing is said when none does)."""
    needing = sorted(
        PostsCommand.objects.filter(enabled=True).exclude(channel_username="").values_list("name", "channel_username")
    )
    if not needing:
        return []
    commands = ", ".join(f"/{name} (@{username})" for name, username in needing)
    account = user_session_account(session_dir)
    if account is None:
        return [_fail("telegram", "user session", f"not logged in, and {commands} reads through it: run "
                      "`python manage.py login_user_session`")]  # fmt: skip
    return [_ok("telegram", "user session", f"logged in as user {account}, for {commands}")]


def _channel(gateway: Gateway, label: str, chat_id: int, needs: tuple[str, ...]) -> Finding:
    name = f"{label} {chat_id}"
    try:
        rights: ChatRights = gateway.chat_rights(chat_id)
    except TelegramError as exc:
        return _fail(
            "telegram",
            name,
            f"the bot cannot see it ({_short(exc)}): check the id, add the bot to the channel and make it an admin",
        )
    if not rights.admin:
        return _fail("telegram", name, "the bot is not an admin there: make it one" + _rights_text(needs))
    missing = [r for r in needs if not getattr(rights, r)]
    if missing:
        return _fail("telegram", name, f"the bot is an admin without {', '.join(RIGHT_NAMES[r] for r in missing)}: give it")
    return _ok("telegram", name, "the bot is an admin" + (f" ({', '.join(RIGHT_NAMES[r] for r in needs)})" if needs else ""))


def _rights_text(needs: tuple[str, ...]) -> str:
    return f" with {', '.join(RIGHT_NAMES[r] for r in needs)}" if needs else ""


def _short(exc: BaseException) -> str:
    text = str(exc)
    if "[" in text and "]" in text:  # kurigram's "Telegram says: [400 CHANNEL_INVALID] - ..."
        return text[text.index("[") + 1 : text.index("]")]
    return text[:120]


# --- the stream bots ---------------------------------------------------------------------------


def stream_tokens() -> list[str]:
    """The extra bots' tokens the streaming process reads with besides BOT_TOKEN (STREAM_BOT_TOKENS,
    a list: config/settings.py reads it comma-separated), blanks left out as the process does."""
    return [t.strip() for t in settings.STREAM_BOT_TOKENS if t.strip()]


def doctor_stream(*, stream_admins: Callable[[list[str], int], list]) -> list[Finding]:
    """Each extra stream bot (STREAM_BOT_TOKENS) signs in and is an admin of the storage channel,
    which it must be to read the stored files. `stream_admins(tokens, chat_id)` asks Telegram
    (botapp.telegram.download_pool.bots_admin: one BotAdmin per token)."""
    a = "stream"
    tokens = stream_tokens()
    if not tokens:
        return [_ok(a, "stream bots", "none besides the main bot (STREAM_BOT_TOKENS is empty): streams read with it alone")]
    try:
        storage = bot_config_load().storage_channel_id
    except ConfigError:
        return [_fail(a, "stream bots", "not checked: the bot's configuration is incomplete (see the telegram lines)")]
    if storage is None:
        return [_fail(a, "stream bots", "not checked: STORAGE_CHANNEL_ID is not set")]
    try:
        found = stream_admins(tokens, storage)
    except ValueError as exc:  # a token that is not one
        return [_fail(a, "STREAM_BOT_TOKENS", f"{exc}; separate tokens with commas")]
    return [
        _ok(a, bot.bot, f"an admin of the storage channel {storage}")
        if bot.admin
        else _fail(a, bot.bot, f"Telegram refused its token ({bot.problem}): copy it again from @BotFather")
        if not bot.signed_in
        else _fail(a, bot.bot, f"cannot read the storage channel {storage} ({bot.problem}): add the bot there as an admin")
        for bot in found
    ]


# --- the shortener ----------------------------------------------------------------------------


def doctor_shortener() -> list[Finding]:
    """The shortener in Bot settings shortens a test link (its key accepted)."""
    conf = BotSettings.load()
    shortener = shortener_for(api_url=conf.shortener_api_url, api_key=conf.shortener_api_key)
    if isinstance(shortener, DirectLinks):
        return [_ok("shortener", "shortener", "none: users get direct verification links")]
    try:
        short = shortener.shorten(f"https://t.me/{conf.bot_username or 'bot'}?start=doctor")
    except ShortenerError as exc:
        text = str(exc).replace(conf.shortener_api_key, "***") if conf.shortener_api_key else str(exc)
        return [_fail("shortener", "shortener", f"{text}: check the API URL and key in Bot settings")]
    return [_ok("shortener", "shortener", f"{conf.shortener_api_url} answered {short}")]


# --- media ------------------------------------------------------------------------------------


def doctor_media() -> list[Finding]:
    """The storage of uploaded files (STORAGES["default"]) can be written, read and deleted from
    here; a local folder used by workers on other hosts is named."""
    a = "media"
    default_storage = storages["default"]
    backend = type(default_storage).__name__
    where = str(getattr(default_storage, "bucket_name", "") or getattr(default_storage, "location", "") or "")
    probe = f"doctor/{socket.gethostname()}-{uuid.uuid4().hex[:8]}.txt"
    body = b"courier doctor probe"
    try:
        name = default_storage.save(probe, ContentFile(body))
        try:
            with default_storage.open(name, "rb") as f:
                read = f.read()
        finally:
            default_storage.delete(name)
    except Exception as exc:  # noqa: BLE001 - whatever the backend raises, the operator is told
        return [_fail(a, "storage", f"{backend} {where}: cannot write and read a file here ({type(exc).__name__}: {exc})")]
    if read != body:
        return [_fail(a, "storage", f"{backend} {where}: a file written here read back different")]
    found = [_ok(a, "storage", f"{backend} {where}: writable and readable from this host")]
    local = hasattr(default_storage, "path") and not hasattr(default_storage, "bucket_name")
    if local:
        here = socket.gethostname()
        elsewhere = sorted(
            {name.rpartition("@")[2] for name, _ in processes_state()["worker"].alive if name.rpartition("@")[2] != here}
        )
        if elsewhere:
            found.append(
                _warn(
                    a,
                    "shared",
                    f"workers run on {', '.join(elsewhere)}: they read uploads from their own {where} unless it is "
                    "shared; use object storage (docs/operating.md, Media)",
                )
            )
    return found


# --- session files ----------------------------------------------------------------------------


def doctor_sessions() -> list[Finding]:
    """The session folder is writable; runbot's session exists; no session file is open in more
    than one process on this host."""
    a = "sessions"
    directory = settings.TELEGRAM_SESSION_DIR / "offline" if settings.TELEGRAM_OFFLINE else settings.TELEGRAM_SESSION_DIR
    if not directory.is_dir():
        return [_fail(a, "folder", f"{directory} does not exist: create it, owned by the user the processes run as")]
    if not os.access(directory, os.W_OK | os.X_OK):
        return [_fail(a, "folder", f"{directory} is not writable by this user: chown it to the user the processes run as")]
    found = [_ok(a, "folder", f"{directory} writable")]
    sessions = sorted(directory.glob("*.session"))
    if not (directory / "bot.session").exists():
        found.append(_warn(a, "bot.session", "absent: runbot has not signed in from this host yet (it creates it)"))
    holders = _open_by(sessions)
    for path in sessions:
        pids = holders.get(path, set())
        if len(pids) > 1:
            found.append(
                _fail(
                    a,
                    path.name,
                    f"open in {len(pids)} processes ({', '.join(map(str, sorted(pids)))}): a session belongs to one "
                    "process; stop all but one",
                )
            )
        elif not os.access(path, os.R_OK | os.W_OK):
            found.append(_fail(a, path.name, "not readable and writable by this user: chown it"))
        else:
            found.append(_ok(a, path.name, f"in use by process {next(iter(pids))}" if pids else "present, not in use"))
    return found


def _open_by(paths: list[Path]) -> dict[Path, set[int]]:
    """Which processes of this host hold each file open (Linux /proc; processes of other users
    are seen only by root)."""
    wanted = {str(p.resolve()): p for p in paths}
    holders: dict[Path, set[int]] = {}
    for pid, target in _open_files():
        if target in wanted:
            holders.setdefault(wanted[target], set()).add(pid)
    return holders


def _open_files() -> Iterator[tuple[int, str]]:
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                yield int(entry.name), os.readlink(fd)
        except OSError:  # gone meanwhile, or not ours to look at
            continue


# --- all of them ------------------------------------------------------------------------------


def doctor_run(
    *, gateway_open: Callable[[], Gateway], stream_admins: Callable | None = None, areas: tuple[str, ...] = AREAS
) -> list[Finding]:
    """Every check of the given areas, in AREAS order (`stream` only given `stream_admins`)."""
    runs = {
        "settings": doctor_settings,
        "database": doctor_database,
        "redis": doctor_redis,
        "celery": doctor_celery,
        "telegram": lambda: doctor_telegram(gateway_open=gateway_open),
        "stream": lambda: doctor_stream(stream_admins=stream_admins) if stream_admins is not None else [],
        "shortener": doctor_shortener,
        "media": doctor_media,
        "sessions": doctor_sessions,
    }
    found: list[Finding] = []
    for area in AREAS:
        if area not in areas:
            continue
        if area in NEEDS_DATABASE and not _database_answers(found):
            found.append(_fail(area, area, "not checked: it needs the database, which is not answering"))
            continue
        found += runs[area]()
    return found


NEEDS_DATABASE = ("telegram", "shortener")  # Bot settings and force-subscribe channels are rows


def _database_answers(found: list[Finding]) -> bool:
    checked = [f for f in found if f.area == "database" and f.name == "PostgreSQL"]
    return checked[0].ok if checked else not database_problem()
