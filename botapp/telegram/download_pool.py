"""The streaming process's stream bots together: a `DownloaderPool` of one Downloader
(botapp/telegram/downloads.py) per bot token.

A `DownloaderPool` holds one Downloader per bot token and picks, per stream, the least loaded that
is not in a FloodWait (each bot has its own budget of file reads), skipped until the time Telegram
named; when all wait, the one free soonest. Telegram ties the access hashes and file references a
bot gets to its account, so each Downloader reads the messages itself and keeps its own locations;
a stream stays on its bot. The streaming process builds its pool with

    pool = DownloaderPool.from_tokens(tokens, sessions_dir, api_id=..., api_hash=..., offline=None)
    await pool.start(storage_chat_id=STORAGE_CHANNEL_ID)

- `tokens`: the bots to read with, the main bot's (BOT_TOKEN) first, then STREAM_BOT_TOKENS; the
  same bot twice is refused.
- `sessions_dir`: where the session files go (TELEGRAM_SESSION_DIR). The pool takes the first free
  slot `stream-<n>` there (an exclusive lock on `stream-<n>.lock` while the process lives) and names
  each bot's session file `stream-<n>-<bot id>.session`: any number of streaming processes on one
  host, each with sessions of its own, never runbot's, a worker's or another's.
- `api_id`, `api_hash`: the deployment's (API_ID, API_HASH).
- `offline`: the in-memory Telegram (a TelegramServer or `manage.py telegram_server`'s socket)
  instead of Telegram; `in_memory`: session storage kept in memory (no file).
- any other keyword goes to each Downloader: `in_flight`, `max_flood_wait`, `call_timeout`,
  `connections`, `read_ahead` (by default one ReadAhead of READ_AHEAD_MB parts, shared by them all).

`start(storage_chat_id=...)` signs every bot in (a refused token fails the start, naming the bot) and
leaves out of `choose` (with a warning in the log) each that is not an admin of the storage channel;
none left is an error. `bots_admin` asks the same for `manage.py doctor`.

Each Downloader is named `bot-<bot id>` (the same in every process: the `bot` label of the
streaming metrics, botapp/metrics.py).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path

from pyrogram import errors

from botapp.telegram.client import client_build
from botapp.telegram.downloads import READ_AHEAD_MB, BotAdmin, Downloader, ReadAhead
from botapp.telegram.slots import slot_take

log = logging.getLogger(__name__)


def bot_id_of(token: str) -> int:
    """The bot's id, which a Bot API token starts with ("123456:ABC..."); ValueError otherwise."""
    head, sep, secret = token.strip().partition(":")
    if not (sep and head.isdigit() and secret):
        raise ValueError("a bot token looks like 123456789:AA… (from @BotFather)")
    return int(head)


class DownloaderPool:
    """One Downloader per bot token: `choose` picks the least loaded that is not waiting out a
    FloodWait (when all are, the one free soonest), among those that can read the storage channel
    (module docstring)."""

    def __init__(self, downloaders: list[Downloader], *, slot: object | None = None):
        if not downloaders:
            raise ValueError("a pool needs at least one downloader")
        self.downloaders = list(downloaders)
        self.readers = list(downloaders)  # those `choose` picks from (start leaves out non-admins)
        self._slot = slot  # the lock file of the sessions' slot (from_tokens), closed by stop

    @classmethod
    def from_tokens(
        cls, tokens: list[str], sessions_dir: Path, *, api_id: int, api_hash: str, offline=None, in_memory: bool = False,
        **options,
    ) -> DownloaderPool:  # fmt: skip
        """A pool of one Downloader per token, each with kurigram sessions of its own in a slot of
        this process's (module docstring: the arguments)."""
        ids = [bot_id_of(token) for token in tokens]
        if not ids:
            raise ValueError("no bot token to read with")
        if len(set(ids)) != len(ids):
            raise ValueError("the same bot is named twice: each token must be another bot's")
        slot, lock = slot_take(Path(sessions_dir), "stream")
        clients = [
            client_build(name=f"{slot}-{bot_id}", api_id=api_id, api_hash=api_hash, bot_token=token.strip(),
                         workdir=Path(sessions_dir), no_updates=True, offline=offline, in_memory=in_memory)
            for token, bot_id in zip(tokens, ids, strict=True)
        ]  # fmt: skip
        options.setdefault("read_ahead", ReadAhead(READ_AHEAD_MB))  # one budget for the process's streams
        downloaders = [Downloader(c, name=f"bot-{bot_id}", **options) for c, bot_id in zip(clients, ids, strict=True)]
        return cls(downloaders, slot=lock)

    async def start(self, *, storage_chat_id: int | None = None) -> None:
        """Sign every bot in; with `storage_chat_id`, leave out of `choose` each that is not an
        admin there (logged), and fail when none is."""
        for downloader in self.downloaders:
            try:
                await downloader.start()
            except errors.RPCError as exc:
                raise RuntimeError(f"bot {downloader.name} could not sign in: {exc}") from exc
        if storage_chat_id is None:
            return
        admins = await self.admins(storage_chat_id)
        self.readers = [d for d, a in zip(self.downloaders, admins, strict=True) if a.admin]
        for found in (a for a in admins if not a.admin):
            log.warning("stream bot %s is not an admin of the storage channel %s (%s): left out until it is made one "
                        "and the process restarted", found.bot, storage_chat_id, found.problem)  # fmt: skip
        if not self.readers:
            raise RuntimeError(f"no stream bot is an admin of the storage channel {storage_chat_id}")

    async def admins(self, chat_id: int) -> list[BotAdmin]:
        """Whether each bot is an admin of channel `chat_id` (Downloader.admin_of), in order."""
        return [await downloader.admin_of(chat_id) for downloader in self.downloaders]

    async def stop(self) -> None:
        """Stop every downloader; the first failure is raised once all were asked to stop."""
        failures = []
        for downloader in self.downloaders:
            try:
                await downloader.stop()
            except Exception as exc:  # noqa: BLE001 - raised below, after the other bots stopped
                failures.append(exc)
        if self._slot is not None:
            self._slot.close()  # the slot is free for the next process
            self._slot = None
        if failures:
            raise failures[0]

    def choose(self) -> Downloader:
        """The Downloader for a new stream: the least loaded of those not in a FloodWait; when all
        are in one, the one whose wait ends first."""
        free = [d for d in self.readers if not d.in_flood]
        if free:
            return min(free, key=lambda d: d.load)
        return min(self.readers, key=lambda d: d.flood_until)


def bots_admin(tokens: list[str], chat_id: int, *, api_id: int, api_hash: str, offline=None) -> list[BotAdmin]:
    """Whether each bot of `tokens` is an admin of channel `chat_id`, asked with sessions kept in
    memory (no session file or folder of the deployment's is touched): for `manage.py doctor`. A
    token Telegram refuses, or any other error of Telegram's, is `admin=False` with its words."""

    async def check(folder: Path) -> list[BotAdmin]:
        found = []
        for token in tokens:
            pool = DownloaderPool.from_tokens([token], folder, api_id=api_id, api_hash=api_hash, offline=offline, in_memory=True)
            try:
                await pool.start()
                found += await pool.admins(chat_id)
            except RuntimeError as exc:  # Telegram refused the token
                problem = getattr(exc.__cause__, "ID", str(exc))
                found.append(BotAdmin(f"bot {bot_id_of(token)}", False, problem, signed_in=False))
            except errors.RPCError as exc:
                found.append(BotAdmin(f"bot {bot_id_of(token)}", False, exc.ID))
            finally:
                await pool.stop()
        return found

    with tempfile.TemporaryDirectory() as folder:
        return asyncio.run(check(Path(folder)))
