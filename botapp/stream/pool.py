"""What a streaming process owns: its readers (a DownloaderPool: one Downloader per bot token, each
with a kurigram session of its own in the process's slot, never shared with runbot, a worker or
another streaming process: botapp/telegram/download_pool.py) and its stream slots. Built when the
process starts (botapp/stream/app.py) on its loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from botapp.config import bot_config_load
from botapp.stream.memory import HeapTrimmer
from botapp.stream.slots import Slots
from botapp.telegram.download_pool import DownloaderPool
from botapp.telegram.downloads import ReadAhead


@dataclass
class Serving:
    pool: DownloaderPool
    slots: Slots
    trimmer: HeapTrimmer = field(default_factory=HeapTrimmer)  # gives the parts' memory back (memory.py)


_serving: Serving | None = None


def serving() -> Serving:
    """The process's pool and slots (RuntimeError before the process started them)."""
    if _serving is None:
        raise RuntimeError("the streaming process has not started its readers (botapp/stream/app.py)")
    return _serving


def serving_set(value: Serving | None) -> None:
    """Install (or, None, remove) the process's pool and slots: the app at start, tests."""
    global _serving
    _serving = value


async def pool_started() -> DownloaderPool:
    """The readers, signed in: one Downloader for the bot (BOT_TOKEN) and one per token of
    STREAM_BOT_TOKENS, each on a session file of its own in this process's slot of
    TELEGRAM_SESSION_DIR (DownloaderPool.from_tokens); a bot that is not an admin of the storage
    channel is left out (logged), none left fails the start. Against the in-memory Telegram when
    TELEGRAM_OFFLINE is set."""
    config = bot_config_load()
    pool = DownloaderPool.from_tokens(
        [config.bot_token, *(t for t in settings.STREAM_BOT_TOKENS if t.strip())], config.session_dir, api_id=config.api_id,
        api_hash=config.api_hash, offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
        max_flood_wait=settings.TELEGRAM_MAX_FLOOD_WAIT, read_ahead=ReadAhead(settings.STREAM_READ_AHEAD_MB),
    )  # fmt: skip
    try:
        await pool.start(storage_chat_id=config.storage_channel_id)
    except BaseException:
        await pool.stop()  # its sessions' slot is free again
        raise
    return pool
