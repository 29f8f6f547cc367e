"""The bot's configuration from settings (the environment), checked all at once so that an operator
sees every wrong variable in one go, by name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from botapp.telegram.limits import CHANNEL_ID_MAX, CHANNEL_ID_MIN, USER_ID_MAX, channel_id_problem

BOT_TOKEN_RE = re.compile(r"^\d{5,}:[A-Za-z0-9_-]{30,}$")
API_HASH_RE = re.compile(r"^[0-9a-fA-F]{32}$")


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
    """ADMIN_IDS, leniently: a bad entry is reported by `bot_config_load`, ignored here."""
    return _ids(settings.ADMIN_IDS, "ADMIN_IDS", [])


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
    if settings.TELEGRAM_OFFLINE:
        token, api_id, api_hash = OFFLINE_BOT_TOKEN, 1, "0" * 32
        session_dir = settings.TELEGRAM_SESSION_DIR / "offline"
    else:
        token, api_id, api_hash = _credentials_load(problems)
        session_dir = settings.TELEGRAM_SESSION_DIR
    admin_ids = _ids(settings.ADMIN_IDS, "ADMIN_IDS", problems)
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
    )


def _credentials_load(problems: list[str]) -> tuple[str, int, str]:
    """BOT_TOKEN, API_ID and API_HASH, each checked; what is wrong is added to `problems`."""
    token = settings.BOT_TOKEN.strip()
    if not token:
        problems.append("BOT_TOKEN is not set (get one from @BotFather)")
    elif not BOT_TOKEN_RE.match(token):
        problems.append("BOT_TOKEN does not look like a bot token (123456:ABC...)")
    api_id = 0
    if not settings.API_ID.strip():
        problems.append("API_ID is not set (get it at my.telegram.org)")
    else:
        try:
            api_id = int(settings.API_ID)
        except ValueError:
            problems.append(f"API_ID must be a number (got {settings.API_ID!r})")
    api_hash = settings.API_HASH.strip()
    if not api_hash:
        problems.append("API_HASH is not set (get it at my.telegram.org)")
    elif not API_HASH_RE.match(api_hash):
        problems.append("API_HASH must be 32 hexadecimal characters")
    return token, api_id, api_hash
