"""The bot's configuration from settings (the environment), checked all at once so that an operator
sees every wrong variable in one go, by name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from botapp.telegram.limits import CHANNEL_ID_MAX, CHANNEL_ID_MIN, USER_ID_MAX, channel_id_problem

BOT_TOKEN_RE = re.compile(r"^\d{5,}:[A-Za-z0-9_-]{30,}$")
API_HASH_RE = re.compile(r"^[0-9a-fA-F]{32}$")


# The names the systems Courier replaces (shared/seeds/) gave Courier's own variables: each is read
# when Courier's is not set, with a one-line notice naming Courier's (`env_alias_notice`).
ENV_ALIASES = {
    "BOT_TOKEN": ("TELEGRAM_BOT_TOKEN",),  # the drip bot (seed 002), the scheduled-message system (003)
    "API_ID": ("TELEGRAM_API_ID",),  # the drip bot's Telethon app: any app's id and hash serve a bot too
    "API_HASH": ("TELEGRAM_API_HASH",),
    "ADMIN_IDS": ("ADMIN_USER_ID",),  # the drip bot's one admin
    "PUBLIC_URL": ("BASE_URL",),  # the scheduled-message system's own address (config/settings.py reads it)
}
# Their names for what Courier keeps elsewhere (Bot settings, sequences, job schedules): never
# read from the environment; `doctor` says where each lives, and import_campaign converts seed 002's.
ENV_ELSEWHERE = {
    "SOURCE_CHANNEL_ID": "Bot settings' posts channel id (import_campaign sets it)",
    "TARGET_CHANNEL_ID": "the member: channel of the imported Verify button (import_campaign writes it)",
    "CHANNEL_URL": "Bot settings' channel link (/about, /faq) and the imported steps' Join Now (import_campaign)",
    "MSG_IMMEDIATE_ID": "Bot settings' welcome post (import_campaign sets it)",
    "MSG_30S_ID": "the imported sequence's 40 s step (import_campaign)",
    "MSG_3MIN_ID": "the imported sequence's 3 min step (import_campaign)",
    "MSG_2H_ID": "the imported sequence's 2 h step (import_campaign)",
    "CLEANUP_DELAY_MINUTES": "the farewell step's delay, 3 min + this (import_campaign)",
    "BROADCAST_BATCH_SIZE": "nothing: Courier paces every send by Telegram's limits (docs/design.md)",
    "RESULTS_CACHE_HOURS": "a posts command's answer kept (minutes: hours x 60), on the console's Posts commands page",
    "TELEGRAM_PHONE": "the phone `manage.py login_user_session` asks for, once (a posts command's public channel)",
    "TOKEN_EXPIRY_DAYS": "Bot settings' verification hours (days x 24)",
    "TOKEN_CLEANUP_HOUR": "the cleanup_tokens job's schedule (the console's Jobs page)",
    "API_BASE_URL": "nothing: the old bot's address of its own API",
}


def env_alias_notice(*, alias: str, name: str) -> str:
    """The one line a process says when it reads `alias` for Courier's `name`."""
    return f"{alias} is read as {name}, Courier's name for it: rename it in .env when you can"


def env_aliases_found() -> list[tuple[str, str]]:
    """(old name, what Courier does with it) for every name of ENV_ALIASES and ENV_ELSEWHERE set in
    the environment (or .env), in that order."""
    found = [
        (alias, f"ignored: {name} is set" if _own_set(name, alias) else f"read as {name}")
        for name, aliases in ENV_ALIASES.items()
        for alias in aliases
        if os.environ.get(alias, "").strip()
    ]
    found += [(old, f"not read: {where}") for old, where in ENV_ELSEWHERE.items() if os.environ.get(old, "").strip()]
    return found


def _own_set(name: str, alias: str) -> bool:
    """Whether Courier's `name` is set of its own (config/settings.py may have read it from `alias`)."""
    value = getattr(settings, name).strip()
    return bool(os.environ.get(name, "").strip() or value and value != os.environ.get(alias, "").strip())


def setting_read(*, name: str, notices: list[str] | None = None) -> str:
    """Courier's variable `name` from settings or, when it is empty, from the first of its
    ENV_ALIASES set in the environment; reading an alias adds its notice to `notices`."""
    value = getattr(settings, name)
    if value.strip():
        return value
    for alias in ENV_ALIASES.get(name, ()):
        if os.environ.get(alias, "").strip():
            if notices is not None:
                notices.append(env_alias_notice(alias=alias, name=name))
            return os.environ[alias]
    return value


class ConfigError(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class BotConfig:
    bot_token: str
    api_id: int
    api_hash: str
    admin_ids: frozenset[int]
    storage_channel_id: int | None
    session_dir: Path
    broadcast_channel_id: int | None = None
    notices: tuple[str, ...] = ()  # an old name read for Courier's (ENV_ALIASES), one line each


def _ids(raw: str, name: str, problems: list[str]) -> frozenset[int]:
    ids = set()
    for part in filter(None, (p.strip() for p in raw.replace(";", ",").split(","))):
        try:
            value = int(part)
        except ValueError:
            problems.append(f"{name} must be comma-separated numeric Telegram ids (got {part!r})")
            continue
        if not 1 <= value <= USER_ID_MAX:
            problems.append(f"{name}: {part} is not a Telegram user id (1 to {USER_ID_MAX})")
            continue
        ids.add(value)
    return frozenset(ids)


def secret_key_problem() -> str:
    """Why SECRET_KEY will not do (empty with DEBUG=0: signing fails on first use); "" when set."""
    try:
        if settings.DEBUG or settings.SECRET_KEY:
            return ""
    except ImproperlyConfigured:  # Django's answer to reading an empty SECRET_KEY
        pass
    return (
        "SECRET_KEY is not set (DEBUG=0 needs a long random value: python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )


def admin_ids_load() -> frozenset[int]:
    """ADMIN_IDS (or its alias), leniently: a bad entry is reported by `bot_config_load`, ignored here."""
    return _ids(setting_read(name="ADMIN_IDS"), "ADMIN_IDS", [])


def storage_channel_load(problems: list[str] | None = None) -> int | None:
    return _channel_load("STORAGE_CHANNEL_ID", problems)


def broadcast_channel_load(problems: list[str] | None = None) -> int | None:
    """BROADCAST_CHANNEL_ID: the channel whose marked posts are broadcast (None: no such channel)."""
    return _channel_load("BROADCAST_CHANNEL_ID", problems)


def _channel_load(name: str, problems: list[str] | None) -> int | None:
    raw = getattr(settings, name).strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if channel_id_problem(value):
        if problems is not None:
            problems.append(
                f"{name} must be a channel id like -1001234567890, from {CHANNEL_ID_MIN} to {CHANNEL_ID_MAX} (got {raw!r})"
            )
        return None
    return value


# The in-memory Telegram's bot (`manage.py telegram_server`): its token starts with its id, as Telegram's do.
OFFLINE_BOT_TOKEN = "7000000001:offline-token"


def bot_config_load() -> BotConfig:
    """Everything `runbot` needs to talk to Telegram; raises ConfigError naming every bad variable.
    With TELEGRAM_OFFLINE=1 the credentials are the in-memory Telegram's and need not be set."""
    problems: list[str] = []
    notices: list[str] = []
    if settings.TELEGRAM_OFFLINE:
        token, api_id, api_hash = OFFLINE_BOT_TOKEN, 1, "0" * 32
        session_dir = settings.TELEGRAM_SESSION_DIR / "offline"
    else:
        token, api_id, api_hash = _credentials_load(problems, notices)
        session_dir = settings.TELEGRAM_SESSION_DIR
    admin_ids = _ids(setting_read(name="ADMIN_IDS", notices=notices), "ADMIN_IDS", problems)
    if problem := secret_key_problem():
        problems.append(problem)
    storage = storage_channel_load(problems)
    broadcast_channel = broadcast_channel_load(problems)
    if problems:
        raise ConfigError(problems)
    return BotConfig(
        bot_token=token,
        api_id=api_id,
        api_hash=api_hash,
        admin_ids=admin_ids,
        storage_channel_id=storage,
        session_dir=session_dir,
        broadcast_channel_id=broadcast_channel,
        notices=tuple(notices),
    )


def _credentials_load(problems: list[str], notices: list[str]) -> tuple[str, int, str]:
    """BOT_TOKEN, API_ID and API_HASH (or their ENV_ALIASES), each checked; what is wrong is added
    to `problems`, an alias read to `notices`."""
    token = setting_read(name="BOT_TOKEN", notices=notices).strip()
    if not token:
        problems.append("BOT_TOKEN is not set (get one from @BotFather)")
    elif not BOT_TOKEN_RE.match(token):
        problems.append("BOT_TOKEN does not look like a bot token (123456:ABC...)")
    api_id = 0
    raw_id = setting_read(name="API_ID", notices=notices)
    if not raw_id.strip():
        problems.append("API_ID is not set (get it at my.telegram.org)")
    else:
        try:
            api_id = int(raw_id)
        except ValueError:
            problems.append(f"API_ID must be a number (got {raw_id!r})")
    api_hash = setting_read(name="API_HASH", notices=notices).strip()
    if not api_hash:
        problems.append("API_HASH is not set (get it at my.telegram.org)")
    elif not API_HASH_RE.match(api_hash):
        problems.append("API_HASH must be 32 hexadecimal characters")
    return token, api_id, api_hash
