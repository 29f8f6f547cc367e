"""The socket, replaced: kurigram's `Client(connection_factory=...)` gets a connection that carries
its MTProto packets to the in-memory Telegram instead of to Telegram's data centres.

Two carriers, one protocol: `InProcessConnection` hands packets to a `TelegramServer` in this
process (unit tests, the sandbox); `SocketConnection` sends them over a Unix socket to
`manage.py telegram_server` (several processes sharing one Telegram, as in production).

What does not run offline: MTProto's key exchange (its RSA step needs Telegram's private key)
and the first sign-in. `ProvisionedStorage` gives each new session what they would have left
behind: an auth key, DC 2, and the bot's user id (from its token, as Telegram's tokens start with
it). Everything after that — every request, answer, update, error and retry — is kurigram's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import struct
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

from pyrogram.storage import SQLiteStorage

from botapp.telegram.kurigram import LoopCrypto
from inmemory_telegram.limits import HOME_DC
from inmemory_telegram.protocol import HELLO, PACKET, STREAM_LIMIT, WRITTEN, files_socket, frame, read_frame

if TYPE_CHECKING:  # a client of `manage.py telegram_server` never imports the server
    from inmemory_telegram.server import TelegramServer


class ProvisionedStorage(SQLiteStorage):
    """kurigram's SQLite session storage, provisioned on first open as if signed in before; with
    no bot token (a person's user session), with the key only: the account signs in itself
    (auth.sendCode, auth.signIn), as after the key exchange with Telegram."""

    def __init__(self, name: str, *, workdir, in_memory: bool, api_id: int, bot_token: str | None):
        super().__init__(name, workdir=workdir, in_memory=in_memory)
        self.provision_api_id = api_id
        self.provision_bot_id = int(bot_token.split(":", 1)[0]) if bot_token else None
        self.bot_token = bot_token  # the bot its key is signed in to (None: none yet, a user session)
        self.dc_keys: dict[int, bytes] = {}  # keys for other data centres (provisioned_auth_key)

    async def open(self):
        await super().open()
        if await self.auth_key() is None:
            await self.dc_id(2)
            await self.api_id(self.provision_api_id)
            await self.test_mode(False)
            await self.server_address("127.0.0.1")
            await self.port(443)
            await self.date(0)
            await self.auth_key(os.urandom(256))
            # A user session's key is signed in to nothing yet: user id 0 (kurigram's connect says
            # "not authorized"; a user id None would make it start a key exchange).
            await self.user_id(self.provision_bot_id or 0)
            await self.is_bot(self.provision_bot_id is not None)
            await self.save()

    async def provisioned_auth_key(self, dc_id: int) -> bytes:
        """The auth key for a connection to another data centre (botapp/telegram/kurigram.py asks
        for it where kurigram runs MTProto's key exchange, which does not run offline). Not
        signed in: the client imports an authorization with it, as against Telegram."""
        key = self.dc_keys[dc_id] = os.urandom(256)
        return key

    async def key_for(self, dc_id: int) -> bytes:
        """The key a connection to `dc_id` carries: the one provisioned for it, else the session's."""
        return self.dc_keys.get(dc_id) or await self.auth_key()


class _Connection:
    """The interface kurigram's Session uses: connect, send, recv, close (and protocol.crypto_executor)."""

    def __init__(self, dc_id, server_address, port, test_mode, proxy=None, media=False, protocol_factory=None,
                 crypto_executor_workers=1, loop=None, *, storage: SQLiteStorage):  # fmt: skip
        self.storage = storage
        self.dc_id = dc_id
        self.media = media  # a media session's (kurigram's is_media): to the DC's media-only address
        self.loop = loop
        self.protocol = SimpleNamespace(crypto_executor=LoopCrypto())  # as the production transport's
        self.queue: asyncio.Queue | None = None

    def _deliver(self, packet: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the client's loop is already closed
            self.loop.call_soon_threadsafe(self.queue.put_nowait, packet)

    async def recv(self) -> bytes | None:
        return await self.queue.get()


class InProcessConnection(_Connection):
    def __init__(self, *args, server: TelegramServer, **kwargs):
        super().__init__(*args, **kwargs)
        self.server = server
        self.endpoint = None

    async def connect(self) -> None:
        self.queue = asyncio.Queue()
        key = await self.storage.key_for(self.dc_id)
        self.endpoint = self.server.connect(
            key, self._deliver, hangup=lambda: self._deliver(None), dc_id=self.dc_id, bot_token=self.storage.bot_token
        )

    async def send(self, data: bytes) -> None:
        if self.endpoint is None or self.endpoint.closed:
            raise OSError("not connected")
        self.endpoint.receive(data)

    async def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
        if self.queue is not None:
            self.queue.put_nowait(None)


class SocketConnection(_Connection):
    def __init__(self, *args, path: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.path = path
        self.reader = self.writer = None
        self.reader_task = None

    async def connect(self) -> None:
        self.queue = asyncio.Queue()
        # A media connection, or one to a DC other than the bot's, goes to the file DCs' socket
        # (inmemory_telegram/file_dcs.py), as Telegram gives media-only addresses (dcOption.media_only).
        path = files_socket(self.path) if self.media or self.dc_id != HOME_DC else self.path
        self.reader, self.writer = await asyncio.open_unix_connection(path, limit=STREAM_LIMIT)
        key = await self.storage.key_for(self.dc_id)
        self.writer.write(frame(HELLO, key + struct.pack(">H", self.dc_id) + (self.storage.bot_token or "").encode()))
        await self.writer.drain()
        self.reader_task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                kind, payload = await read_frame(self.reader)
                if kind == PACKET:
                    self.queue.put_nowait(payload)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        self.queue.put_nowait(None)  # kurigram restarts the session on a null packet

    async def send(self, data: bytes) -> None:
        """What kurigram's TCP.send does with its socket: a connection already closing takes the
        packet and sends nothing (the session's receiver has ended or is about to, and the caller
        asks again), and a write that fails raises OSError, whatever the event loop raised (uvloop
        raises RuntimeError on a transport closed under it)."""
        if self.writer is None:
            raise OSError("not connected")
        if self.writer.is_closing():
            return
        try:
            self.writer.write(frame(WRITTEN, struct.pack(">d", time.monotonic()) + data))
            await self.writer.drain()
        except Exception as exc:  # noqa: BLE001 - as kurigram's transport: every failed write is OSError
            raise OSError(exc) from exc

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        if self.reader_task is not None:
            await asyncio.gather(self.reader_task, return_exceptions=True)


def offline_client_options(
    target: TelegramServer | str, *, name: str, workdir, in_memory: bool, api_id: int, bot_token: str | None
) -> dict:
    """`Client(**options)` for a client of the in-memory Telegram: `target` is a server in this
    process or the path of `manage.py telegram_server`'s socket; `bot_token` None: a person's user
    session, which signs in itself."""
    storage = ProvisionedStorage(name, workdir=workdir, in_memory=in_memory, api_id=api_id, bot_token=bot_token)
    if not isinstance(target, str | os.PathLike):
        factory = functools.partial(InProcessConnection, server=target, storage=storage)
    else:
        factory = functools.partial(SocketConnection, path=str(target), storage=storage)
    return {"storage_engine": storage, "connection_factory": factory}
