"""Stored files read back from Telegram, for the streaming process: any byte range of a file a
message of the storage channel carries, in order, read ahead with several upload.getFile calls
in flight.

A `Downloader` is one bot's reader in one process: its own kurigram client (never the session file
of runbot or a worker), up to `connections` media sessions per data centre (kurigram.
media_session_open; each part to the one with the fewest calls in flight), and the files' locations
cached by message. `read` yields exactly bytes [start, end) of a file: the range is cut into parts
Telegram accepts (limits.DOWNLOAD_*; an unaligned start or end is read aligned and trimmed; the
first part small: `parts`), up to `in_flight` of them asked at once, each handed on in order once the consumer asks for the next. So
at most `in_flight` parts (1 MB each at most) are held per stream, a slow consumer slows the reads,
and closing or cancelling the iterator cancels what is in flight. The parts a stream asks ahead of
the one it hands on next also take a share of the process's `ReadAhead` budget (the pool's: one
for every stream of the process), given back as each part is handed on: a stream always reads its
next part, and reads further ahead only while the budget lasts, so the process's memory is bounded
however many streams are open (about one part per stream, plus the budget).

A part Telegram refuses is asked again from its own offset, so no byte is ever skipped, repeated or
taken from elsewhere: an expired file reference is refreshed by reading the message again
(channels.getMessages); FILE_MIGRATE_X moves the file's reads to a media session on DC X; a
FloodWait up to `max_flood_wait` is waited out (the pool skips a bot while it waits); a dropped
connection or a lost answer is asked again after a back-off (retry.read_after). A message deleted,
or its media gone, is `FileGone` before the first byte and `StreamBroken` after; so is anything
else that cannot be recovered: the consumer ends its response short, and a downloader resumes.

Several bots read together through a `DownloaderPool` (botapp/telegram/download_pool.py): one
Downloader per bot token, each with its own locations (Telegram ties them to the bot's account).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from pyrogram import Client, errors, raw
from pyrogram.file_id import FileUniqueId, FileUniqueType

from botapp.metrics import GETFILE_ERRORS, GETFILE_SECONDS
from botapp.telegram import retry
from botapp.telegram.gateway import BotUnauthorized, FloodWait
from botapp.telegram.kurigram import loop_bind, media_invoke, media_session_open, session_tune
from botapp.telegram.limits import DOWNLOAD_ALIGN, DOWNLOAD_ALIGN_PRECISE, DOWNLOAD_CHUNK
from botapp.telegram.request import error_to_domain

log = logging.getLogger(__name__)

# upload.getFile calls one stream keeps in flight. To keep a connection busy, the parts in flight
# must cover its bandwidth times its round trip, plus the one being received: with a far data
# centre, 4 (TG-FileStreamBot's choice) leave the stream waiting on each answer's last bytes
# (docs/benchmarks.md, "Stream and download links"); 6 keep a fast connection full.
IN_FLIGHT = 6
# The first part of a read (`parts`): small, so a player's seek gets its first bytes after a short
# answer; a multiple of DOWNLOAD_ALIGN.
HEAD_PART = 64 * 1024
# MiB of parts a process's streams may read ahead of what they hand on next, all together
# (ReadAhead; STREAM_READ_AHEAD_MB).
READ_AHEAD_MB = 128
# How long one upload.getFile waits for its answer before it is asked again (a lost answer): kurigram's
# own wait for any request (Session.WAIT_TIMEOUT), unless the process sets its own.
CALL_TIMEOUT = 15.0
# Media connections one bot opens to one DC. Each carries its answers one after another, so where a
# connection's bandwidth is capped, one connection caps every stream of the bot on that DC together;
# the parts in flight go to the connection with the fewest. As many as one stream's calls in flight
# (docs/design.md, the reader: measured with bench/download_connections.py).
CONNECTIONS = IN_FLIGHT
# The connections a part goes on: the first part of each read (the one holding its first byte) on
# a connection of its own per DC, "head", never behind the 1 MiB answers other streams read ahead,
# nor behind answers still on their way for a stream its client left (MTProto answers what it was
# asked; kurigram cannot take a request back); every other part on the "bulk" connections.
HEAD, BULK = "head", "bulk"
HEAD_CONNECTIONS = 1  # first parts are small (HEAD_PART): one connection per DC carries them
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
    precise: bool = False  # asked with the precise flag (1 KB steps: `parts`)


def parts(start: int, end: int) -> Iterator[Part]:
    """The parts that cover [start, end), in order, within Telegram's rules (limits.DOWNLOAD_*).
    The first is HEAD_PART from `start` rounded down to 4 KB: a seek's first bytes come after a
    small part's round trip, not a whole MiB's. The next reaches the next 1 MiB boundary (or
    `end`), then whole 1 MiB chunks, the last cut to the smallest limit that reaches `end`. A part
    that is not a power of two at a multiple of itself is asked `precise` (1 KB steps): so a read
    from inside a MiB costs one call more than whole chunks would, and never reads more than 4 KB
    before `start`."""
    if start >= end:
        return
    pos = start - start % DOWNLOAD_ALIGN
    room = HEAD_PART
    while pos < end:
        stop = min(end, (pos // DOWNLOAD_CHUNK + 1) * DOWNLOAD_CHUNK, pos + room)
        limit = DOWNLOAD_ALIGN
        while limit < stop - pos:
            limit *= 2
        if pos % limit == 0 and pos // DOWNLOAD_CHUNK == (pos + limit - 1) // DOWNLOAD_CHUNK:
            yield Part(pos, limit)  # a standard part (at the end of the file it may reach past it)
        else:
            limit = -(-(stop - pos) // DOWNLOAD_ALIGN_PRECISE) * DOWNLOAD_ALIGN_PRECISE
            yield Part(pos, limit, precise=True)
        pos += limit
        room = DOWNLOAD_CHUNK


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


class ReadAhead:
    """A process's budget of parts read ahead (module docstring), in parts of up to 1 MiB: taken
    without waiting (a stream that finds none left reads one part at a time until some is given
    back), so no stream ever waits on another's."""

    def __init__(self, parts: int):
        if parts < 0:
            raise ValueError("a read-ahead budget is at least 0 parts")
        self.parts = parts
        self.left = parts

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def give_back(self, n: int = 1) -> None:
        self.left += n
        if self.left > self.parts:
            raise RuntimeError("more read-ahead given back than taken")


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
        read_ahead: ReadAhead | None = None,
        name: str = "",
    ):
        if in_flight < 1 or connections < 1:
            raise ValueError("in_flight and connections must be at least 1")
        self.client = client
        self.in_flight = in_flight
        self.max_flood_wait = max_flood_wait
        self.call_timeout = call_timeout
        self.connections = connections
        self.read_ahead = read_ahead if read_ahead is not None else ReadAhead(READ_AHEAD_MB)
        self.name = name or client.name
        self.load = 0  # streams open now
        self.flood_until = 0.0  # time.monotonic() until which Telegram told this bot to wait
        self._locations: collections.OrderedDict[tuple[int, int], Location] = collections.OrderedDict()
        self._sessions: dict[tuple[int, str], list] = collections.defaultdict(list)  # (DC, lane) -> its media sessions
        self._busy: dict[object, int] = {}  # media session -> its calls in flight
        self._opening: dict[tuple[int, str], asyncio.Task] = {}  # (DC, lane) -> the connection being opened
        self._signing_in: dict[int, asyncio.Lock] = {}  # DC -> held while a connection to it opens

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
        ahead = 0  # parts of `pending` counted in the process's read-ahead budget
        budget = self.read_ahead
        sent = 0  # bytes handed on
        part = next(plan, None)
        try:
            while True:
                # The next part to hand on is always asked; each further one takes a share of the
                # budget, or waits until this stream has handed on what it holds.
                while part is not None and len(pending) < self.in_flight and (not pending or budget.take()):
                    ahead += bool(pending)
                    lane = HEAD if part.offset + part.limit > start and part.offset <= start else BULK
                    pending.append((asyncio.ensure_future(self._part(chat_id, message_id, location, part, lane)), part))
                    part = next(plan, None)
                if not pending:
                    return
                task, done = pending.popleft()
                try:
                    data = await task
                except FileGone as exc:
                    if sent:
                        raise StreamBroken(f"the file went away after {sent} bytes were read: {exc}") from exc
                    raise
                expected = max(0, min(done.limit, size - done.offset))
                if len(data) != expected:
                    raise StreamBroken(f"Telegram answered {len(data)} bytes at {done.offset}, expected {expected}")
                cut_from, cut_to = max(start, done.offset) - done.offset, min(end, done.offset + done.limit) - done.offset
                piece = data if (cut_from, cut_to) == (0, len(data)) else data[cut_from:cut_to]
                del data
                if piece:
                    sent += len(piece)
                    yield piece
                del piece
                if ahead:  # handed on: the part now next no longer reads ahead
                    ahead -= 1
                    budget.give_back()
        finally:
            budget.give_back(ahead)
            for task, _ in pending:
                task.cancel()
            await asyncio.gather(*(task for task, _ in pending), return_exceptions=True)

    async def _part(self, chat_id: int, message_id: int, location: Location, part: Part, lane: str = BULK) -> bytes:
        """One part's bytes, on a connection of `lane`, asked again as retry.read_after says (module
        docstring)."""
        attempt = migrations = refreshes = 0
        while True:
            generation = location.generation
            query = raw.functions.upload.GetFile(
                location=location.input, offset=part.offset, limit=part.limit, precise=part.precise or None
            )
            try:
                session = await self._session(location.dc_id, lane)
                self._busy[session] = self._busy.get(session, 0) + 1
                try:
                    answer = await self._get(session, query)
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

    async def _get(self, session, query):
        """One upload.getFile, timed and counted per bot (botapp/metrics.py)."""
        started = time.monotonic()
        try:
            answer = await media_invoke(session, query, timeout=self.call_timeout)
        except Exception as exc:
            GETFILE_ERRORS.labels(self.name, getattr(exc, "ID", None) or type(exc).__name__).inc()
            raise
        GETFILE_SECONDS.labels(self.name).observe(time.monotonic() - started)
        return answer

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

    async def _session(self, dc_id: int, lane: str = BULK):
        """The media session of `lane` on `dc_id` with the fewest calls in flight. When every open
        one has a call in flight, another is opened (up to `connections`; HEAD_CONNECTIONS for the
        head lane) for the parts that come next; a part waits for an opening only when there is
        none yet. The opening is the Downloader's task, not the part's: a part cancelled meanwhile
        leaves it to finish (kurigram's session start is not cut halfway, which could swallow the
        cancellation)."""
        key = (dc_id, lane)
        sessions = self._sessions[key]
        most = HEAD_CONNECTIONS if lane == HEAD else self.connections
        idle = min(sessions, key=lambda s: self._busy.get(s, 0), default=None)
        if idle is not None and (self._busy.get(idle, 0) == 0 or len(sessions) >= most):
            return idle
        opening = self._opening.get(key)
        if opening is None:
            opening = self._opening[key] = asyncio.ensure_future(self._open(key))
            opening.add_done_callback(lambda task: self._opened(key, task))
        if idle is not None:
            return idle
        return await asyncio.shield(opening)

    async def _open(self, key: tuple[int, str]):
        dc_id = key[0]
        # One at a time per DC: the first signs the bot in there, the next share its key (every lane).
        async with self._signing_in.setdefault(dc_id, asyncio.Lock()):
            beside = next((s for (dc, _), sessions in self._sessions.items() if dc == dc_id for s in sessions), None)
            session = await media_session_open(self.client, dc_id, beside=beside)
        self._sessions[key].append(session)
        self._busy[session] = 0
        return session

    def _opened(self, key: tuple[int, str], task: asyncio.Task) -> None:
        dc_id = key[0]
        if self._opening.get(key) is task:
            del self._opening[key]
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
