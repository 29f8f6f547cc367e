"""Stored files read back from Telegram, for the streaming process: any byte range of a file a
message of the storage channel carries, in order, read ahead with several upload.getFile calls
in flight.

A `Downloader` is one bot's reader in one process: its own kurigram client (never the session file
of runbot or a worker), up to `connections` media sessions per data centre (kurigram.
media_session_open; each part to the one with the fewest calls in flight), and the files' locations
cached by message. `read` yields exactly bytes [start, end) of a file: the range is cut into parts
Telegram accepts (limits.DOWNLOAD_*; an unaligned start or end is read aligned and trimmed), up to
`in_flight` of them asked at once, each handed on in order once the consumer asks for the next. So
at most `in_flight` parts (1 MB each at most) are held per stream, a slow consumer slows the reads,
and closing or cancelling the iterator cancels what is in flight.

A part Telegram refuses is asked again from its own offset, so no byte is ever skipped, repeated or
taken from elsewhere: an expired file reference is refreshed by reading the message again
(channels.getMessages); FILE_MIGRATE_X moves the file's reads to a media session on DC X; a
FloodWait up to `max_flood_wait` is waited out (the pool skips a bot while it waits); a dropped
connection or a lost answer is asked again after a back-off (retry.read_after). A message deleted,
or its media gone, is `FileGone` before the first byte and `StreamBroken` after; so is anything
else that cannot be recovered: the consumer ends its response short, and a downloader resumes.

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
  `connections`.

`start(storage_chat_id=...)` signs every bot in (a refused token fails the start, naming the bot) and
leaves out of `choose` (with a warning in the log) each that is not an admin of the storage channel;
none left is an error. `bots_admin` asks the same for `manage.py doctor`.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from pyrogram import Client, errors, raw
from pyrogram.file_id import FileUniqueId, FileUniqueType

from botapp.telegram import retry
from botapp.telegram.client import client_build
from botapp.telegram.gateway import BotUnauthorized, FloodWait
from botapp.telegram.kurigram import loop_bind, media_invoke, media_session_open, session_tune
from botapp.telegram.limits import DOWNLOAD_ALIGN, DOWNLOAD_CHUNK
from botapp.telegram.request import error_to_domain

log = logging.getLogger(__name__)

IN_FLIGHT = 4  # upload.getFile calls one stream keeps in flight (TG-FileStreamBot's choice too)
# How long one upload.getFile waits for its answer before it is asked again (a lost answer): kurigram's
# own wait for any request (Session.WAIT_TIMEOUT), unless the process sets its own.
CALL_TIMEOUT = 15.0
# Media connections one bot opens to one DC. Each carries its answers one after another, so where a
# connection's bandwidth is capped, one connection caps every stream of the bot on that DC together;
# the parts in flight go to the connection with the fewest. As many as one stream's calls in flight
# (docs/design.md, the reader: measured with bench/download_connections.py).
CONNECTIONS = IN_FLIGHT
LOCATIONS_MAX = 10_000  # files whose location (size, DC, reference) a Downloader keeps
MIGRATIONS_MAX = 2  # FILE_MIGRATE_X answers one part follows before it gives up
REFRESHES_MAX = 3  # file references one part refreshes in a row before it gives up


@dataclass(frozen=True)
class FileInfo:
    size: int
    mime_type: str
    file_name: str
    file_unique_id: str  # stable over time and bots, as the Bot API's file_unique_id: for an ETag
    dc_id: int


class FileGone(Exception):  # noqa: N818 - what happened, as the web side names it
    """The message or its media is gone from the storage channel."""


class StreamBroken(Exception):  # noqa: N818
    """A read that cannot go on: the bytes handed on so far are right; the rest will not come."""


@dataclass(frozen=True)
class Part:
    """One upload.getFile: `limit` bytes from `offset`, Telegram's rules kept."""

    offset: int
    limit: int


def parts(start: int, end: int) -> Iterator[Part]:
    """The parts that cover [start, end), in order. The first starts at `start` rounded down to the
    smallest power-of-two limit whose aligned part reaches the next 1 MB boundary (or `end`): one
    call, at most that limit read before `start`. Then whole 1 MB chunks, the last one cut to the
    smallest limit that reaches `end`."""
    if start >= end:
        return
    pos = start - start % DOWNLOAD_ALIGN
    target = min(end, (pos // DOWNLOAD_CHUNK + 1) * DOWNLOAD_CHUNK)
    limit = DOWNLOAD_ALIGN
    while pos - pos % limit + limit < target:
        limit *= 2
    pos -= pos % limit
    yield Part(pos, limit)
    pos += limit
    while pos < end:
        limit = DOWNLOAD_ALIGN
        while limit < min(end - pos, DOWNLOAD_CHUNK):
            limit *= 2
        yield Part(pos, limit)
        pos += limit


@dataclass
class Location:
    """Where a stored file is read: its InputFileLocation (with the current file reference) and DC."""

    info: FileInfo
    input: raw.base.InputFileLocation
    dc_id: int
    generation: int = 0  # how many times the reference was refreshed
    lock: asyncio.Lock | None = None


def location_of(message) -> Location | None:
    """The location of a message's file (None: no message, or no document or photo in it)."""
    media = getattr(message, "media", None)
    if isinstance(media, raw.types.MessageMediaDocument) and isinstance(media.document, raw.types.Document):
        doc = media.document
        name = next((a.file_name for a in doc.attributes if isinstance(a, raw.types.DocumentAttributeFilename)), "")
        location = raw.types.InputDocumentFileLocation(
            id=doc.id, access_hash=doc.access_hash, file_reference=doc.file_reference, thumb_size=""
        )
        info = FileInfo(
            size=doc.size,
            mime_type=doc.mime_type or "application/octet-stream",
            file_name=name or f"file_{doc.id}",
            file_unique_id=FileUniqueId(file_unique_type=FileUniqueType.DOCUMENT, media_id=doc.id).encode(),
            dc_id=doc.dc_id,
        )
        return Location(info, location, doc.dc_id, lock=asyncio.Lock())
    if isinstance(media, raw.types.MessageMediaPhoto) and isinstance(media.photo, raw.types.Photo):
        photo = media.photo
        sizes = [s for s in photo.sizes if isinstance(s, raw.types.PhotoSize)]
        if not sizes:
            return None
        biggest = max(sizes, key=lambda s: s.size)
        location = raw.types.InputPhotoFileLocation(
            id=photo.id, access_hash=photo.access_hash, file_reference=photo.file_reference, thumb_size=biggest.type
        )
        info = FileInfo(
            size=biggest.size,
            mime_type="image/jpeg",
            file_name=f"photo_{photo.id}.jpg",
            file_unique_id=FileUniqueId(file_unique_type=FileUniqueType.DOCUMENT, media_id=photo.id).encode(),
            dc_id=photo.dc_id,
        )
        return Location(info, location, photo.dc_id, lock=asyncio.Lock())
    return None


class Downloader:
    """One bot's reader in the streaming process (module docstring). Runs on the loop that calls
    `start`; every method is called on it."""

    def __init__(
        self,
        client: Client,
        *,
        in_flight: int = IN_FLIGHT,
        max_flood_wait: int = 60,
        call_timeout: float = CALL_TIMEOUT,
        connections: int = CONNECTIONS,
        name: str = "",
    ):
        if in_flight < 1 or connections < 1:
            raise ValueError("in_flight and connections must be at least 1")
        self.client = client
        self.in_flight = in_flight
        self.max_flood_wait = max_flood_wait
        self.call_timeout = call_timeout
        self.connections = connections
        self.name = name or client.name
        self.load = 0  # streams open now
        self.flood_until = 0.0  # time.monotonic() until which Telegram told this bot to wait
        self._locations: collections.OrderedDict[tuple[int, int], Location] = collections.OrderedDict()
        self._sessions: dict[int, list] = collections.defaultdict(list)  # DC -> its media sessions
        self._busy: dict[object, int] = {}  # media session -> its calls in flight
        self._opening: dict[int, asyncio.Task] = {}  # DC -> the connection being opened there

    async def start(self) -> None:
        loop_bind(self.client, asyncio.get_running_loop())
        await self.client.start()
        session_tune(self.client)

    async def stop(self) -> None:
        for task in (opening := list(self._opening.values())):
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)
        sessions = self.media_sessions()
        self._sessions.clear()
        self._busy.clear()
        for session in sessions:
            await session.stop()
        if self.client.is_connected:
            await self.client.stop()

    def media_sessions(self) -> list:
        """Every media session open now, on every DC."""
        return [session for sessions in self._sessions.values() for session in sessions]

    @property
    def in_flood(self) -> bool:
        return time.monotonic() < self.flood_until

    async def admin_of(self, chat_id: int) -> BotAdmin:
        """Whether this bot is an admin of channel `chat_id` (what it needs to read its messages),
        as Telegram answers channels.getParticipant for the bot itself; a refusal (400/403: the
        channel unknown to the bot, the bot not in it) is `admin=False` with Telegram's words; any
        other error (a FloodWait, Telegram's trouble) is raised: it says nothing of the bot's place."""
        me = getattr(self.client, "me", None)
        who = f"@{me.username}" if me is not None and me.username else self.name
        try:
            channel = await self.client.resolve_peer(chat_id)
            answer = await self.client.invoke(
                raw.functions.channels.GetParticipant(channel=channel, participant=raw.types.InputPeerSelf()),
                sleep_threshold=0,
            )
        except (errors.BadRequest, errors.Forbidden) as exc:
            return BotAdmin(who, False, exc.ID)
        participant = answer.participant
        admin = isinstance(participant, (raw.types.ChannelParticipantAdmin, raw.types.ChannelParticipantCreator))
        return BotAdmin(who, admin, "" if admin else "a member, not an admin")

    async def info(self, chat_id: int, message_id: int) -> FileInfo:
        """The file message `message_id` of `chat_id` carries (FileGone: none); its location is
        kept for the reads that follow."""
        return (await self._location(chat_id, message_id)).info

    def read(self, chat_id: int, message_id: int, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes [start, end) of the file, in pieces, in order (module docstring): counted in
        `load` from now until it is exhausted, fails or is closed."""
        return Stream(self, self._bytes(chat_id, message_id, start, end))

    # --- the reads ------------------------------------------------------------------------------

    async def _bytes(self, chat_id: int, message_id: int, start: int, end: int) -> AsyncIterator[bytes]:
        location = await self._location(chat_id, message_id)
        size = location.info.size
        if not 0 <= start <= end <= size:
            raise ValueError(f"range [{start}, {end}) is not within the file's {size} bytes")
        plan = parts(start, end)
        pending: collections.deque[tuple[asyncio.Task, Part]] = collections.deque()
        sent = 0  # bytes handed on
        try:
            while True:
                while len(pending) < self.in_flight and (part := next(plan, None)) is not None:
                    pending.append((asyncio.ensure_future(self._part(chat_id, message_id, location, part)), part))
                if not pending:
                    return
                task, part = pending.popleft()
                try:
                    data = await task
                except FileGone as exc:
                    if sent:
                        raise StreamBroken(f"the file went away after {sent} bytes were read: {exc}") from exc
                    raise
                expected = max(0, min(part.limit, size - part.offset))
                if len(data) != expected:
                    raise StreamBroken(f"Telegram answered {len(data)} bytes at {part.offset}, expected {expected}")
                cut_from, cut_to = max(start, part.offset) - part.offset, min(end, part.offset + part.limit) - part.offset
                piece = data if (cut_from, cut_to) == (0, len(data)) else data[cut_from:cut_to]
                if piece:
                    sent += len(piece)
                    yield piece
        finally:
            for task, _ in pending:
                task.cancel()
            await asyncio.gather(*(task for task, _ in pending), return_exceptions=True)

    async def _part(self, chat_id: int, message_id: int, location: Location, part: Part) -> bytes:
        """One part's bytes, asked again as retry.read_after says (module docstring)."""
        attempt = migrations = refreshes = 0
        while True:
            generation = location.generation
            query = raw.functions.upload.GetFile(location=location.input, offset=part.offset, limit=part.limit)
            try:
                session = await self._session(location.dc_id)
                self._busy[session] = self._busy.get(session, 0) + 1
                try:
                    answer = await media_invoke(session, query, timeout=self.call_timeout)
                finally:
                    if session in self._busy:  # not stopped meanwhile
                        self._busy[session] -= 1
            except errors.FileReferenceExpired:
                refreshes += 1
                if refreshes > REFRESHES_MAX:
                    raise StreamBroken(f"the file reference expired {refreshes} times in a row") from None
                await self._refresh(chat_id, message_id, location, generation)
                continue
            except errors.FileMigrate as exc:
                migrations += 1
                if migrations > MIGRATIONS_MAX:
                    raise StreamBroken(f"FILE_MIGRATE {migrations} times in a row") from exc
                location.dc_id = int(exc.value)
                continue
            except Exception as exc:  # noqa: BLE001 - Telegram's refusals are mapped; anything else is raised
                await self._after(exc, attempt := attempt + 1)
                continue
            if not isinstance(answer, raw.types.upload.File):
                raise StreamBroken(f"upload.getFile answered {type(answer).__name__}")
            return answer.bytes

    async def _after(self, exc: Exception, attempt: int) -> None:
        """Wait before a call is asked again, or raise StreamBroken (retry.read_after); an exception
        that is not Telegram's is raised as it is."""
        error = error_to_domain(exc)
        if error is None:
            raise exc
        if isinstance(error, BotUnauthorized):
            raise StreamBroken(f"Telegram no longer accepts the bot: {error}") from exc
        if isinstance(error, FloodWait):
            self.flood_until = max(self.flood_until, time.monotonic() + error.seconds)
        decision = retry.read_after(error, attempt=attempt, max_flood_wait=self.max_flood_wait)
        if not decision.again:
            raise StreamBroken(str(error)) from exc
        await asyncio.sleep(decision.wait)

    async def _session(self, dc_id: int):
        """The media session on `dc_id` with the fewest calls in flight. When every open one has a
        call in flight, another is opened (up to `connections`) for the parts that come next; a
        part waits for an opening only when there is none yet. The opening is the Downloader's
        task, not the part's: a part cancelled meanwhile leaves it to finish (kurigram's session
        start is not cut halfway, which could swallow the cancellation)."""
        sessions = self._sessions[dc_id]
        idle = min(sessions, key=lambda s: self._busy.get(s, 0), default=None)
        if idle is not None and (self._busy.get(idle, 0) == 0 or len(sessions) >= self.connections):
            return idle
        opening = self._opening.get(dc_id)
        if opening is None:
            opening = self._opening[dc_id] = asyncio.ensure_future(self._open(dc_id))
            opening.add_done_callback(lambda task: self._opened(dc_id, task))
        if idle is not None:
            return idle
        return await asyncio.shield(opening)

    async def _open(self, dc_id: int):
        session = await media_session_open(self.client, dc_id, beside=next(iter(self._sessions[dc_id]), None))
        self._sessions[dc_id].append(session)
        self._busy[session] = 0
        return session

    def _opened(self, dc_id: int, task: asyncio.Task) -> None:
        if self._opening.get(dc_id) is task:
            del self._opening[dc_id]
        if not task.cancelled() and (exc := task.exception()) is not None:  # the next part asks again
            log.warning("stream bot %s: a connection to DC %s did not open: %r", self.name, dc_id, exc)

    # --- the locations ----------------------------------------------------------------------------

    async def _location(self, chat_id: int, message_id: int) -> Location:
        key = (chat_id, message_id)
        location = self._locations.get(key)
        if location is not None:
            self._locations.move_to_end(key)
            return location
        location = location_of(await self._message(chat_id, message_id))
        if location is None:
            raise FileGone(f"message {message_id} of {chat_id} is gone or carries no file")
        self._locations[key] = location
        while len(self._locations) > LOCATIONS_MAX:
            self._locations.popitem(last=False)
        return location

    async def _refresh(self, chat_id: int, message_id: int, location: Location, generation: int) -> None:
        """A fresh file reference for `location`, from the message read again (once for all the
        parts that met the expired one). FileGone when the message or its file is gone."""
        async with location.lock:
            if location.generation != generation:
                return  # another part refreshed it meanwhile
            fresh = location_of(await self._message(chat_id, message_id))
            if fresh is None or fresh.info.file_unique_id != location.info.file_unique_id:
                self._locations.pop((chat_id, message_id), None)
                raise FileGone(f"message {message_id} of {chat_id} is gone or carries another file")
            location.input = fresh.input
            location.generation += 1

    async def _message(self, chat_id: int, message_id: int):
        """The raw message (MessageEmpty when deleted), read on the bot's own session."""
        attempt = 0
        while True:
            try:
                ids = [raw.types.InputMessageID(id=message_id)]
                if chat_id < 0:
                    peer = await self.client.resolve_peer(chat_id)
                    channel = raw.types.InputChannel(channel_id=peer.channel_id, access_hash=peer.access_hash)
                    answer = await self.client.invoke(
                        raw.functions.channels.GetMessages(channel=channel, id=ids), sleep_threshold=0
                    )
                else:
                    answer = await self.client.invoke(raw.functions.messages.GetMessages(id=ids), sleep_threshold=0)
                return answer.messages[0] if answer.messages else None
            except (errors.MessageIdInvalid, errors.MsgIdInvalid):
                return None
            except Exception as exc:  # noqa: BLE001 - as _part
                await self._after(exc, attempt := attempt + 1)


class Stream:
    """`Downloader.read`'s iterator: the reads, counted in the downloader's `load` while open."""

    def __init__(self, downloader: Downloader, chunks):
        self._downloader = downloader
        self._chunks = chunks
        self._open = True
        downloader.load += 1

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._chunks.__anext__()
        except BaseException:
            self._release()
            raise

    async def aclose(self) -> None:
        try:
            await self._chunks.aclose()
        finally:
            self._release()

    def __del__(self) -> None:
        # A stream dropped before it was read to its end or closed (a request that failed before
        # its first byte) is no longer counted; its generator, never started or already ended by
        # Python's collection of it, holds no call in flight.
        self._release()

    def _release(self) -> None:
        if self._open:
            self._open = False
            self._downloader.load -= 1


@dataclass(frozen=True)
class BotAdmin:
    """Whether a stream bot is an admin of a channel, and if not, why (Telegram's words)."""

    bot: str  # the bot's @username (its Downloader's name before it signed in)
    admin: bool
    problem: str = ""  # Telegram's error (CHANNEL_INVALID) or what else is wrong
    signed_in: bool = True  # False: Telegram refused the token (`problem` says how)


def slot_take(sessions_dir: Path, prefix: str = "stream") -> tuple[str, object]:
    """The first free `<prefix>-<n>` under `sessions_dir`, and the open file whose exclusive lock
    keeps it this process's until closed (or the process ends)."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        handle = open(sessions_dir / f"{prefix}-{n}.lock", "w")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            n += 1
            continue
        return f"{prefix}-{n}", handle


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
        slot, lock = slot_take(Path(sessions_dir))
        clients = [
            client_build(name=f"{slot}-{bot_id}", api_id=api_id, api_hash=api_hash, bot_token=token.strip(),
                         workdir=Path(sessions_dir), no_updates=True, offline=offline, in_memory=in_memory)
            for token, bot_id in zip(tokens, ids, strict=True)
        ]  # fmt: skip
        return cls([Downloader(client, **options) for client in clients], slot=lock)

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
