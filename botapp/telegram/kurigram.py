"""Every use of kurigram's private parts, in one place, checked against one kurigram version.

Why this size: over the house's 600 lines on purpose: it is the one module allowed kurigram's
internals, so an upgrade re-reads one file against one version check (KURIGRAM_CHECKED); split up,
it would be several places to re-read and a check that no longer says where.

Courier talks to Telegram through kurigram's public API except where it must not (speed, or
behaviour kurigram lacks). Each of those places is here, with the kurigram code it mirrors named,
so an upgrade re-checks one module: tests/botapp/telegram/test_kurigram.py fails on any other
installed version than KURIGRAM_CHECKED and lists what to re-read; a contract test sends each kind
of request through `invoke_many` and through kurigram's public `Client.invoke` against the
in-memory Telegram and compares the bytes.

What is used, and where kurigram keeps it (pyrogram/session/session.py unless said otherwise):
- `Session.msg_factory` (internals/msg_factory.py: `create`, `allocate_message_identity`,
  `allocate_message_sequence`, `_last_msg_id`), `Session.results` (msg_id -> Result with `.value`
  and `.event.set()`, filled by `Session.handle_packet`), `Session.salt`, `session_id`,
  `auth_key`, `auth_key_id`, `connection` (`.send`; a new object after `Session.restart`),
  `recv_task` (the connection's `recv_worker`, done once the connection gave its null packet),
  `is_started`, `stored_msg_ids`, `WAIT_TIMEOUT`;
  `pyrogram.crypto.mtproto.pack` and `unpack` (which `Session.handle_packet` hands to the crypto
  executor); `pyrogram.raw.core.Message` and `MsgContainer`.
- `pyrogram.raw.all.objects` (raw/core/tl_object.py: `TLObject.read` finds each constructor's class
  there): rpc_result's entry is `LeanRpcResult`, which reads a send's answer only as far as its id.
- `pyrogram.crypto.aes.ige256_encrypt` / `ige256_decrypt` (crypto/aes.py), looked up there by
  `mtproto.pack`, `Auth` and `unpack_lean` at each call: replaced by cryptg's (the cipher, below).
- `Client._set_server_time(msg_id)` (client.py): the clock offset kurigram's msg ids use.
- `TCP.crypto_executor` (connection/transport/tcp/tcp.py): where packets are ciphered; and
  `TCP._recv_from_socket` (`reader`, `TIMEOUT`), replaced by a linear-time read.
- `types.Photo._parse` (types/messages_and_media/photo.py): a photo's file id from raw TL.
- `Client.loop`: the loop kurigram schedules its own tasks on.
- Downloads (`media_session_open`, `media_invoke`): `Client.get_session`'s way to a media session
  (client.py: the key, `Session(..., is_media=True)`, `auth.exportAuthorization` /
  `importAuthorization`), `session.Auth(...).create()` for another DC's key, and on that session
  what `_transmit` uses of `Session.send`.
- The update stream (pyrogram/dispatcher.py, client.py): `Dispatcher.updates_queue`, which
  `Client.handle_updates` fills with `put_nowait((update, users, chats))` and each of
  `Dispatcher.handler_worker`'s tasks empties one packet at a time, every handler awaited before it
  asks for the next (`TrackedQueue` counts a packet handled then); `Client.fetch_peers`, which
  caches the access hashes an answer names; getDifference asked as `recover_gaps` asks it
  (methods/advanced/recover_gaps.py), which runbot replaces (`skip_updates=True`).
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import contextlib
import contextvars
import hashlib
import io
import logging
import sqlite3
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import cryptg
from pyrogram import Client, errors, raw, types
from pyrogram.connection.transport import TCPAbridged
from pyrogram.crypto import aes, mtproto
from pyrogram.errors import SecurityCheckMismatch
from pyrogram.raw.all import objects as tl_constructors
from pyrogram.raw.core import Message, MsgContainer
from pyrogram.session import Auth, Session

from botapp.runtime import gc_tune
from botapp.telegram.gateway import random_id_of
from botapp.telegram.position import Position, Ticket, spans_of

log = logging.getLogger(__name__)

KURIGRAM_CHECKED = "2.2.26"  # the version every use below was read against
RECHECK = (
    "pyrogram/session/session.py: Session.handle_packet (results, stored_msg_ids, seq_no == 0 time sync, "
    "ignore_count of packets discarded as out of time), Session.restart, "
    "Session.send (salt, BadServerSalt), Session.invoke (retries), Session.start (a new connection object, "
    "its recv_task), Session.recv_worker (ends on a null packet: the connection dropped or closed)",
    "pyrogram/session/internals/msg_factory.py: MsgFactory.create / allocate_* / _last_msg_id",
    "pyrogram/crypto/mtproto.py: pack(message, salt, session_id, auth_key, auth_key_id), unpack(b, session_id, ...) "
    "(Message.read slices each body by its length), kdf; pyrogram/crypto/aes.py",
    "pyrogram/raw/all.py objects and raw/core/tl_object.py TLObject.read; raw/types/rpc_result.py RpcResult.read",
    "pyrogram/client.py: Client._set_server_time, Client.server_time, Client.loop",
    "pyrogram/connection/transport/tcp/tcp.py: TCP.crypto_executor, TCP._recv_from_socket (reader, TIMEOUT)",
    "pyrogram/types/messages_and_media/photo.py: Photo._parse",
    "pyrogram/errors/rpc_error.py: RPCError.raise_it, the value of an unknown error ('[420 NAME]')",
    "pyrogram/dispatcher.py: Dispatcher.updates_queue, handler_worker (one packet at a time, handlers awaited), "
    "start (recover_gaps unless skip_updates)",
    "pyrogram/client.py: Client.handle_updates (put_nowait of (update, users, chats)), Client.fetch_peers, "
    "updates_watchdog; methods/advanced/recover_gaps.py",
    "pyrogram/client.py: Client.get_session (a media session: key, Session(is_media=True), export/import of the "
    "authorization), Client.get_dc_option; pyrogram/session/auth.py: Auth.create",
    "pyrogram/storage/sqlite_storage.py: the sessions table (user_id, is_bot)",
    "pyrogram/client.py: Client.rnd_id (MsgId), what every send method of pyrogram/methods/messages draws its "
    "random_id (and a poll's id) from, in the order it builds the request",
)


def kurigram_version() -> str:
    return metadata.version("kurigram")


def session_account(path: Path) -> tuple[int, bool] | None:
    """(user id, is a bot) a session file is signed in as (user id 0: signed in to nothing), read
    only, as kurigram's SQLiteStorage keeps it in its `sessions` table: the process that holds the
    file (runbot) keeps a write open, which kurigram's own open() would wait for. None: no such
    file, or not one of kurigram's sessions."""
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)) as conn:
            row = conn.execute("SELECT user_id, is_bot FROM sessions").fetchone()
    except sqlite3.Error:
        return None
    return (int(row[0] or 0), bool(row[1])) if row else None


# --- the session's seen-message ids -------------------------------------------------------------


class MessageIds(list):
    """kurigram's Session keeps the ids of the last 2,000 messages Telegram sent it, sorted
    (bisect.insort), and checks each new message against them with `in`: a scan of the whole list
    for every message received, a few per cent of runbot's CPU. This list answers `in` by bisection."""

    def __contains__(self, msg_id) -> bool:
        i = bisect.bisect_left(self, msg_id)
        return i < len(self) and self[i] == msg_id


def session_tune(client: Client) -> None:
    """After the client has started: its session's seen-message ids in a `MessageIds`, and what
    signing in built (kurigram's TL classes among it) frozen out of the garbage collector's walks
    (botapp/runtime.py)."""
    session = getattr(client, "session", None)
    if session is not None and type(session.stored_msg_ids) is list:
        session.stored_msg_ids = MessageIds(session.stored_msg_ids)
    gc_tune()


def loop_bind(client: Client, loop: asyncio.AbstractEventLoop) -> None:
    """kurigram schedules its own tasks on `client.loop`: it must be the loop the gateway runs.
    Its send methods draw their random_ids from `client.rnd_id`, keyed here (`keyed_random_ids`)."""
    client.loop = loop
    if not isinstance(client.rnd_id, _KeyedRandomIds):
        client.rnd_id = _KeyedRandomIds(client.rnd_id)
    if not isinstance(client.invoke, _RoutedInvoke):
        client.invoke = _RoutedInvoke(client, client.invoke)


# What asks the requests kurigram's own methods make in this task (`asked_through`); None: kurigram.
_ASK: contextvars.ContextVar[Callable[[object], Awaitable] | None] = contextvars.ContextVar("ask", default=None)
# kurigram.Client.invoke's arguments that only tune its own asking (its retries, its FloodWait
# sleeps): the request layer, asking instead, has its own.
_ASKING_ARGS = frozenset({"retries", "sleep_threshold", "retry_delay"})


@contextlib.contextmanager
def asked_through(ask: Callable[[object], Awaitable]):
    """Inside (in this task, on the client's loop), what kurigram's own methods ask through
    `client.invoke` (a text with callback buttons, media by URL, edits, button answers, reads) is
    asked by `ask` instead: the request layer's, whose asking again is admitted by the limiter.
    kurigram's own retries, and its sleeps through short FloodWaits, are admitted by nothing."""
    token = _ASK.set(ask)
    try:
        yield
    finally:
        _ASK.reset(token)


class _RoutedInvoke:
    """`client.invoke`: inside `asked_through`, asked by the request layer, then the answer's users
    and chats stored as kurigram's invoke stores them (its methods resolve them later); elsewhere,
    or with an argument only kurigram knows (a timeout, a business connection), kurigram's own."""

    def __init__(self, client: Client, plain):
        self.client, self.plain = client, plain

    async def __call__(self, query, **kwargs):
        ask = _ASK.get()
        if ask is None or any(v is not None for k, v in kwargs.items() if k not in _ASKING_ARGS):
            return await self.plain(query, **kwargs)
        token = _ASK.set(None)  # what the asking itself calls is kurigram's own
        try:
            answer = await ask(query)
        finally:
            _ASK.reset(token)
        await self.client.fetch_peers(getattr(answer, "users", []))
        await self.client.fetch_peers(getattr(answer, "chats", []))
        return answer


# The key of the send a kurigram method builds in this task (`keyed_random_ids`), and how many
# random ids it has drawn so far; None: kurigram's own.
_SEND_KEY: contextvars.ContextVar[list | None] = contextvars.ContextVar("send_key", default=None)


class _KeyedRandomIds:
    """`client.rnd_id` (kurigram's MsgId, what its send methods take a random_id from): inside
    `keyed_random_ids(key)` the n-th id drawn is `random_id_of(key, n)`, the same in every process
    and attempt, since a method builds its request the same way each time (a poll: its id, then
    the message's random_id). Elsewhere kurigram's own."""

    def __init__(self, plain):
        self.plain = plain

    def __call__(self) -> int:
        keyed = _SEND_KEY.get()
        if keyed is None:
            return self.plain()
        key, drawn = keyed[0], keyed[1]
        keyed[1] += 1
        return random_id_of(key, drawn)


@contextlib.contextmanager
def keyed_random_ids(key: str):
    """What a kurigram send method builds inside (in this task, on the client's loop) carries
    random_ids derived from `key` (`_KeyedRandomIds`); an empty key changes nothing."""
    token = _SEND_KEY.set([key, 0]) if key else None
    try:
        yield
    finally:
        if token is not None:
            _SEND_KEY.reset(token)


def photo_file_id(client: Client, photo: raw.base.Photo) -> str:
    """The file id kurigram gives a photo it parsed (Photo._parse), for a photo we uploaded."""
    return types.Photo._parse(client, photo).file_id


# --- where packets are ciphered -------------------------------------------------------------------

# The cipher: every packet is AES-256-IGE (MTProto 2.0), which kurigram asks of pyrogram/crypto/aes.py
# (`ige256_encrypt` / `ige256_decrypt`: tgcrypto, in portable C, one table lookup per byte). cryptg
# (Telethon's, in Rust: grammers-crypto on the `aes` crate, AES-NI where the CPU has it) gives the
# same bytes (tests/botapp/telegram/test_kurigram.py) in about a third of the time (docs/design.md,
# the request path), which every byte a stream serves costs first. Both release Python's lock
# while they cipher. cryptg takes only `bytes`, and a length that is not a multiple of 16 stops it
# with a panic (not an Exception): here it is tgcrypto's ValueError first. (The in-memory
# Telegram has its own few lines for the same: it imports nothing of Courier's.)


def _ige(cipher: Callable[[bytes, bytes, bytes], bytes]) -> Callable[[bytes, bytes, bytes], bytes]:
    def run(data, key, iv) -> bytes:
        if len(data) % 16 or len(key) != 32 or len(iv) != 32:
            raise ValueError("AES-256-IGE: data a multiple of 16 bytes, a 32-byte key and a 32-byte IV")
        return cipher(data if type(data) is bytes else bytes(data), bytes(key), bytes(iv))

    run.__name__ = cipher.__name__
    return run


aes.ige256_encrypt = _ige(cryptg.encrypt_ige)
aes.ige256_decrypt = _ige(cryptg.decrypt_ige)


# kurigram hands each packet's MTProto encryption and decryption (and the obfuscation layer's
# AES-CTR) to `connection.protocol.crypto_executor` through `loop.run_in_executor`: a hop to a thread
# and back for every request and every answer. For what a bot sends and gets (a few KB) the hops
# cost far more than the cipher (tgcrypto, in C: microseconds): in a profile of runbot they were
# most of the event loop's own work. Bytes above which a packet still goes to the thread: one
# request or answer is a few KB, a container of a batch's answers tens of KB, an upload part 512 KB.
# The deletion sweep, whose containers of notices' answers are the largest a bot reads often, was
# quicker with this bound than with one eight times it (side by side: the commit that set it).
SMALL_PACKET = 8 * 1024


def _size(payload) -> int:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return len(payload)
    if isinstance(payload, io.BytesIO):
        return payload.getbuffer().nbytes
    return getattr(payload, "length", 0)  # an outgoing pyrogram.raw.core.Message: its body's length


class LoopCrypto(concurrent.futures.Executor):
    """An executor for kurigram's crypto: a small packet is done in the caller, and `submit`
    returns the done asyncio future `loop.run_in_executor` passes straight through (awaiting it
    does not yield to the loop); a large one goes to a thread of its own. A packet received is
    read knowing its session (`_unpack`: see LeanRpcResult)."""

    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="CryptoWorker")

    def submit(self, fn, /, *args, **kwargs):
        if fn is mtproto.unpack:
            fn = _unpack
        if args and _size(args[0]) > SMALL_PACKET:
            return self._pool.submit(fn, *args, **kwargs)
        try:
            future = asyncio.get_running_loop().create_future()
        except RuntimeError:  # not called from a loop: a plain future does
            future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the awaiting side gets it, as from a thread
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


# --- reading the answer to a send only as far as its new message's id ------------------------------

# kurigram reads each answer whole. Telegram answers a message sent with `updates`: the new
# message's id (updateMessageID, with the request's random_id), the message itself, its users
# (the bot and the recipient) and chats. A worker's send needs only the id, and reading the rest
# was the biggest part of its event loop's work (35 us an answer in a tight loop, much more at a
# broadcast's pace; a fifth of a paid broadcast's CPU). So an answer to a message `invoke_many`
# sent with `one_sent=True` (each request sends one message, and its caller wants only that id)
# is read as far as that update when it comes first in the answer, as Telegram sends it: the
# answer's value is a `SentId`. Any other answer (an error, updateShortSentMessage, gzip_packed,
# another first update) is read whole, as kurigram reads it. Nothing goes unchecked: MTProto's
# msg_key covers the whole packet (unpack_lean), and each message's body is parsed only as far as
# its length (unpack_lean; Message.read in a container), so the part left unread is never parsed.
UPDATES_ID = 0x74AE4240  # updates#74ae4240 updates:Vector<Update> users:Vector<User> chats:Vector<Chat> date:int seq:int
VECTOR_ID = 0x1CB5C415
UPDATE_MESSAGE_ID = raw.types.UpdateMessageID.ID  # updateMessageID#4e90bfd6 id:int random_id:long
_SENT_HEAD = struct.Struct("<IIiIiq")  # updates, vector, count, updateMessageID, id, random_id


@dataclass(frozen=True, slots=True)
class SentId:
    """Telegram's answer to a one-message send, read as far as its updateMessageID."""

    id: int
    random_id: int


_reading = threading.local()  # .session_id: whose packet this thread is reading (`_unpack`)
_one_sent: set[tuple[bytes, int]] = set()  # (session_id, msg_id) of messages sent with one_sent


def _unpack(b, session_id: bytes, auth_key: bytes, auth_key_id: bytes):
    """mtproto.unpack, with the session known to LeanRpcResult (Session.handle_packet's call)."""
    _reading.session_id = session_id
    try:
        return unpack_lean(b, session_id, auth_key, auth_key_id)
    finally:
        _reading.session_id = None


def unpack_lean(b: io.BytesIO, session_id: bytes, auth_key: bytes, auth_key_id: bytes) -> Message:
    """mtproto.unpack's checks and answer, with one copy of the packet (its decryption) where
    kurigram's makes six (the ciphertext read out, the body sliced, the payload read out, the
    msg_key's input concatenated...): a 1 MiB part from upload.getFile cost half again its
    decryption in copies. The same checks (core.telegram.org/mtproto/security_guidelines), each
    raising SecurityCheckMismatch as kurigram's does: the auth key id; the msg_key, SHA-256 over
    the whole decrypted packet, now before anything of it is parsed; the session id; the padding
    12 to 1024 bytes and the payload a multiple of 4; an odd msg_id. The message body is parsed
    from the decrypted packet in place (Message.read would slice it out first), as far as its
    length: the padding after it is never parsed."""
    packet = b.getbuffer()
    try:
        SecurityCheckMismatch.check(packet[:8] == auth_key_id, "b.read(8) == auth_key_id")
        msg_key = bytes(packet[8:24])
        aes_key, aes_iv = mtproto.kdf(auth_key, msg_key, False)
        plain = aes.ige256_decrypt(packet[24:], aes_key, aes_iv)
    finally:
        packet.release()  # the BytesIO may be read or closed again
    check = hashlib.sha256(auth_key[96 : 96 + 32])  # 96 = 88 + 8 (an incoming message)
    check.update(plain)
    SecurityCheckMismatch.check(msg_key == check.digest()[8:24], "msg_key == sha256(auth_key[96:128] + data)[8:24]")
    SecurityCheckMismatch.check(plain[8:16] == session_id, "data.read(8) == session_id")
    msg_id, seq_no, length = _MESSAGE_HEAD.unpack_from(plain, 16)
    payload = len(plain) - 32  # after salt, session_id, msg_id, seq_no and length
    SecurityCheckMismatch.check(12 <= payload - length <= 1024, "12 <= len(padding) <= 1024")
    SecurityCheckMismatch.check(payload % 4 == 0, "len(payload) % 4 == 0")
    SecurityCheckMismatch.check(msg_id % 2 != 0, "message.msg_id % 2 != 0")
    data = io.BytesIO(plain)
    data.seek(32)
    try:
        body = raw.core.TLObject.read(data)
    except KeyError as e:
        if e.args[0] == 0:
            raise ConnectionError("Received empty data. Check your internet connection.") from e
        raise ValueError(f"The server sent an unknown constructor: {hex(e.args[0])}") from e
    if data.tell() > 32 + length:
        raise SecurityCheckMismatch("the message body ran past its length")
    return Message(body, msg_id, seq_no, length)


_MESSAGE_HEAD = struct.Struct("<qii")  # msg_id:long seq_no:int length:int (raw/core/message.py)


class LeanRpcResult(raw.types.RpcResult):
    """rpc_result#f35c6d01 req_msg_id:long result:Object, read as kurigram's RpcResult reads it,
    except the answer to a message sent with one_sent (its session's msg_id in `_one_sent`):
    a `SentId` when the answer is `updates` whose first update is updateMessageID."""

    __slots__: list[str] = []

    @staticmethod
    def read(b: io.BytesIO, *args) -> raw.types.RpcResult:
        session_id = getattr(_reading, "session_id", None)
        start = b.tell()
        req_msg_id = int.from_bytes(b.read(8), "little", signed=True)
        if session_id is not None and (session_id, req_msg_id) in _one_sent:
            head = b.read(_SENT_HEAD.size)
            if len(head) == _SENT_HEAD.size:
                updates, vector, count, first, message_id, random_id = _SENT_HEAD.unpack(head)
                if (updates, vector, first) == (UPDATES_ID, VECTOR_ID, UPDATE_MESSAGE_ID) and count >= 1:
                    return raw.types.RpcResult(req_msg_id=req_msg_id, result=SentId(message_id, random_id))
        b.seek(start)
        return RPC_RESULT_READ(b, *args)


RPC_RESULT_READ = raw.types.RpcResult.read
tl_constructors[raw.types.RpcResult.ID] = LeanRpcResult


class Abridged(TCPAbridged):
    """kurigram's default transport (TCP abridged), its crypto run by `LoopCrypto`, its packets
    read in linear time (`_recv_from_socket`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.crypto_executor.shutdown(wait=False)  # the pool TCP made (no thread started yet)
        self.crypto_executor = LoopCrypto()

    async def _recv_from_socket(self, length: int) -> bytes | None:
        """TCP._recv_from_socket's answer: `length` bytes, or None when the connection closed, failed
        or gave nothing for TCP.TIMEOUT seconds. Kurigram's joins the pieces as bytes (`data +=
        chunk`: each piece copies all before it, a 1 MiB packet in 64 KiB pieces copied 8 MiB over)
        and starts a task per piece (asyncio.wait_for); here they go into one bytearray, under one
        timer pushed back at each piece."""
        reader = self.reader
        if not reader:
            return None
        loop = asyncio.get_running_loop()
        received = bytearray()
        try:
            async with asyncio.timeout(None) as timer:
                while len(received) < length:
                    timer.reschedule(loop.time() + self.TIMEOUT)
                    chunk = await reader.read(length - len(received))
                    if not chunk:
                        return None  # the connection closed
                    if not received and len(chunk) == length:
                        return chunk  # the usual small packet: one piece, no copy
                    received += chunk
        except (TimeoutError, OSError):
            return None
        return bytes(received)


# --- sending requests: several in one container, each serialized once -------------------------------

# Telegram's limits on a container are not published; these are those of well-used clients
# (Telethon's MessageContainer: at most 100 messages, about 1 MB). Inferred, kept well under.
CONTAINER_MESSAGES = 100
CONTAINER_BYTES = 512 * 1024
# Times a message Telegram refused before processing it (bad_server_salt, bad_msg_notification) is
# sent again at once with a new msg_id. Each refusal says why (a new salt, the server's clock), so
# one resend normally does; more than this and something else is wrong: the request is reported as
# not sent (a transient error the caller retries with back-off).
RESEND_MAX = 3
# bad_msg_notification codes (core.telegram.org/mtproto/service_messages_about_messages):
# 16/17 msg_id too low/high (the client's clock: resync from the server's msg_id, as Telethon does),
# 32/33 msg_seqno too low/high, 48 incorrect server salt: each means the message was not processed.
CLOCK_CODES = {16, 17}
RESEND_CODES = {16, 17, 32, 33, 48}


class Written(raw.core.TLObject):
    """A request serialized once: kurigram's MsgFactory measures a body by writing it, and a
    container writes each body again (three writes of every request, a tenth of a send's CPU).
    `query`: when set, `data` is that request as it goes on the wire (wrapped in
    InvokeWithoutUpdates for a client without updates), serialized by the sending thread."""

    __slots__ = ("data", "query")
    QUALNAME = "Written"

    def __init__(self, data: bytes, query: raw.core.TLObject | None = None):
        self.data = data
        self.query = query

    def write(self, *args) -> bytes:
        return self.data

    def __len__(self) -> int:
        return len(self.data)


def container_bounds(lengths: list[int]) -> list[tuple[int, int]]:
    """Split messages of these lengths into runs that each fit one container."""
    bounds, start, size = [], 0, 0
    for n, length in enumerate(lengths):
        if n > start and (n - start >= CONTAINER_MESSAGES or size + length > CONTAINER_BYTES):
            bounds.append((start, n))
            start, size = n, 0
        size += length + 16
    bounds.append((start, len(lengths)))
    return bounds


class NotSent(ConnectionError):
    """Telegram refused the message before processing it, or it never left: nothing was delivered
    (a transient error; the caller may send it again, with the same random_id)."""


class Lapsed(NotSent):
    """The limiter's admission ran out before the message could be written (`invoke_many`'s
    `write_by`): it never left. The caller asks the limiter again; no attempt was spent."""


class Unanswered(Exception):
    """Telegram may or may not have done it: no answer in time, or an answer of its own trouble
    (`cause`: TimeoutError, or kurigram's 500/-503 exception). `query`: what was sent, as it was
    sent (the same random_id), to send again."""

    def __init__(self, query, cause: Exception):
        super().__init__(str(cause))
        self.query = query
        self.cause = cause


class _Round:
    """The answers one transmission waits for: done when every message has its answer, or its
    container was refused as a whole."""

    __slots__ = ("left", "done", "waiter")

    def __init__(self, expected: int):
        self.left = expected
        self.done = asyncio.Event()
        self.waiter: asyncio.Future | None = None  # _answers_wait's, woken when the round is done
        if expected <= 0:
            self.done.set()

    def arrive(self, slots) -> None:
        for slot in slots:
            if not slot.arrived:
                slot.arrived = True
                self.left -= 1
        if self.left <= 0:
            self.done.set()
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)


class _Signal:
    """Stands for the asyncio.Event of kurigram's Result: `Session.handle_packet` calls `set()`
    when Telegram answers the msg_id (with a result, an error, bad_server_salt or
    bad_msg_notification naming it). Setting it tells the round which messages are answered."""

    __slots__ = ("round", "slots", "fired")

    def __init__(self, round_: _Round, slots: list):
        self.round, self.slots, self.fired = round_, slots, False

    def set(self) -> None:
        if not self.fired:
            self.fired = True
            self.round.arrive(self.slots)

    def is_set(self) -> bool:
        return self.fired


class _Slot:
    """What kurigram's Session keeps in `results` for a msg_id it waits for (its Result)."""

    __slots__ = ("value", "event", "arrived")

    def __init__(self):
        self.value = None
        self.event: _Signal | None = None
        self.arrived = False


async def invoke_many(
    client: Client, queries: list, *, write_by: float | None = None, one_sent: bool | Sequence[bool] = False,
    ask_again: bool = True,
) -> list:  # fmt: skip
    """Each query's answer (or the exception it raised), one query as one MTProto message and
    several as one container (core.telegram.org/mtproto/service_messages#containers): each request
    serialised once, one encryption and one write for all, where kurigram's `invoke` serialises a
    request twice, starts a task and a timer to wait for the session and another pair to wait for
    the answer, and stores every user and chat of the answer in its SQLite storage.

    What kurigram's Session does for its own `send`, this does too: a bad_server_salt (naming one
    message, or the whole container) takes the new salt and sends the refused messages again at
    once; a bad_msg_notification 16/17 resyncs the clock from the newest server msg_id and sends
    again; 32/33/48 send again. A message that never left (the connection down, the session not
    started) is `NotSent`; one with no answer in time, or answered with Telegram's own trouble
    (500, -503), is asked again through kurigram's `invoke`, which retries as it always does (the
    same random_id: Telegram sends a message once). With `ask_again` False it is `Unanswered`
    instead: the caller asks again itself, once the limiter admits it (kurigram's retries are
    admitted by nothing).

    `write_by` (time.monotonic()): the limiter admitted these messages to arrive now, so none is
    written after it (a loop or a thread that stalled in between would bunch them); each that
    would be is `Lapsed`. So are messages refused before processing and sent again after the
    answer's round trip.

    `one_sent`: each query sends one message and the caller needs only its id: an answer that
    gives it first is a `SentId`, read no further (see LeanRpcResult). A sequence says it query by
    query (an answer whose users the caller reads is read whole)."""
    session = client.session
    if not client.is_connected or session is None:
        raise NotSent("the client is not connected: nothing was sent")
    if not session.is_started.is_set():
        try:
            await asyncio.wait_for(session.is_started.wait(), session.WAIT_TIMEOUT)
        except TimeoutError:
            raise NotSent(f"the session did not start within {session.WAIT_TIMEOUT}s: nothing was sent") from None
    lean = [one_sent] * len(queries) if isinstance(one_sent, bool) else list(one_sent)
    bodies = [q if isinstance(q, Written) and q.query is not None else Written(q.write()) for q in queries]
    plain = [q.query if isinstance(q, Written) and q.query is not None else q for q in queries]
    values: list = [None] * len(queries)
    todo = list(range(len(queries)))
    for _ in range(RESEND_MAX + 1):
        answered = await _transmit(client, [bodies[i] for i in todo], write_by, [lean[i] for i in todo])
        again = []
        for i, value in zip(todo, answered, strict=True):
            if value is _REFUSED:
                again.append(i)
            else:
                values[i] = value
        todo = again
        if not todo:
            break
    for i in todo:
        values[i] = NotSent(f"Telegram refused the message {RESEND_MAX + 1} times before processing it")
    if not ask_again and any(value is None for value in values):
        await clock_recover(client)
    answers = []
    for query, body, value in zip(plain, queries, values, strict=True):
        if isinstance(value, Lapsed):
            answers.append(value)
        elif not ask_again and (value is None or (isinstance(value, raw.types.RpcError) and value.error_code in ASK_AGAIN_CODES)):
            cause = TimeoutError(f"no answer within {session.WAIT_TIMEOUT} s") if value is None else rpc_error(value, query)
            answers.append(Unanswered(body, cause))
        elif isinstance(value, OSError) and not isinstance(value, NotSent):
            # not written: the caller that asks again itself (ask_again False) does, through its limiter
            answers.append(await invoke_one(client, query) if len(plain) == 1 and ask_again else value)
        elif isinstance(value, raw.types.RpcError) and value.error_code in ASK_AGAIN_CODES:
            # Telegram's own trouble (500 INTERNAL, -503 Timeout, ...): it may or may not have done
            # it. Asked again through kurigram's invoke with the same bytes, so the same random_id:
            # done now, or RANDOM_ID_DUPLICATE if it was done the first time.
            answers.append(await invoke_one(client, query))
        elif isinstance(value, raw.types.RpcError):
            answers.append(rpc_error(value, query))
        elif value is None:  # no answer in time: kurigram asks again (the same random_id)
            answers.append(await invoke_one(client, query))
        else:
            answers.append(value)
    return answers


_REFUSED = object()  # refused before processing: send again
# Error codes of Telegram's own trouble, which kurigram's Session.invoke asks again (InternalServerError
# 500 and its negative variants, ServiceUnavailable 503 / -503).
ASK_AGAIN_CODES = frozenset({500, -500, 503, -503})


async def _transmit(client: Client, bodies: list[Written], write_by: float | None, one_sent: list[bool]) -> list:
    """Send the bodies (one message, or containers) and wait up to WAIT_TIMEOUT for their answers;
    each body's value: the answer, an OSError (not sent; Lapsed: not written by `write_by`), None
    (no answer), or _REFUSED. `one_sent`: per body, whether its answer is read lean."""
    session = client.session
    messages = [await session.msg_factory.create(body) for body in bodies]
    lean = [(session.session_id, m.msg_id) for m, wanted in zip(messages, one_sent, strict=True) if wanted]
    _one_sent.update(lean)
    round_ = _Round(len(messages))
    slots = []
    for message in messages:
        slot = _Slot()
        slot.event = _Signal(round_, [slot])
        session.results[message.msg_id] = slot
        slots.append(slot)
    containers: list[tuple[int, int, int]] = []  # (container msg_id, start, end)
    connection, receiver = session.connection, session.recv_task
    try:
        if len(messages) == 1:
            payload = mtproto.pack(messages[0], session.salt, session.session_id, session.auth_key, session.auth_key_id)
            try:
                _in_time(write_by)
                await session.connection.send(payload)
            except OSError as exc:  # not sent
                slots[0].value = exc
                slots[0].event.set()
        for start, end in container_bounds([m.length for m in messages]) if len(messages) > 1 else ():
            # Not msg_factory.create(MsgContainer(...)): it writes every message to measure the
            # container, and pack writes them again. A container is not content-related.
            body = Written(MsgContainer(messages[start:end]).write())
            msg_id = await session.msg_factory.allocate_message_identity()
            seq_no = await session.msg_factory.allocate_message_sequence(False)
            container_slot = _Slot()
            container_slot.event = _Signal(round_, slots[start:end])
            session.results[msg_id] = container_slot
            containers.append((msg_id, start, end))
            payload = mtproto.pack(
                Message(body, msg_id, seq_no, len(body)), session.salt, session.session_id, session.auth_key, session.auth_key_id
            )
            try:
                _in_time(write_by)
                await session.connection.send(payload)
            except OSError as exc:  # this container and the rest were not sent
                for slot in slots[start:]:
                    slot.value = exc
                    slot.event.set()
                break
        await _answers_wait(session, round_, connection, receiver)
    finally:
        _one_sent.difference_update(lean)
        for message in messages:
            session.results.pop(message.msg_id, None)
        refusals = {start: (end, session.results.pop(msg_id, _Slot()).value) for msg_id, start, end in containers}
    values = [slot.value for slot in slots]
    for start, (end, refusal) in refusals.items():
        if refusal is not None:  # the whole container was refused: its unanswered messages go again
            again = _refused(client, refusal)
            for i in range(start, end):
                if values[i] is None:
                    values[i] = _REFUSED if again else NotSent(f"the container was refused: {type(refusal).__name__}")
    for i, value in enumerate(values):
        if isinstance(value, (raw.types.BadServerSalt, raw.types.BadMsgNotification)):
            values[i] = _REFUSED if _refused(client, value) else NotSent(f"bad_msg_notification {value.error_code}")
    return values


async def clock_recover(client: Client) -> bool:
    """After a message went unanswered, for a caller that asks again itself (`ask_again` False):
    when kurigram discarded the server's latest packets as out of time (`Session.handle_packet`:
    a msg_id over 30 s ahead of its clock or 300 s behind, counted in `ignore_count` until a packet
    is taken), the answer may have been among them: a bad_msg_notification 16 to a client whose
    clock is slow never reaches its message. kurigram restarts the session once it has discarded
    MAX_CONSECUTIVE_IGNORED packets in a row, and the new session's first server message (seq_no 0)
    sets its clock; its own retries get there by asking again. Asked again by the caller, they
    would not, so the session is restarted now, as kurigram would later. Whether it was."""
    session = client.session
    if session is None or not session.ignore_count:
        return False
    log.info("kurigram discarded %d packets as out of time: session restarted to set its clock", session.ignore_count)
    await session.restart()
    return True


def _in_time(write_by: float | None) -> None:
    """Raise Lapsed when it is past `write_by`: what was about to be written stays unsent."""
    if write_by is not None and (late := time.monotonic() - write_by) > 0:
        raise Lapsed(f"admitted, but not written until {late * 1000:.1f} ms after its admission ran out")


async def _answers_wait(session, round_: _Round, connection, receiver: asyncio.Task | None, timeout: float | None = None) -> None:
    """Until every message is answered, WAIT_TIMEOUT (or `timeout`) passes, or the connection they
    went on is gone: when it drops, kurigram's Session.restart gives the session a new connection
    object, and no answer comes on the new one for what was sent on the old (the caller asks again
    at once through kurigram's invoke, the same random_id, instead of waiting out WAIT_TIMEOUT).

    Woken by events, never by a clock that ticks: the round's last answer, the end of `receiver`
    (the session's `recv_task` when the messages were written: kurigram's recv_worker, which ends
    when its connection gives a null packet, that is when it drops or is closed), or the deadline."""
    if round_.done.is_set():
        return
    if receiver is None or receiver.done() or session.connection is not connection:
        return  # written on a connection already gone (or never read): no answer will come
    loop = asyncio.get_running_loop()
    waiter = round_.waiter = loop.create_future()

    def wake(*_) -> None:
        if not waiter.done():
            waiter.set_result(None)

    receiver.add_done_callback(wake)
    deadline = loop.call_later(session.WAIT_TIMEOUT if timeout is None else timeout, wake)
    try:
        await waiter
    finally:
        deadline.cancel()
        receiver.remove_done_callback(wake)
        round_.waiter = None


def _refused(client: Client, notice) -> bool:
    """Act on a refusal as Telegram asks (a new salt; the server's clock); whether to send again."""
    session = client.session
    if isinstance(notice, raw.types.BadServerSalt):
        session.salt = notice.new_server_salt
        return True
    if not isinstance(notice, raw.types.BadMsgNotification):
        return False
    if notice.error_code in CLOCK_CODES and session.stored_msg_ids:
        # kurigram resyncs only from a server message with seq_no 0 (the first of a session);
        # Telethon from the notice's own msg_id. The newest server msg_id kurigram has seen is
        # at most the round trip older than the notice (it is one of them).
        client._set_server_time(max(session.stored_msg_ids))
        session.msg_factory._last_msg_id = 0  # msg ids restart from the corrected clock
    return notice.error_code in RESEND_CODES


def rpc_error(error: raw.types.RpcError, query) -> errors.RPCError:
    """kurigram's exception for Telegram's error answer to `query` (RPCError.raise_it)."""
    if isinstance(query, (raw.functions.InvokeWithoutUpdates, raw.functions.InvokeWithTakeout)):
        query = query.query
    try:
        errors.RPCError.raise_it(error, type(query))
    except errors.RPCError as exc:
        return exc
    raise AssertionError("RPCError.raise_it returned")  # pragma: no cover - it always raises


async def invoke_one(client: Client, query):
    """kurigram's own `invoke` (its retries, FloodWait raised at once): the answer or the exception."""
    try:
        return await client.invoke(query, sleep_threshold=0)
    except Exception as exc:  # noqa: BLE001 - that query's result
        return exc


# --- the update stream: what has been handled, and what was missed -----------------------------------

# getChannelDifference's `limit` for a bot (core.telegram.org/method/updates.getChannelDifference:
# "max 100000 for bots"; Telethon's BOT_CHANNEL_DIFF_LIMIT).
BOT_CHANNEL_DIFFERENCE = 100_000


class Fed(tuple):
    """A packet of kurigram's dispatcher queue, `(update, users, chats)` as `Dispatcher.handler_worker`
    unpacks it, carrying the `Ticket` that counts it handled."""

    def __new__(cls, packet, ticket: Ticket):
        fed = super().__new__(cls, packet)
        fed.ticket = ticket
        return fed


class TrackedQueue(asyncio.Queue):
    """kurigram's dispatcher queue (`Dispatcher.updates_queue`, which `Client.handle_updates` fills
    with `put_nowait`), telling a `Position` when each packet has been handled.

    `Dispatcher.handler_worker` takes a packet, runs every handler group on it (awaiting each
    callback: runbot's wait for their handler thread), then asks for the next one; so the packet a
    worker took before is handled when it asks again. A worker that dies mid-packet (cancelled at
    stop, the process killed) never asks again: its packet stays unhandled, and is fetched again."""

    def __init__(self, position: Position):
        super().__init__()
        self.position = position
        self.holding: dict[asyncio.Task, Ticket] = {}

    def put_nowait(self, item) -> None:
        if item is not None and not isinstance(item, Fed):
            item = Fed(item, self.position.received(spans_of(item[0])))
        super().put_nowait(item)

    async def get(self):
        task = asyncio.current_task()
        ticket = self.holding.pop(task, None)
        if ticket is not None:
            self.position.finished(ticket)
        item = await super().get()
        if item is not None:
            self.holding[task] = item.ticket
        return item


def updates_track(client: Client, position: Position) -> TrackedQueue:
    """Count `client`'s updates handled in `position` (before `client.start()`, which starts the
    dispatcher's workers on the queue they find)."""
    queue = TrackedQueue(position)
    client.dispatcher.updates_queue = queue
    return queue


@dataclass
class Missed:
    """One answer of getDifference (or getChannelDifference): the packets to dispatch, and the state
    they take the sequence to; `final`: nothing more to ask for; `too_long`: Telegram will not send
    what came between (the state jumps over it)."""

    packets: list[tuple]
    pts: int
    qts: int = 0
    date: int = 0
    seq: int = 0
    final: bool = True
    too_long: bool = False


async def _peers_cache(client: Client, users: list, chats: list) -> tuple[dict, dict]:
    """As `Client.handle_updates` does for a live update: the access hashes of the users and chats
    the answer names go to kurigram's storage (a reply to a user first met here needs it)."""
    await client.fetch_peers(users)
    await client.fetch_peers(chats)
    return {u.id: u for u in users}, {c.id: c for c in chats}


async def difference_get(client: Client, *, pts: int, qts: int, date: int) -> Missed:
    """What the account's sequences got after (pts, qts): `updates.getDifference`, as kurigram's
    `recover_gaps` asks it (methods/advanced/recover_gaps.py), but with the qts runbot stored (kurigram
    sends 0) and the peers of the answer cached (kurigram does not)."""
    diff = await client.invoke(raw.functions.updates.GetDifference(pts=pts, date=date, qts=qts))
    if isinstance(diff, raw.types.updates.DifferenceEmpty):
        return Missed([], pts, qts, diff.date, diff.seq)
    if isinstance(diff, raw.types.updates.DifferenceTooLong):
        return Missed([], diff.pts, qts, date, final=False, too_long=True)
    state = diff.state if isinstance(diff, raw.types.updates.Difference) else diff.intermediate_state
    users, chats = await _peers_cache(client, diff.users, diff.chats)
    packets = [(raw.types.UpdateNewMessage(message=m, pts=state.pts, pts_count=0), users, chats) for m in diff.new_messages]
    packets += [(u, users, chats) for u in diff.other_updates]
    return Missed(packets, state.pts, state.qts, state.date, state.seq, final=isinstance(diff, raw.types.updates.Difference))


async def channel_difference_get(client: Client, chat_id: int, *, pts: int) -> Missed:
    """What a channel's sequence got after `pts`: `updates.getChannelDifference`, as `recover_gaps`
    asks it, with the channel as an InputChannel and the peers of the answer cached."""
    peer = await client.resolve_peer(chat_id)
    diff = await client.invoke(
        raw.functions.updates.GetChannelDifference(
            channel=raw.types.InputChannel(channel_id=peer.channel_id, access_hash=peer.access_hash),
            filter=raw.types.ChannelMessagesFilterEmpty(),
            pts=pts,
            limit=BOT_CHANNEL_DIFFERENCE,
            force=False,
        )
    )
    if isinstance(diff, raw.types.updates.ChannelDifferenceEmpty):
        return Missed([], diff.pts, final=True)
    if isinstance(diff, raw.types.updates.ChannelDifferenceTooLong):
        return Missed([], diff.dialog.pts, final=bool(diff.final), too_long=True)
    users, chats = await _peers_cache(client, diff.users, diff.chats)
    packets = [(raw.types.UpdateNewChannelMessage(message=m, pts=diff.pts, pts_count=0), users, chats) for m in diff.new_messages]
    packets += [(u, users, chats) for u in diff.other_updates]
    return Missed(packets, diff.pts, final=bool(diff.final))


def updates_feed(client: Client, packets: list[tuple], ticket: Ticket) -> None:
    """Hand fetched packets to kurigram's dispatcher, as `recover_gaps` does, counted by one ticket."""
    for packet in packets:
        client.dispatcher.updates_queue.put_nowait(Fed(packet, ticket))


# --- downloads: a media session on any data centre, and one request on it ---------------------------

AUTH_IMPORT_TRIES = 3  # as Client.get_session: an exported authorization imported up to 3 times


async def media_session_open(client: Client, dc_id: int, *, beside: Session | None = None) -> Session:
    """A started media session on data centre `dc_id`, for upload.getFile, built as kurigram's
    `Client.get_session(dc_id, is_media=True)` builds one (client.py), with these differences: it is
    the caller's (not cached in `client.media_sessions`, so no other code shares it), and a key for
    another DC comes from the storage when the storage provisions keys (`provisioned_auth_key`: the
    in-memory Telegram's harness, where MTProto's key exchange does not run), else from
    `Auth(...).create()` as kurigram does. On another DC the bot's authorization is exported from
    its own DC and imported on the new session (core.telegram.org/api/datacenter).

    `beside`: a started media session on the same DC whose key (signed in there already) the new
    one shares: another connection, no new key and no other import (MTProto runs several sessions
    on one key, each with its own session_id)."""
    home = await client.storage.dc_id()
    option = await client.get_dc_option(dc_id, is_media=True, ipv6=client.ipv6)
    test_mode = await client.storage.test_mode()
    if beside is not None:
        if beside.dc_id != dc_id:
            raise ValueError(f"a session on DC {beside.dc_id} shares no key with DC {dc_id}")
        session = Session(client, dc_id, option.ip_address, option.port, beside.auth_key, test_mode, is_media=True)
        await session.start()
        return session
    if dc_id == home:
        key = await client.storage.auth_key()
    elif (provisioned := getattr(client.storage, "provisioned_auth_key", None)) is not None:
        key = await provisioned(dc_id)
    else:
        key = await Auth(client, dc_id, option.ip_address, option.port, test_mode).create()
    session = Session(client, dc_id, option.ip_address, option.port, key, test_mode, is_media=True)
    await session.start()
    if dc_id == home:
        return session
    for _ in range(AUTH_IMPORT_TRIES):
        exported = await client.invoke(raw.functions.auth.ExportAuthorization(dc_id=dc_id), sleep_threshold=0)
        try:
            await media_invoke(session, raw.functions.auth.ImportAuthorization(id=exported.id, bytes=exported.bytes))
        except errors.AuthBytesInvalid:
            continue
        return session
    await session.stop()
    raise errors.AuthBytesInvalid


async def media_invoke(session: Session, query, *, timeout: float | None = None):
    """`query`'s answer on `session` (a media session), or kurigram's exception for Telegram's error.
    What kurigram's `Session.send` does, and `_transmit` for one message, with two differences that a
    download needs: whatever ends the wait (an answer, `timeout`, a dropped connection, the caller
    cancelled) takes the request out of `session.results` (Session.send leaves it there, with the
    answer's bytes when they come, for good when its caller is cancelled); and a connection that
    drops ends the wait at once. A request refused before processing (bad_server_salt,
    bad_msg_notification 16/17/32/33/48) is sent again with the new salt; no answer is TimeoutError,
    not sent NotSent (both OSError: the caller may ask again)."""
    for _ in range(RESEND_MAX + 1):
        if not session.is_started.is_set():
            try:
                async with asyncio.timeout(session.WAIT_TIMEOUT):  # not wait_for: it can swallow a cancellation
                    await session.is_started.wait()
            except TimeoutError:
                raise NotSent(f"the media session did not start within {session.WAIT_TIMEOUT}s") from None
        message = await session.msg_factory.create(query)
        slot = _Slot()
        round_ = _Round(1)
        slot.event = _Signal(round_, [slot])
        session.results[message.msg_id] = slot
        connection, receiver = session.connection, session.recv_task
        try:
            payload = mtproto.pack(message, session.salt, session.session_id, session.auth_key, session.auth_key_id)
            await connection.send(payload)
            await _answers_wait(session, round_, connection, receiver, timeout)
        finally:
            session.results.pop(message.msg_id, None)
        value = slot.value
        if value is None:
            raise TimeoutError("no answer: the connection dropped or Telegram did not answer in time")
        if isinstance(value, raw.types.BadServerSalt):
            session.salt = value.new_server_salt
            continue
        if isinstance(value, raw.types.BadMsgNotification):
            if value.error_code in RESEND_CODES:
                continue
            raise NotSent(f"bad_msg_notification {value.error_code}")
        if isinstance(value, raw.types.RpcError):
            raise rpc_error(value, query)
        return value
    raise NotSent(f"Telegram refused the request {RESEND_MAX + 1} times before processing it")
