"""What a streaming process owns: its readers (a DownloaderPool: one Downloader per bot token, each
with a kurigram session of its own, never shared with runbot, a worker or another streaming
process) and its stream slots. Built when the process starts (botapp/stream/app.py) on its loop.
"""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from botapp.config import bot_config_load
from botapp.stream.slots import Slots
from botapp.telegram.client import client_build, client_configured
from botapp.telegram.downloads import Downloader, DownloaderPool


@dataclass
class Serving:
    pool: DownloaderPool
    slots: Slots


_serving: Serving | None = None
_slot_files: list = []  # the session locks this process holds for its life


def serving() -> Serving:
    """The process's pool and slots (RuntimeError before the process started them)."""
    if _serving is None:
        raise RuntimeError("the streaming process has not started its readers (botapp/stream/app.py)")
    return _serving


def serving_set(value: Serving | None) -> None:
    """Install (or, None, remove) the process's pool and slots: the app at start, tests."""
    global _serving
    _serving = value


def session_name(directory: Path, bot: int) -> str:
    """`stream-<bot>-<n>`: the first session slot of bot number `bot` no other process holds,
    locked for the life of this process, so that two streaming processes never share a session."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        handle = open(directory / f"stream-{bot}-{n}.lock", "w")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            n += 1
            continue
        _slot_files.append(handle)
        return f"stream-{bot}-{n}"


def pool_build() -> DownloaderPool:
    """A Downloader for the bot (BOT_TOKEN) and one per extra token of STREAM_BOT_TOKENS, each
    on a session file of its own; against the in-memory Telegram when TELEGRAM_OFFLINE is set."""
    config = bot_config_load()
    options = {"max_flood_wait": settings.TELEGRAM_MAX_FLOOD_WAIT}
    first = client_configured(config, name=session_name(config.session_dir, 1), no_updates=True)
    downloaders = [Downloader(first, name="bot-1", **options)]
    for n, token in enumerate(settings.STREAM_BOT_TOKENS, start=2):
        client = client_build(
            name=session_name(config.session_dir, n), api_id=config.api_id, api_hash=config.api_hash, bot_token=token,
            workdir=config.session_dir, no_updates=True,
            offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
        )  # fmt: skip
        downloaders.append(Downloader(client, name=f"bot-{n}", **options))
    return DownloaderPool(downloaders)
