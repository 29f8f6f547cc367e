"""Courier's real Telegram code on the in-memory Telegram: a worker's gateway, or runbot's client
with its update pump, for tests, the sandbox and offline workers.

`OfflineBot` is runbot as it runs in production (kurigram client with updates, the dispatcher,
`UpdatePump`, the router), except that the router runs in the thread that calls `process()`
instead of on a pool: tests keep their database transaction, and the sandbox its order.
"""

from __future__ import annotations

import asyncio
import os
import queue
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from botapp.telegram.client import client_build
from botapp.telegram.downloads import Downloader
from botapp.telegram.gateway import ChannelPost
from botapp.telegram.position import PositionState
from botapp.telegram.pyrogram_gateway import PyrogramGateway
from botapp.telegram.updates import UpdatePump, handle_reported

if TYPE_CHECKING:  # a client of `manage.py telegram_server` (a socket path) never loads the server
    from inmemory_telegram.server import TelegramServer

API_ID = 1
API_HASH = "0" * 32


def offline_gateway(
    target: TelegramServer | str, *, name: str = "worker", no_updates: bool = True, workdir: Path | None = None,
    bot_token: str | None = None, start: bool = True, **options,
) -> PyrogramGateway:  # fmt: skip
    """A started PyrogramGateway whose client talks to `target` (in memory unless `workdir` is given);
    `options` go to PyrogramGateway (limiter, peers, paid)."""
    if bot_token is None:
        bot_token = "7000000001:offline-token" if isinstance(target, str | os.PathLike) else target.bot.token
    client = client_build(
        name=name,
        api_id=API_ID,
        api_hash=API_HASH,
        bot_token=bot_token,
        workdir=workdir or Path(tempfile.gettempdir()),
        no_updates=no_updates,
        offline=target,
        in_memory=workdir is None,
    )
    gateway = PyrogramGateway.in_thread(client, **options)
    if start:
        gateway.start()
    return gateway


def offline_downloader(
    target: TelegramServer | str, *, name: str = "stream", bot_token: str | None = None, **options
) -> Downloader:
    """A Downloader (not started: `await downloader.start()` on the loop that reads) whose client
    talks to `target` in memory; `options` go to Downloader (in_flight, max_flood_wait, call_timeout)."""
    if bot_token is None:
        bot_token = "7000000001:offline-token" if isinstance(target, str | os.PathLike) else target.bot.token
    client = client_build(
        name=name, api_id=API_ID, api_hash=API_HASH, bot_token=bot_token, workdir=Path(tempfile.gettempdir()),
        no_updates=True, offline=target, in_memory=True,
    )  # fmt: skip
    return Downloader(client, **options)


class MemoryPositions:
    """runbot's stored position kept in memory (botapp/telegram/updates.py: PositionStore): the
    sandbox starts a new in-memory Telegram each time, so a position from another one would mean
    nothing; a test that restarts an OfflineBot hands the same store to both."""

    def __init__(self):
        self.state: PositionState | None = None

    def load(self) -> PositionState | None:
        return self.state

    def save(self, state: PositionState) -> None:
        self.state = state

    def reset(self) -> None:
        self.state = None


class QueuedPump(UpdatePump):
    """runbot's UpdatePump; parsed updates wait in a queue for `process()`. An update counts as
    handled for the position once it is queued (runbot's counts it once its handler returned)."""

    def __init__(self, positions=None):
        super().__init__(router=None, threads=1, positions=positions)
        self.pending: queue.Queue = queue.Queue()

    async def submit(self, handle, update) -> None:
        self.pending.put((handle, update, time.monotonic()))

    def process(self, *, expect: int = 1, timeout: float = 5.0, posts: bool = False) -> int:
        """Handle `expect` updates, waiting for each up to `timeout`, then any already queued.
        Channel posts (which Telegram sends whenever someone posts in the storage channel) are
        handled in turn but counted only with `posts=True`: a post made earlier never stands in
        for the user's message a caller waits for."""
        done = waited = 0
        while waited < expect:
            handle, update, arrived = self.pending.get(timeout=timeout)
            self._handle(handle, update, arrived)
            done += 1
            if isinstance(update, ChannelPost) == posts:
                waited += 1
        while True:
            try:
                handle, update, arrived = self.pending.get_nowait()
            except queue.Empty:
                return done
            self._handle(handle, update, arrived)
            done += 1

    def _handle(self, handle, update, arrived: float) -> None:
        """As runbot: the router's gates, then, admitted, the handler."""
        if self.router is None or self.router.admit(update):
            handle_reported(handle, update, arrived=arrived)


class OfflineBot:
    """runbot's client, pump and router on an in-memory Telegram. `positions`: where its position
    is kept between an OfflineBot and the next (default: its own MemoryPositions)."""

    def __init__(self, server: TelegramServer, router_factory, *, positions=None, **options):
        self.server = server
        self.positions = positions if positions is not None else MemoryPositions()
        self.pump = QueuedPump(self.positions)
        self.gateway = offline_gateway(server, name="bot", no_updates=False, start=False, **options)
        self.router = self.pump.router = router_factory(self.gateway)
        # Updates missed while down (after the stored position) are queued by `resume`.
        self.gateway.start(before_start=self.pump.register, after_start=self.pump.resume)

    def position_store(self) -> None:
        """Store the position now (runbot does it about once a second)."""
        asyncio.run_coroutine_threadsafe(self.pump.position_save(), self.gateway.loop).result(timeout=30)

    def stop(self) -> None:
        self.gateway.stop(after_stop=self.pump.close)
