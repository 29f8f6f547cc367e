"""The real Telegram, through kurigram (import name `pyrogram`).

The client runs on an asyncio loop; the Gateway methods are synchronous and may be called from
any thread except the loop's own: each call is scheduled on the loop and waited for. `runbot`
runs the client on its main loop and calls services from worker threads; a Celery worker starts
a loop in a background thread (`PyrogramGateway.start_in_thread`).

Every Telegram call goes through `_call` (one call) or `send_many` (a worker's batch, in MTProto
containers), under one `CallPolicy`: a slot of the shared limiter, a FloodWait paused for the scope
Telegram limited and retried, a transient failure retried only when nothing can have been
delivered. Telegram's errors become domain errors (`error_to_domain`); anything else is a bug and
is raised as it is. A copy of many messages is many calls, each with its own slot; if it stops
partway, what was sent is reported, never sent again. kurigram's private parts are used only
through botapp/telegram/kurigram.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from django.conf import settings
from django.utils.module_loading import import_string
from pyrogram import Client, enums, errors, raw, types, utils
from pyrogram.file_id import FileId
from pyrogram.session import Session

from botapp.metrics import ADMISSIONS_LAPSED
from botapp.telegram.entities import entities_html
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    AlreadySent,
    BadRequest,
    BotUnauthorized,
    Caption,
    ChatNotFound,
    ChatRights,
    CopyIncomplete,
    CopySource,
    FloodWait,
    ForwardsRestricted,
    Gateway,
    Keyboard,
    Media,
    MessageNotFound,
    MessageTooOld,
    OutcomeUnknown,
    OwnMessage,
    PeerUnknown,
    SendItem,
    Sent,
    TelegramError,
    TransientError,
    UserBlocked,
    UserDeactivated,
    chunked,
    random_id_of,
)
from botapp.telegram.kurigram import (
    Abridged,
    Lapsed,
    SentId,
    Unanswered,
    Written,
    invoke_many,
    loop_bind,
    photo_file_id,
    session_tune,
)
from botapp.telegram.limits import USER_ID_MAX
from botapp.telegram.media import ALBUM_FILE_TYPES, MEDIA_FILE_TYPES, media_problem

log = logging.getLogger(__name__)

# Longer than kurigram's own retry loop for one request (MAX_RETRIES attempts of WAIT_TIMEOUT plus
# RETRY_DELAY each, about 160 s): while kurigram still retries (with the same random_id, which
# Telegram deduplicates), Courier never gives up and sends again with a new one.
CALL_TIMEOUT = Session.MAX_RETRIES * (Session.WAIT_TIMEOUT + Session.RETRY_DELAY) + 30
MAX_ATTEMPTS = 3
KNOWN_PEERS_MAX = 20_000  # users whose access hash this process remembers handing to kurigram
BACKOFF_BASE = 0.5  # seconds: 0.5, 1, 2 ...
# own_messages: ids read back at most (a bound on a search's cost: 200 reads), and the run of
# reads that found no message at all after which the box is taken to have ended (ids past the
# newest message read as empty, like deleted ones: 2 × 100 deleted in a row is taken as the end).
OWN_SCAN_MAX = 20_000
OWN_SCAN_EMPTY_END = 2
# How long after the limiter admits a group it may still be written (send_many): the windows count
# what they admit, Telegram what arrives, and the windows' span (TELEGRAM_RATE_SPAN, 1.04 s) leaves
# 40 ms for the two to differ. The network takes up to 25 ms of it (its jitter; the in-memory
# Telegram's inference), this the rest, with room. A group not written by then (its thread or the
# loop stalled: the GIL, the CPU, a garbage collection) never leaves: the limiter is asked again
# (no attempt spent; the windows counted it once already, which costs a little rate, not a
# FloodWait). After ADMISSIONS_LAPSED_MAX lapses in one batch, a stalled machine's sends go with no
# bound (a FloodWait, if one comes, pauses the budget as any does).
ADMITTED_FOR = 0.01
ADMISSIONS_LAPSED_MAX = 5
# A send of a batch that Telegram left unanswered (no answer in time, or 500/-503: it may or may not
# have done it) is asked again as kurigram's `invoke` would (the same bytes, so the same random_id,
# after its RETRY_DELAY, up to its MAX_RETRIES times in all), but each time admitted by the limiter
# like any send: kurigram's own retries went out past the windows, a batch's worth at once after an
# outage of answers.
ASK_AGAIN_MAX = Session.MAX_RETRIES


class Limiter(Protocol):
    count_max: int  # the most messages one call should deliver (a forward's ids)

    def acquire(self, chat_id: int | None = None, *, count: int = 1, paid: bool = False) -> float: ...
    def acquire_many(self, chat_ids: Sequence[int]) -> int: ...
    def pause(self, seconds: float, *, chat_id: int | None = None, paid: bool = False) -> float: ...


@dataclass(frozen=True)
class Retry:
    """What to do after an attempt Telegram refused: ask again after `wait` seconds, or give up."""

    again: bool
    wait: float = 0.0


class CallPolicy:
    """The one rule for every Telegram call, alone (`_call`) or in a batch (`send_many`): a
    FloodWait pauses the scope Telegram limited (the chat for a send, else the senders of the
    call's lane and budget: see limiter.py) in the shared limiter and the call is asked again
    once the limiter lets it (not without a limiter, not past `max_flood_wait`); a transient
    error (the request never reached Telegram, or was refused before processing) is asked again
    after an exponential back-off; both up to MAX_ATTEMPTS. Anything else is the call's result.
    `pause` may raise (Redis down): the caller stops sending."""

    def __init__(self, *, limiter: Limiter | None, max_flood_wait: int, attempts: int = MAX_ATTEMPTS):
        self.limiter = limiter
        self.max_flood_wait = max_flood_wait
        self.attempts = attempts

    def after(self, error: TelegramError, *, attempt: int, chat_id: int | None, paid: bool = False) -> Retry:
        """`paid`: the refused call carried the paid-broadcast flag (its FloodWait is the paid
        budget's, not the free one's)."""
        if isinstance(error, FloodWait):
            if self.limiter is None:
                return Retry(False)
            self.limiter.pause(error.seconds, chat_id=chat_id, paid=paid)
            return Retry(error.seconds <= self.max_flood_wait and attempt < self.attempts)
        if isinstance(error, TransientError):
            return Retry(attempt < self.attempts, BACKOFF_BASE * 2 ** (attempt - 1))
        return Retry(False)


def client_build(
    *,
    name: str,
    api_id: int,
    api_hash: str,
    bot_token: str,
    workdir: Path,
    no_updates: bool,
    offline=None,
    in_memory: bool = False,
    workers: int | None = None,
) -> Client:
    """A bot client with a session file of its own under `workdir` (never share one between processes).

    `offline`: the in-memory Telegram to talk to instead of Telegram (a `TelegramServer` in this
    process, or the socket path of `manage.py telegram_server`); only the connection differs, and
    the tooling that builds it is named by settings.TELEGRAM_OFFLINE_CONNECTION."""
    workdir.mkdir(parents=True, exist_ok=True)
    options = {"in_memory": in_memory}
    if workers is not None:
        options["workers"] = workers  # updates kurigram dispatches at once
    if offline is not None:  # the provisioned storage engine is in memory or not
        offline_client_options = import_string(settings.TELEGRAM_OFFLINE_CONNECTION)
        options = offline_client_options(
            offline, name=name, workdir=workdir, in_memory=in_memory, api_id=api_id, bot_token=bot_token
        )
    return Client(
        name,
        api_id=api_id,
        api_hash=api_hash,
        bot_token=bot_token,
        workdir=str(workdir),
        no_updates=no_updates,
        # What users sent while runbot was down is fetched by its UpdatePump from the position it
        # stored (botapp/telegram/updates.py), not by kurigram from its session file.
        skip_updates=True,
        parse_mode=enums.ParseMode.HTML,
        sleep_threshold=0,  # FloodWait reaches us; the global limiter decides who waits
        protocol_factory=Abridged,  # kurigram's transport, small packets ciphered on the loop (kurigram.py)
        **options,
    )


def client_configured(config, *, name: str, no_updates: bool, **options) -> Client:
    """client_build for the configured bot (botapp.config.BotConfig): its credentials and session
    folder, and the in-memory Telegram's socket when TELEGRAM_OFFLINE is set. `options`:
    client_build's others (in_memory, workers)."""
    return client_build(
        name=name,
        api_id=config.api_id,
        api_hash=config.api_hash,
        bot_token=config.bot_token,
        workdir=config.session_dir,
        no_updates=no_updates,
        offline=settings.TELEGRAM_OFFLINE_SOCKET if settings.TELEGRAM_OFFLINE else None,
        **options,
    )


async def client_start(client: Client) -> None:
    """Start the client; credentials Telegram refuses become a ConfigError naming the variable."""
    from botapp.config import ConfigError

    try:
        await client.start()
        session_tune(client)
    except (errors.AccessTokenInvalid, errors.AccessTokenExpired) as exc:
        raise ConfigError([f"BOT_TOKEN was refused by Telegram ({exc.ID}): copy it again from @BotFather"]) from exc
    except errors.ApiIdInvalid as exc:
        raise ConfigError([f"API_ID / API_HASH were refused by Telegram ({exc.ID}): check them at my.telegram.org"]) from exc


# A 420 whose name kurigram's table does not know (a new FLOOD_* name) reaches us as Flood with the
# value "[420 NAME]": its seconds, when the name carries them, are the number in it.
_SECONDS = re.compile(r"_(\d+)\b")
# What kurigram raises for the transport, not for a request: the connection or the session.
_TRANSPORT = (OSError, errors.SecurityError)


def error_to_domain(exc: BaseException, *, send: bool = False) -> TelegramError | BotUnauthorized | None:
    """The domain error for what Telegram (an RPC error) or the transport raised; None for anything
    else, which is a bug of ours or of kurigram and must reach the caller as it is (never recorded
    as Telegram's refusal). Never raises. `send`: the call delivers something, so a lost answer
    means the outcome is unknown rather than a safe retry."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, errors.Flood):
        seconds = exc.value if isinstance(exc.value, int) and not isinstance(exc.value, bool) else None
        if seconds is None and (found := _SECONDS.search(str(exc.value or ""))):
            seconds = int(found[1])
        if seconds is None or seconds <= 0:  # a 420 that names no wait (FROZEN_METHOD_INVALID): back off
            return TransientError(text)
        return FloodWait(seconds=seconds)
    if isinstance(exc, errors.Unauthorized):
        # 401: AUTH_KEY_UNREGISTERED, SESSION_REVOKED, USER_DEACTIVATED(_BAN) are about the bot itself.
        return BotUnauthorized(text)
    if isinstance(exc, errors.UserIsBlocked):
        return UserBlocked(text)
    if isinstance(exc, errors.InputUserDeactivated):
        return UserDeactivated(text)
    if isinstance(exc, errors.ChatForwardsRestricted):
        return ForwardsRestricted(text)
    if isinstance(
        exc,
        (
            errors.PeerIdInvalid,
            errors.ChatIdInvalid,
            errors.ChannelInvalid,
            errors.ChannelPrivate,
            errors.UserIdInvalid,
            errors.ChatAdminRequired,
            errors.ChatWriteForbidden,
        ),
    ):
        return ChatNotFound(text)
    if isinstance(exc, errors.MessageIdInvalid):
        return MessageNotFound(text)
    if isinstance(exc, (errors.MessageEditTimeExpired, errors.MessageDeleteForbidden)):
        return MessageTooOld(text)
    if isinstance(exc, errors.RandomIdDuplicate):
        return AlreadySent(text)  # an earlier attempt of this very request got through
    if isinstance(exc, (errors.InternalServerError, errors.ServiceUnavailable, TimeoutError)):
        return OutcomeUnknown(text) if send else TransientError(text)
    if isinstance(exc, _TRANSPORT):
        return TransientError(text)  # not connected, or refused before processing: the request never left
    if isinstance(exc, (errors.BadRequest, errors.NotAcceptable)):
        return BadRequest(f"{type(exc).__name__}: {text}")
    if isinstance(exc, errors.RPCError):  # Telegram's, of a kind we do not act on: a refusal all the same
        return TelegramError(f"{type(exc).__name__}: {text}")
    return None


def _peer_check(chat_id: int) -> None:
    """Telegram answers PEER_ID_INVALID to an id outside its ranges (users: 1 to 2**52 - 1, the Bot
    API's "52 significant bits"; groups and channels: kurigram's utils.get_peer_type, which raises
    ValueError before asking). Said as Telegram would, before any call."""
    if 0 < chat_id <= USER_ID_MAX:
        return
    try:
        if chat_id > 0:
            raise ValueError(f"a user id has at most 52 bits: {chat_id}")
        utils.get_peer_type(chat_id)
    except ValueError as exc:
        raise ChatNotFound(f"PEER_ID_INVALID: {exc}") from None


def copy_source(message: types.Message) -> CopySource:
    """What a caption template may use of a message kurigram parsed."""
    if not message.media:
        return CopySource(kind="", text=_html(message.text))
    kind = message.media.name.lower()  # MessageMediaType.DOCUMENT -> "document"
    media = getattr(message, kind, None)
    if kind == "photo" or media is None:  # a photo has a size but no file name
        return CopySource(kind=kind, file_size=getattr(media, "file_size", 0) or 0, caption=_html(message.caption))
    return CopySource(
        kind=kind,
        file_name=getattr(media, "file_name", None) or "",
        file_size=getattr(media, "file_size", None) or 0,
        caption=_html(message.caption),
    )


def content_of(message: types.Message) -> str:
    """What a message shows, as OwnMessage.content: a copy (forwarded without its author, or sent
    anew from the file and its text) shows what its source shows, its caption aside."""
    if not message.media:
        return f"text:{message.text or ''}"
    kind = message.media.name.lower()
    return f"{kind}:{getattr(getattr(message, kind, None), 'file_unique_id', None) or ''}"


def _html(text) -> str:
    """A caption kurigram parsed, back as Telegram HTML with every character as written (kurigram's
    Str.html does not escape plain text: "a < b" lost its "<")."""
    return entities_html(text) if text else ""


def markup(buttons: Keyboard | None) -> types.InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return types.InlineKeyboardMarkup(
        [
            [
                types.InlineKeyboardButton(b.text, url=b.url)
                if b.url
                else types.InlineKeyboardButton(b.text, callback_data=b.callback_data)
                for b in row
            ]
            for row in buttons
        ]
    )


class _Named(io.RawIOBase):
    """A file from Django's storage as kurigram's save_file reads it: seekable, with the name
    Telegram is told (a storage's own name is its path)."""

    def __init__(self, file: BinaryIO, name: str):
        self._file, self.name = file, name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._file.seek(offset, whence)
        return self._file.tell()

    def tell(self) -> int:
        return self._file.tell()


def sent_ids(answer) -> list[int]:
    """The new messages' ids in Telegram's answer to a send or forward, in the order sent."""
    if isinstance(answer, SentId):  # a one-message send's answer, read only as far as its id
        return [answer.id]
    if isinstance(answer, raw.types.UpdateShortSentMessage):
        return [answer.id]
    by_random = [u.id for u in getattr(answer, "updates", []) if isinstance(u, raw.types.UpdateMessageID)]
    if by_random:
        return by_random
    return [
        u.message.id
        for u in getattr(answer, "updates", [])
        if isinstance(u, (raw.types.UpdateNewMessage, raw.types.UpdateNewChannelMessage))
    ]


@contextlib.contextmanager
def _repeatable(keyed: bool):
    """An OutcomeUnknown raised inside is repeatable when every message of the call carried its
    key's random_id (`keyed`)."""
    try:
        yield
    except OutcomeUnknown as exc:
        exc.repeatable = keyed
        raise


def _keyed(error, item: SendItem):
    """A batch item's error: an unknown outcome is repeatable when the item carried a key."""
    if isinstance(error, OutcomeUnknown):
        error.repeatable = bool(item.key)
    return error


class InFlightError(Exception):
    """A bug (not Telegram's answer) that struck while a keyed send was on its way, raised from it:
    the send may have arrived (`maybe_delivered`). Not a TelegramError: the sweep hands the row
    back and fails the run loudly; the row is sent again with its random_id (delivered once)."""

    maybe_delivered = True


def _in_flight(exc: Exception, item: SendItem) -> Exception:
    """A batch item's result when a bug struck while its group was on its way. A keyed item gets
    InFlightError: handed back to be sent again with the same random_id, and the run fails (as
    OutcomeUnknown it would be recorded as Telegram's lost answer, and the bug go unreported when
    it struck the batch's last group). An item without a key cannot be sent again safely:
    OutcomeUnknown, at most once."""
    message = f"unexpected error while sending: {type(exc).__name__}: {exc}"[:200]
    if item.key:
        error = InFlightError(message)
        error.__cause__ = exc
        return error
    return OutcomeUnknown(message)


async def _noop():
    return None


def _random_id() -> int:
    """A message's random_id, made in any thread: kurigram's rnd_id (MsgId) is a clock-based
    counter that two threads can make twice, and Telegram sends a message once per random_id."""
    return random.getrandbits(64) - 2**63


class _NotCached(Exception):  # noqa: N818 - a signal between the gateway's halves, never raised out
    """kurigram's storage has no access hash for this user (raised on the loop, before any call)."""


async def _on_loop(fn, *args, **kwargs):
    """Call `fn` on the client's loop: kurigram's methods turn into blocking wrappers when called
    from a thread without a running loop."""
    return await fn(*args, **kwargs)


class PyrogramGateway(Gateway):
    """`limiter`: the shared send limiter (None: no pacing, for tests that want raw calls).
    `peers(user_id) -> access_hash | None`: where a worker finds the access hashes runbot stored,
    so a send costs no resolution call. `paid`: sends carry the paid-broadcast flag."""

    def __init__(
        self,
        client: Client,
        loop: asyncio.AbstractEventLoop,
        *,
        username: str = "",
        limiter: Limiter | None = None,
        max_flood_wait: int = 60,
        peers: Callable[[int], int | None] | None = None,
        paid: bool = False,
        sleep=time.sleep,
    ):
        self.client = client
        self.loop = loop
        loop_bind(client, loop)
        self._username = username
        self._thread: threading.Thread | None = None
        self.limiter = limiter
        self.max_flood_wait = max_flood_wait
        self.peers = peers
        self.paid = paid or None
        self.sleep = sleep
        self._known_peers: set[int] = set()
        self.admitted_for = ADMITTED_FOR  # seconds an admitted group may take to be written (send_many)
        self._peer_hashes: dict[int, int] = {}
        self._parse_cache: dict[str, tuple[str, list]] = {}
        self._markup_cache: dict[tuple, Written] = {}

    @property
    def policy(self) -> CallPolicy:
        """The call policy for this gateway's limiter (asked only after a refusal)."""
        return CallPolicy(limiter=self.limiter, max_flood_wait=self.max_flood_wait)

    def peers_remember(self, access_hashes: dict[int, int | None]) -> None:
        if len(self._peer_hashes) >= KNOWN_PEERS_MAX:  # hashes of rows handed back, never sent
            self._peer_hashes.clear()
        self._peer_hashes.update((uid, h) for uid, h in access_hashes.items() if h is not None)

    @classmethod
    def in_thread(cls, client: Client, **options) -> PyrogramGateway:
        """A gateway for `client` on a private loop in a daemon thread (for workers, which are not
        async); call `start()` next."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="pyrogram", daemon=True)
        thread.start()
        gateway = cls(client, loop, **options)
        gateway._thread = thread
        return gateway

    @classmethod
    def start_in_thread(cls, client: Client, **options) -> PyrogramGateway:
        gateway = cls.in_thread(client, **options)
        gateway.start()
        return gateway

    def start(self, *, before_start=None, after_start=None) -> None:
        """Sign in; `before_start(client)` runs on the loop first (to add update handlers),
        `await after_start(client)` once signed in (an UpdatePump's `resume`)."""
        if before_start is not None:

            async def prepare():
                before_start(self.client)

            self._run(prepare())
        self._run(_on_loop(self.client.start))
        session_tune(self.client)
        if after_start is not None:
            self._run(after_start(self.client))

    def stop(self, *, after_stop=None) -> None:
        """Stop the client; `await after_stop()` on the loop once it has stopped (an UpdatePump's `close`)."""
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._run(_on_loop(self.client.stop))
        if after_stop is not None:
            with contextlib.suppress(Exception):
                self._run(after_stop())

        async def cancel_the_rest():  # a stop that failed halfway leaves kurigram's tasks behind
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self._run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        if not self.loop.is_running():
            self.loop.close()

    # --- plumbing -----------------------------------------------------------------------------

    def _call(
        self, fn, *args, chat_id: int | None = None, send: bool = False, paced: bool = True, count: int = 1,
        paid: bool = False, **kwargs,
    ):  # fmt: skip
        """One Telegram call: `await fn(*args, **kwargs)` on the client's loop, under the limiter.
        `send`: it is a message to `chat_id` (its per-chat limit applies); `count`: the messages it
        delivers; `paid`: it carries the paid-broadcast flag."""
        self._refuse_the_loop()
        if chat_id is not None:
            _peer_check(chat_id)
        peer = self._peer_for(chat_id) if chat_id is not None and chat_id > 0 else None
        attempt = 1
        granted = False
        while True:
            if self.limiter is not None and paced and not granted:
                self.limiter.acquire(chat_id if send else None, count=count, paid=paid)
            granted = False
            try:
                return self._run(self._on_loop(peer, fn, *args, **kwargs), send=send)
            except _NotCached:  # nothing went to Telegram: the stored hash, and the slot still ours
                peer, granted = self._stored_peer(chat_id), True
                continue
            except (FloodWait, TransientError) as exc:  # Telegram did nothing: asking again is safe
                retry = self.policy.after(exc, attempt=attempt, chat_id=chat_id if send else None, paid=paid)
                if isinstance(exc, FloodWait):
                    log.warning("FloodWait %ss chat=%s: the limiter pauses its scope", exc.seconds, chat_id)
                else:
                    log.info("transient error chat=%s attempt=%s: %s", chat_id, attempt, exc)
                if not retry.again:
                    raise
                if retry.wait:
                    self.sleep(retry.wait)
            except (TelegramError, BotUnauthorized):
                raise
            except Exception as exc:
                if send:  # not Telegram's answer (a bug): raised as it is, and said to have maybe left
                    exc.maybe_delivered = True  # type: ignore[attr-defined]
                raise
            attempt += 1

    def _peer_for(self, user_id: int) -> tuple[int, int] | int | None:
        """What to hand kurigram before calling, so that it never asks Telegram who the user is
        (users.getUsers is a call the limiter does not see, and it fails for users the bot never
        met): None when kurigram has the user, (user id, access hash) to give it, or the user id
        alone: look in kurigram's storage first, on the loop in the call's own hop (runbot's
        client stored the user from their update), and raise _NotCached when it is not there."""
        if user_id in self._known_peers:
            return None
        access_hash = self._peer_hashes.pop(user_id, None)  # a sweep's batch brought it (used once)
        if access_hash is not None:
            return user_id, access_hash
        return user_id

    def _stored_peer(self, user_id: int) -> tuple[int, int]:
        """The access hash runbot stored for a user kurigram's storage does not have."""
        access_hash = self.peers(user_id) if self.peers is not None else None
        if access_hash is None:
            raise PeerUnknown(f"user {user_id} has never written to the bot: no access hash")
        return user_id, access_hash

    async def _knows(self, user_id: int) -> bool:
        try:
            await self.client.storage.get_peer_by_id(user_id)
            return True
        except KeyError:
            return False

    async def _on_loop(self, peer: tuple[int, int] | int | None, fn, *args, **kwargs):
        """The call, on the client's loop, after making sure kurigram has the user's access hash
        (`_peer_for`; in the same hop: a send costs one trip to the loop)."""
        if isinstance(peer, int):
            if not await self._knows(peer):
                raise _NotCached(peer)
            self._remember_known(peer)
        elif peer is not None:
            await self.client.storage.update_peers([(peer[0], peer[1], "user", None)])
            self._remember_known(peer[0])
        return await fn(*args, **kwargs)

    def _remember_known(self, user_id: int) -> None:
        if len(self._known_peers) >= KNOWN_PEERS_MAX:  # a worker lives for millions of sends
            self._known_peers.clear()  # forgotten ones are found in kurigram's storage again
        self._known_peers.add(user_id)

    def _refuse_the_loop(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self.loop:
            raise RuntimeError("PyrogramGateway is synchronous: call it from a worker thread, not from its loop")

    def _run(self, coro, *, send: bool = False):
        try:
            self._refuse_the_loop()
        except RuntimeError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=CALL_TIMEOUT)
        except (TelegramError, BotUnauthorized, _NotCached):
            raise
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise (OutcomeUnknown if send else TransientError)(f"no answer in {CALL_TIMEOUT}s") from exc
        except Exception as exc:
            domain = error_to_domain(exc, send=send)
            if domain is None:  # not Telegram's answer: our bug or kurigram's, raised as it is
                raise
            raise domain from exc

    # --- Gateway ------------------------------------------------------------------------------

    @property
    def bot_username(self) -> str:
        me = self.client.me  # known once the client has started
        return self._username or (me.username if me is not None and me.username else "")

    def send_text(
        self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False, reply_to: int | None = None,
        key: str = "",
    ) -> Sent:  # fmt: skip
        keyed = bool(key) and not self._kurigram_sends(buttons)
        with _repeatable(keyed):
            message_id = self._call(
                self._send_text, chat_id, text, buttons, protect, reply_to, key, chat_id=chat_id, send=True,
                paid=bool(self.paid),
            )  # fmt: skip
        return Sent(chat_id, message_id)

    def _kurigram_sends(self, buttons: Keyboard | None) -> bool:
        """Whether a text goes through kurigram's send_message (its own random_id, not a key's)."""
        return self._parses_answers and any(b.callback_data for row in buttons or () for b in row)

    @property
    def _parses_answers(self) -> bool:
        """runbot's client (it takes updates) parses what it sends with callback buttons: kurigram
        keeps the messages, so a tap on a button under one costs no messages.getMessages. Anything
        else (a worker's sends, runbot's copies and plain texts) skips parsing Telegram's answer
        into a Message: a third of a send's CPU."""
        return not self.client.no_updates

    async def _send_text(self, chat_id, text, buttons, protect, reply_to=None, key="") -> int:
        """kurigram's send_message; otherwise the same request, reading only the new id."""
        if self._kurigram_sends(buttons):
            message = await self.client.send_message(
                chat_id,
                text,
                reply_markup=markup(buttons),
                protect_content=protect or None,
                link_preview_options=types.LinkPreviewOptions(is_disabled=True),
                allow_paid_broadcast=self.paid,
                reply_parameters=types.ReplyParameters(message_id=reply_to) if reply_to else None,
            )
            return message.id
        message, entities = await self._parsed(text)
        answer = await self._invoke(
            raw.functions.messages.SendMessage(
                peer=await self.client.resolve_peer(chat_id),
                message=message,
                entities=entities,
                random_id=random_id_of(key) if key else self.client.rnd_id(),
                no_webpage=True,
                noforwards=protect or None,
                reply_markup=await self._reply_markup(buttons),
                allow_paid_floodskip=self.paid,
                reply_to=raw.types.InputReplyToMessage(reply_to_msg_id=reply_to) if reply_to else None,
            ),
            one_sent=True,
        )
        (message_id,) = sent_ids(answer)
        return message_id

    def send_many(self, items: Sequence[SendItem]) -> list[Sent | TelegramError | Exception]:
        """A worker's batch: each grant of the limiter (`acquire_many`: as many slots as are due
        together) goes to Telegram as one MTProto container, in one hop to the loop; Telegram
        answers each message of it on its own (`_invoke_many`). Per item, as `_call` does: a
        FloodWait pauses the limiter's scope and the item is asked again, a transient error is
        retried, up to MAX_ATTEMPTS; every other error is that item's result. When the batch
        cannot go on (the limiter's Redis down, the bot's token refused, an exception that is not
        Telegram's: a bug), what was sent stays Sent and every item not sent gets that exception;
        the items of a group in flight when a bug struck may have arrived: InFlightError (keyed:
        sent again with the same random_id) or OutcomeUnknown (no key: never sent again). runbot (which parses its answers) and media given by URL go one by one."""
        by_url = any(i.media is not None and (i.media.kind not in MEDIA_FILE_TYPES or "://" in i.media.file) for i in items)
        if self._parses_answers or by_url:
            return super().send_many(items)
        self._refuse_the_loop()
        results: list[Sent | TelegramError | None] = [None] * len(items)
        peers: dict[int, raw.base.InputPeer | None] = {}
        for n, item in enumerate(items):
            try:
                _peer_check(item.chat_id)
                peers[item.chat_id] = self._input_peer(item.chat_id)
            except Exception as exc:  # noqa: BLE001 - that item's result (PeerUnknown, or a bug: handed back)
                results[n] = exc
        attempts = dict.fromkeys(range(len(items)), 0)
        asked_again = dict.fromkeys(range(len(items)), 0)  # Unanswered, asked again (ASK_AGAIN_MAX)
        # Each request serialized here, once (a retry sends the same random_id), and before the
        # limiter admits any: an admitted group leaves at once. Telegram counts a send when it
        # arrives, the windows when they admit it; what runs between them can bunch sends.
        prebuilt: dict[int, Written | None] = {}
        for n, item in enumerate(items):
            if results[n] is None:
                try:
                    prebuilt[n] = self._prebuilt(item, peers.get(item.chat_id))
                except Exception as exc:  # noqa: BLE001 - a bug building it: that item goes back unsent
                    results[n] = exc
        todo = [n for n in range(len(items)) if results[n] is None]
        stop: Exception | None = None  # nothing more can be sent: the items left get this
        lapsed = 0
        while todo and stop is None:
            try:
                granted = self.limiter.acquire_many([items[n].chat_id for n in todo]) if self.limiter is not None else len(todo)
            except Exception as exc:  # noqa: BLE001 - Redis down: nothing more goes, nothing sent is lost
                stop = exc
                break
            bounded = self.limiter is not None and lapsed < ADMISSIONS_LAPSED_MAX
            write_by = time.monotonic() + self.admitted_for if bounded else None
            group, todo = todo[:granted], todo[granted:]
            try:
                sending = self._send_group([items[n] for n in group], peers, [prebuilt[n] for n in group], write_by=write_by)
                answers = self._run(sending, send=True)
            except (TelegramError, BotUnauthorized) as exc:  # no answer at all: this group's, not the others'
                answers = [exc] * len(group)
            except Exception as exc:  # a bug while this group was on its way: it may have arrived
                log.error("unexpected error sending a group of %d: nothing more of this batch is sent", len(group), exc_info=exc)
                for n in group:
                    results[n] = _in_flight(exc, items[n])
                stop = exc
                break
            retry, flood, wait = [], 0, 0.0
            if any(isinstance(answer, Lapsed) for answer in answers):
                lapsed += 1
                ADMISSIONS_LAPSED.labels(getattr(self.limiter, "lane", "bulk")).inc()
                if lapsed == ADMISSIONS_LAPSED_MAX:
                    log.warning("%d groups of this batch were not written within %.0f ms of their admission: "
                                "the rest of this batch goes unbounded", lapsed, self.admitted_for * 1000)  # fmt: skip
            for n, answer in zip(group, answers, strict=True):
                if isinstance(answer, Lapsed):  # never left: the limiter is asked again, no attempt spent
                    retry.append(n)
                    continue
                if isinstance(answer, Unanswered):
                    asked_again[n] += 1
                    if asked_again[n] < ASK_AGAIN_MAX:  # the same bytes again, admitted again
                        prebuilt[n] = answer.query
                        retry.append(n)
                        wait = max(wait, Session.RETRY_DELAY)
                        continue
                    answer = answer.cause
                attempts[n] += 1
                if isinstance(answer, int):
                    results[n] = Sent(items[n].chat_id, answer)
                    continue
                error = answer if isinstance(answer, (TelegramError, BotUnauthorized)) else error_to_domain(answer, send=True)
                error = _keyed(error, items[n])
                if error is None:  # not Telegram's answer: a bug building this item's request (not sent)
                    results[n] = answer
                    continue
                if isinstance(error, BotUnauthorized):
                    results[n] = stop = error  # Telegram refused the bot itself: nothing was sent
                    continue
                try:
                    again = self.policy.after(error, attempt=attempts[n], chat_id=items[n].chat_id, paid=bool(self.paid))
                except Exception as exc:  # noqa: BLE001 - Redis down: this item is not asked again
                    results[n] = error
                    stop = stop or exc
                    continue
                if isinstance(error, FloodWait):
                    flood = max(flood, error.seconds)
                if again.again:
                    retry.append(n)
                    wait = max(wait, again.wait)
                    continue
                results[n] = error
            if flood:
                log.warning("FloodWait %ss on %d of a batch of %d: the limiter pauses", flood, len(retry), len(group))
            elif wait and stop is None:
                self.sleep(wait)
            todo = retry + todo
        for n in todo:
            results[n] = stop
        return results  # type: ignore[return-value]

    def _input_peer(self, chat_id: int) -> raw.base.InputPeer | None:
        """The user's InputPeer from the access hash the claim brought or runbot stored (no
        kurigram storage write or read per send); None: kurigram resolves it (channels, groups,
        users it met itself)."""
        if chat_id <= 0:
            return None
        access_hash = self._peer_hashes.pop(chat_id, None)
        if access_hash is None and chat_id not in self._known_peers and self.peers is not None:
            access_hash = self.peers(chat_id)
        if access_hash is None:
            if chat_id in self._known_peers or self._run(self._knows(chat_id)):
                return None
            raise PeerUnknown(f"user {chat_id} has never written to the bot: no access hash")
        return raw.types.InputPeerUser(user_id=chat_id, access_hash=access_hash)

    async def _send_group(
        self, items: list[SendItem], peers: dict, prebuilt: list, *, write_by: float | None = None
    ) -> list[int | BaseException]:
        """Send them all: each item's request as the sending thread serialized it (`_prebuilt`),
        or else built here (the text's HTML parsed once per distinct text); none written after
        `write_by` (those are Lapsed: kurigram.invoke_many)."""
        answers: list[int | BaseException | None] = [None] * len(items)
        queries: list[tuple[int, raw.core.TLObject]] = []
        for n, item in enumerate(items):
            if prebuilt[n] is not None:
                queries.append((n, prebuilt[n]))
                continue
            try:
                peer = peers.get(item.chat_id) or await self.client.resolve_peer(item.chat_id)
                queries.append((n, await self._request(item, peer)))
            except Exception as exc:  # noqa: BLE001 - that item's result
                answers[n] = exc
        answered = await self._invoke_many([q for _, q in queries], write_by=write_by, one_sent=True, ask_again=False)
        for (n, _), answer in zip(queries, answered, strict=True):
            if isinstance(answer, BaseException):
                answers[n] = answer
            else:
                ids = sent_ids(answer)
                answers[n] = ids[0] if ids else BadRequest(f"no message id in Telegram's answer {type(answer).__name__}")
        return answers  # type: ignore[return-value]

    def _prebuilt(self, item: SendItem, peer) -> Written | None:
        """The item's request serialized in the sending thread, when everything it takes is at
        hand: the user's peer, the text's parsed HTML and the keyboard's bytes in their caches
        (so a broadcast's or a sweep's sends after the first). The loop then only wraps, encrypts
        and writes, and it also reads every answer: building 100 notices there held it 4 ms.
        None: `_send_group` builds it on the loop."""
        if peer is None:
            return None
        parsed = self._parse_cache.get(item.text) if item.text else ("", None)
        keyboard = self._markup_cache.get(tuple(tuple(row) for row in item.buttons)) if item.buttons else None
        if parsed is None or (item.buttons and keyboard is None):
            return None
        query = self._request_of(item, peer, parsed, keyboard, random_id=random_id_of(item.key) if item.key else _random_id())
        return Written(self._wire(query).write(), query)

    async def _request(self, item: SendItem, peer) -> raw.core.TLObject:
        parsed = await self._parsed(item.text) if item.text else ("", None)
        random_id = random_id_of(item.key) if item.key else self.client.rnd_id()
        return self._request_of(item, peer, parsed, await self._reply_markup(item.buttons), random_id=random_id)

    def _request_of(self, item: SendItem, peer, parsed, keyboard, *, random_id: int) -> raw.core.TLObject:
        message, entities = parsed
        common = dict(
            peer=peer,
            message=message,
            entities=entities or None,
            random_id=random_id,
            noforwards=item.protect or None,
            reply_markup=keyboard,
            allow_paid_floodskip=self.paid,
        )
        if item.media is None:
            return raw.functions.messages.SendMessage(no_webpage=True, **common)
        media = utils.get_input_media_from_file_id(item.media.file, MEDIA_FILE_TYPES[item.media.kind])
        return raw.functions.messages.SendMedia(media=media, **common)

    async def _send_item(self, item: SendItem) -> int:
        request = await self._request(item, await self.client.resolve_peer(item.chat_id))
        (message_id,) = sent_ids(await self._invoke(request, one_sent=True))
        return message_id

    async def _invoke_many(
        self, queries: list, *, write_by: float | None = None, one_sent: bool = False, ask_again: bool = True
    ) -> list:
        """Each query's answer (or the exception it raised), several in one MTProto container
        (kurigram.invoke_many: each request serialized once, on the wire as this client sends;
        `one_sent`: each sends one message, and only its id is read: a SentId)."""
        wired = [q if isinstance(q, Written) and q.query is not None else Written(self._wire(q).write(), q) for q in queries]
        return await invoke_many(self.client, wired, write_by=write_by, one_sent=one_sent, ask_again=ask_again)

    def _wire(self, query: raw.core.TLObject) -> raw.core.TLObject:
        """The request as it goes on the wire: a client without updates asks Telegram for none."""
        return raw.functions.InvokeWithoutUpdates(query=query) if self.client.no_updates else query

    async def _invoke(self, query, *, one_sent: bool = False):
        """One request, sent as `_invoke_many` sends them; raises what kurigram's invoke raises."""
        (answer,) = await self._invoke_many([query], one_sent=one_sent)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False,
        key: str = "",
    ) -> Sent:  # fmt: skip
        # kurigram's send_* upload a string naming a local file before trying it as a URL or file
        # id: media that came from outside (an API caller, an operator) must never reach it as a
        # path, or the worker would send its own files (its .env) to whoever the message is for.
        if problem := media_problem(media.file, kind=media.kind):
            raise BadRequest(f"media refused before sending: {problem}")
        if key and media.kind in MEDIA_FILE_TYPES and "://" not in media.file:  # by file id: the request is ours
            item = SendItem(chat_id, caption, media=media, buttons=buttons, protect=protect, key=key)
            with _repeatable(True):
                message_id = self._call(
                    self._send_item, item, chat_id=chat_id, send=True, paid=bool(self.paid)
                )  # fmt: skip
            return Sent(chat_id, message_id)
        send = getattr(self.client, f"send_{media.kind}")
        message = self._call(
            send,
            chat_id,
            media.file,
            caption=caption,
            reply_markup=markup(buttons),
            protect_content=protect or None,
            allow_paid_broadcast=self.paid,
            chat_id=chat_id,
            send=True,
            paid=bool(self.paid),
        )
        return Sent(chat_id, message.id)

    def send_album(
        self, chat_id: int, items: Sequence[Media], *, caption: str = "", protect: bool = False, key: str = ""
    ) -> list[Sent]:
        with _repeatable(bool(key)):
            ids = self._call(
                self._send_album, chat_id, list(items), caption, protect, key, chat_id=chat_id, send=True,
                count=len(items), paid=bool(self.paid),
            )  # fmt: skip
        return [Sent(chat_id, i) for i in ids]

    async def _send_album(self, chat_id, items, caption, protect, key="") -> list[int]:
        message, entities = await self._parsed(caption) if caption else ("", [])
        multi = []
        for n, item in enumerate(items):
            media = utils.get_input_media_from_file_id(item.file, ALBUM_FILE_TYPES[item.kind])
            first = n == 0
            multi.append(
                raw.types.InputSingleMedia(
                    media=media,
                    random_id=random_id_of(key, n) if key else self.client.rnd_id(),
                    message=message if first else "",
                    entities=entities if first else None,
                )
            )
        answer = await self.client.invoke(
            raw.functions.messages.SendMultiMedia(
                peer=await self.client.resolve_peer(chat_id),
                multi_media=multi,
                noforwards=protect or None,
                allow_paid_floodskip=self.paid,
            )
        )
        return sent_ids(answer)

    def upload(self, kind: str, file: BinaryIO, *, file_name: str, mime_type: str = "") -> str:
        # Not a message: no slot of the send limiter. A lost answer is safe to ask again (nobody
        # received anything), so it is not a send either.
        return self._call(self._upload, kind, file, file_name, mime_type, paced=False)

    async def _upload(self, kind, file, file_name, mime_type) -> str:
        uploaded = await self.client.save_file(_Named(file, file_name))
        if kind == "photo":
            media = raw.types.InputMediaUploadedPhoto(file=uploaded)
        else:
            attributes = [raw.types.DocumentAttributeFilename(file_name=file_name)]
            if kind == "video":
                attributes.append(raw.types.DocumentAttributeVideo(duration=0, w=0, h=0, supports_streaming=True))
            elif kind == "audio":
                attributes.append(raw.types.DocumentAttributeAudio(duration=0, title=file_name))
            media = raw.types.InputMediaUploadedDocument(
                file=uploaded,
                mime_type=mime_type or "application/octet-stream",
                attributes=attributes,
                force_file=True if kind == "document" else None,
            )
        # core.telegram.org/method/messages.uploadMedia: "peer: can be inputPeerEmpty for bots".
        answer = await self.client.invoke(raw.functions.messages.UploadMedia(peer=raw.types.InputPeerEmpty(), media=media))
        if isinstance(answer, raw.types.MessageMediaPhoto):
            return photo_file_id(self.client, answer.photo)
        if not isinstance(answer, raw.types.MessageMediaDocument):
            raise BadRequest(f"upload of {file_name} answered {type(answer).__name__}")
        doc = answer.document
        return FileId(
            file_type=ALBUM_FILE_TYPES[kind],
            dc_id=doc.dc_id,
            media_id=doc.id,
            access_hash=doc.access_hash,
            file_reference=doc.file_reference,
        ).encode()

    def copy_messages(
        self,
        chat_id: int,
        from_chat_id: int,
        message_ids: Sequence[int],
        *,
        caption: Caption = None,
        protect: bool = False,
        buttons: Keyboard | None = None,
        key: str = "",
    ) -> list[Sent]:
        """Without a caption or buttons: one ForwardMessages call per 100 ids (no "forwarded from"
        header); ids Telegram cannot forward (deleted, service messages) are skipped. With a
        caption or buttons (a forward cannot carry either): one GetMessages call per 100 ids, then
        one send per message. Raises MessageNotFound when nothing could be copied, CopyIncomplete
        when it stopped partway, AlreadySent (with what this attempt sent) when some of it was
        refused as a repeat of an earlier attempt (`key`) and the rest went out."""
        if buttons and len(message_ids) != 1:
            raise ValueError("buttons go under one copied message, not an album or several")
        sent: list[Sent] = []
        repeats = 0  # messages Telegram refused as repeats of their random_ids: an earlier attempt's
        try:
            if caption is None and not buttons:
                # Telegram may count each forwarded message against its rates: no more in one call
                # than the limiter lets go together.
                size = min(DELETE_CHUNK, self.limiter.count_max) if self.limiter is not None else DELETE_CHUNK
                for start, chunk in enumerate(chunked(list(message_ids), size)):
                    rids = [random_id_of(key, start * size + n) for n in range(len(chunk))] if key else None
                    try:
                        with _repeatable(bool(key)):
                            ids = self._call(
                                self._forward, chat_id, from_chat_id, chunk, protect, rids, chat_id=chat_id, send=True,
                                count=len(chunk), paid=bool(self.paid),
                            )  # fmt: skip
                    except AlreadySent:
                        repeats += len(chunk)  # an earlier attempt's: there, ids unknown; the rest goes on
                        continue
                    sent.extend(Sent(chat_id, i) for i in ids)
            else:
                n = 0
                for chunk in chunked(list(message_ids), DELETE_CHUNK):
                    for source in self._fetch(from_chat_id, chunk):
                        text = caption(copy_source(source)) if callable(caption) else caption
                        n += 1
                        if key and (item := self._copy_item(chat_id, source, text, buttons, protect, f"{key}#{n - 1}")):
                            try:
                                with _repeatable(True):
                                    message_id = self._call(
                                        self._send_item, item, chat_id=chat_id, send=True, paid=bool(self.paid)
                                    )
                            except AlreadySent:
                                repeats += 1
                                continue
                            sent.append(Sent(chat_id, message_id))
                            continue
                        copy = self._call(
                            source.copy,
                            chat_id,
                            caption=text if source.media else None,
                            parse_mode=enums.ParseMode.HTML,
                            protect_content=protect or None,
                            allow_paid_broadcast=self.paid,
                            reply_markup=markup(buttons),  # None: not the source's own buttons
                            chat_id=chat_id,
                            send=True,
                            paid=bool(self.paid),
                        )
                        sent.append(Sent(chat_id, copy.id))
        except (TelegramError, BotUnauthorized) as exc:
            if (sent or repeats) and isinstance(exc, TelegramError):
                raise CopyIncomplete(sent=sent, cause=exc) from exc
            raise
        if repeats:
            raise AlreadySent(f"{repeats} of the messages were delivered by an earlier attempt", sent=sent)
        if not sent:
            raise MessageNotFound(f"none of {from_chat_id}/{list(message_ids)[:5]}… can be copied")
        return sent

    def _copy_item(self, chat_id: int, source: types.Message, caption: str | None, buttons, protect: bool, key: str):
        """A copy of `source` as a send Courier builds itself, so that it carries `key`'s
        random_id: a text, or a file Telegram already has with its caption (the new one, or its
        own). None for what only kurigram's copy reproduces (a link preview, a poll, a sticker...)."""
        info = copy_source(source)
        if info.kind and info.kind not in MEDIA_FILE_TYPES:
            return None
        if not info.kind and getattr(source, "web_page", None) is not None:
            return None
        media = Media(info.kind, getattr(source, info.kind).file_id) if info.kind else None
        text = (caption if caption is not None else info.caption) if media else info.text
        return SendItem(chat_id, text, media=media, buttons=buttons, protect=protect, key=key)

    def post_read(self, chat_id: int, message_id: int) -> CopySource:
        found = self._fetch(chat_id, [message_id])
        if not found:
            raise MessageNotFound(f"message {message_id} of {chat_id} does not exist")
        return copy_source(found[0])

    async def _parsed(self, text: str) -> tuple[str, list]:
        """Telegram HTML -> (text, entities), once per distinct text: a broadcast sends one text to
        every user, and parsing it is a large part of a send's CPU."""
        found = self._parse_cache.get(text)
        if found is None:
            if len(self._parse_cache) >= 64:
                self._parse_cache.clear()
            found = tuple((await utils.parse_text_entities(self.client, text, enums.ParseMode.HTML, None)).values())
            self._parse_cache[text] = found
        return found

    async def _reply_markup(self, buttons: Keyboard | None) -> raw.core.TLObject | None:
        """A request's inline keyboard, serialized once per distinct keyboard: a broadcast's sends,
        or a sweep's "deleted" notices for one file, all carry the same one, and building and
        writing it was a sixth of a notice's CPU."""
        if not buttons:
            return None
        key = tuple(tuple(row) for row in buttons)
        found = self._markup_cache.get(key)
        if found is None:
            if len(self._markup_cache) >= 256:
                self._markup_cache.clear()
            found = self._markup_cache[key] = Written((await markup(buttons).write(self.client)).write())
        return found

    async def _forward(self, chat_id, from_chat_id, ids, protect, random_ids=None) -> list[int]:
        """kurigram's forward_messages(hide_sender_name=True), reading only the new ids (a copy
        carries no button of ours to tap)."""
        answer = await self._invoke(
            raw.functions.messages.ForwardMessages(
                from_peer=await self.client.resolve_peer(from_chat_id),
                id=ids,
                random_id=random_ids or [self.client.rnd_id() for _ in ids],
                to_peer=await self.client.resolve_peer(chat_id),
                drop_author=True,
                noforwards=protect or None,
                allow_paid_floodskip=self.paid,
            )
        )
        return sent_ids(answer)

    def _fetch(self, chat_id: int, ids: list[int]) -> list[types.Message]:
        """The messages that can be copied, in order (one call; a FloodWait reaches the limiter
        instead of being slept through inside kurigram, as get_messages would)."""

        return [m for m in self._call(self._messages, chat_id, ids) if not m.empty and not m.service]

    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        deleted = 0
        for chunk in chunked(list(message_ids), DELETE_CHUNK):
            # Deletes are not messages to the chat: they count against the global rate only.
            try:
                deleted += self._call(self.client.delete_messages, chat_id, chunk, chat_id=chat_id)
            except (MessageTooOld, MessageNotFound) as exc:
                log.info("delete skipped chat=%s ids=%s: %s", chat_id, chunk, exc)
        return deleted

    def delete_private(self, messages: Sequence[tuple[int, Sequence[int]]]) -> int:
        """messages.deleteMessages takes ids without a chat: the bot's private-chat messages are
        numbered in one sequence of its own (core.telegram.org/api/updates: private chats and
        basic groups share the account's message box; that a bot's box works the same way is
        inferred from this method taking no peer). So one call deletes DELETE_CHUNK of them
        across chats, with no access hash needed, and one global limiter slot."""
        deleted = 0
        for chunk in chunked([i for chat_id, ids in messages if chat_id > 0 for i in ids], DELETE_CHUNK):
            try:
                deleted += self._call(self._delete_ids, chunk)
            except (MessageTooOld, MessageNotFound) as exc:
                log.info("delete skipped ids=%s…: %s", chunk[:5], exc)
        others = [(chat_id, ids) for chat_id, ids in messages if chat_id <= 0]
        return deleted + sum(self.delete_messages(chat_id, ids) for chat_id, ids in others)

    async def _delete_ids(self, ids: list[int]) -> int:
        answer = await self._invoke(raw.functions.messages.DeleteMessages(id=ids, revoke=True))
        return answer.pts_count

    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None:
        self._call(self._edit_text, chat_id, message_id, text, buttons, chat_id=chat_id)

    async def _edit_text(self, chat_id, message_id, text, buttons):
        try:
            await self.client.edit_message_text(chat_id, message_id, text, reply_markup=markup(buttons))
        except errors.MessageNotModified:
            pass  # the user tapped twice: the message already says this

    def edit_buttons(self, chat_id: int, message_id: int, buttons: Keyboard | None) -> None:
        self._call(self.client.edit_message_reply_markup, chat_id, message_id, reply_markup=markup(buttons), chat_id=chat_id)

    def invite_link_create(self, chat_id: int, *, expire_at: datetime | None = None, join_request: bool = False) -> str:
        # Not a message: it counts against the overall rate only, like a delete.
        link = self._call(
            self.client.create_chat_invite_link, chat_id, expire_date=expire_at, creates_join_request=join_request or None
        )
        if link is None:  # kurigram: the chat accepts join requests through its public link only
            raise BadRequest(f"chat {chat_id} gives no invite link of its own")
        return link.invite_link

    def pin_message(self, chat_id: int, message_id: int, *, silent: bool = True) -> None:
        # The raw call: kurigram's pin_chat_message parses the service message it gets back, which
        # costs a messages.getMessages for the pinned one.
        self._call(self._pin, chat_id, message_id, silent, chat_id=chat_id, send=True)

    async def _pin(self, chat_id, message_id, silent) -> None:
        await self.client.invoke(
            raw.functions.messages.UpdatePinnedMessage(
                peer=await self.client.resolve_peer(chat_id), id=message_id, silent=silent or None, pm_oneside=None
            )
        )

    def album_ids(self, chat_id: int, message_id: int) -> list[int]:
        messages = self._call(self._album, chat_id, message_id)
        if not messages:
            raise MessageNotFound(f"message {message_id} in {chat_id} is gone")
        return messages

    async def _album(self, chat_id, message_id) -> list[int]:
        # kurigram's get_media_group reads the messages 9 before to 10 after, one call, same
        # grouped_id; read here with sleep_threshold=0, so a FloodWait reaches the limiter
        # instead of being slept through inside kurigram (get_messages sleeps through any).
        ids = list(range(max(1, message_id - 9), message_id + 10))
        found = await self._messages(chat_id, ids)
        by_id = {m.id: m for m in found if not m.empty}
        wanted = by_id.get(message_id)
        if wanted is None:
            return []
        if wanted.media_group_id is None:
            return [message_id]
        return sorted(i for i, m in by_id.items() if m.media_group_id == wanted.media_group_id)

    def messages_existing(self, chat_id: int, message_ids: Sequence[int]) -> list[int]:
        ids = [int(i) for i in message_ids]
        if len(ids) > DELETE_CHUNK:
            raise ValueError(f"at most {DELETE_CHUNK} ids per call, not {len(ids)}")
        if not ids:
            return []
        found = self._call(self._messages, chat_id, ids)
        there = {m.id for m in found if not m.empty}
        return [i for i in ids if i in there]

    def message_contents(self, chat_id: int, message_ids: Sequence[int]) -> dict[int, str]:
        return {m.id: content_of(m) for m in self._fetch(chat_id, [int(i) for i in message_ids])}

    def own_messages(
        self, chat_id: int, *, after_id: int, until: datetime, contents: Collection[str] | None = None, limit: int = 0
    ) -> list[OwnMessage]:
        # messages.getMessages takes ids of the bot's message box, whichever private chat they
        # are in: the chat of each is read from the answer.
        found: list[OwnMessage] = []
        start, empty_reads, horizon = after_id + 1, 0, until.timestamp()
        while start <= after_id + OWN_SCAN_MAX:
            ids = list(range(start, start + DELETE_CHUNK))
            start += DELETE_CHUNK
            present = [m for m in self._call(self._box_messages, ids) if not m.empty]
            empty_reads = 0 if present else empty_reads + 1
            if empty_reads >= OWN_SCAN_EMPTY_END:
                return found
            for m in present:
                if m.date.timestamp() > horizon:  # ids grow with time: nothing further was sent by then
                    return found
                if not (m.outgoing and m.chat is not None and m.chat.id == chat_id):
                    continue
                content = content_of(m)
                if contents is None or content in contents:
                    found.append(OwnMessage(m.id, datetime.fromtimestamp(m.date.timestamp(), tz=UTC), content))
                    if limit and len(found) >= limit:
                        return found
        log.warning("own messages of chat=%s: stopped after %d ids past %s", chat_id, OWN_SCAN_MAX, after_id)
        return found

    async def _box_messages(self, ids: list[int]) -> list[types.Message]:
        """messages.getMessages of the bot's message box (no peer: the ids name the messages)."""
        query = raw.functions.messages.GetMessages(id=[raw.types.InputMessageID(id=i) for i in ids])
        return await utils.parse_messages(self.client, await self.client.invoke(query, sleep_threshold=0), replies=0)

    async def _messages(self, chat_id: int, ids: list[int]) -> list[types.Message]:
        """messages.getMessages (channels.getMessages for a channel), parsed; any FloodWait raised."""
        peer = await self.client.resolve_peer(chat_id)
        refs = [raw.types.InputMessageID(id=i) for i in ids]
        query = (
            raw.functions.channels.GetMessages(channel=peer, id=refs)
            if isinstance(peer, raw.types.InputPeerChannel)
            else raw.functions.messages.GetMessages(id=refs)
        )
        return await utils.parse_messages(self.client, await self.client.invoke(query, sleep_threshold=0), replies=0)

    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None:
        # Answering a button press is not a message; Telegram does not rate it like one.
        try:
            self._call(self.client.answer_callback_query, callback_id, text=text or None, show_alert=alert, paced=False)
        except TelegramError as exc:
            # A query older than ~15 s cannot be answered any more; nothing is lost.
            log.info("callback %s not answered: %s", callback_id, exc)

    def is_member(self, chat_id: int, user_id: int) -> bool:
        peer = self._peer_for(user_id)
        if peer is not None:
            try:
                self._run(self._on_loop(peer, _noop))
            except _NotCached:
                self._run(self._on_loop(self._stored_peer(user_id), _noop))
        return self._call(self._is_member, chat_id, user_id)

    async def _is_member(self, chat_id, user_id) -> bool:
        try:
            member = await self.client.get_chat_member(chat_id, user_id)
        except errors.UserNotParticipant:
            return False
        if member.status in (enums.ChatMemberStatus.OWNER, enums.ChatMemberStatus.ADMINISTRATOR, enums.ChatMemberStatus.MEMBER):
            return True
        # A restricted user may still be in the chat; left and banned users are not.
        return member.status == enums.ChatMemberStatus.RESTRICTED and bool(getattr(member, "is_member", False))

    def chat_rights(self, chat_id: int) -> ChatRights:
        return self._call(self._chat_rights, chat_id, paced=False)  # a read, not a message

    async def _chat_rights(self, chat_id) -> ChatRights:
        try:
            member = await self.client.get_chat_member(chat_id, "me")
        except errors.ChatAdminRequired:  # the channel resolved, but a non-admin may not even look
            return ChatRights()
        if member.status == enums.ChatMemberStatus.OWNER:
            return ChatRights(admin=True, post=True, edit=True, delete=True, invite=True)
        rights = member.privileges
        if member.status != enums.ChatMemberStatus.ADMINISTRATOR or rights is None:
            return ChatRights()
        return ChatRights(
            admin=True,
            post=bool(rights.can_post_messages),
            edit=bool(rights.can_edit_messages),
            delete=bool(rights.can_delete_messages),
            invite=bool(rights.can_invite_users),
        )
