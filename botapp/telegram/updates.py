"""Pyrogram updates -> domain updates -> the Router, on a worker thread (services are sync Django).

The pump also keeps runbot's place in Telegram's update stream (botapp/telegram/position.py): it
counts each update handled once its handler has returned, stores that position about once a second
(`PositionStore`), and at start asks Telegram for everything after it (getDifference), so what users
sent while runbot was down, or while it was handling what it had when it was killed, is handled
now. An update that comes again (it had been handled, but the stored position was a moment old) is
recognised by the router (services/updates.py: `update_claim`). docs/reliability.md#updates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import sentry_sdk
from django.conf import settings
from django.db import close_old_connections
from pyrogram import Client, errors, filters, raw
from pyrogram import types as ptypes
from pyrogram.handlers import CallbackQueryHandler, ChatJoinRequestHandler, MessageHandler, RawUpdateHandler

from botapp.db import connections_quiet_trusted
from botapp.metrics import UPDATE_SECONDS
from botapp.telegram.entities import entities_html
from botapp.telegram.gateway import Button, CallbackQuery, ChannelPost, IncomingMessage, Media, ReplyTo, TgUser
from botapp.telegram.handler_pool import DEFAULT, PriorityPool
from botapp.telegram.kurigram import (
    Missed,
    channel_difference_get,
    difference_get,
    updates_feed,
    updates_track,
)
from botapp.telegram.position import PTS, QTS, Position, PositionState, Span

log = logging.getLogger(__name__)


def clean(text: str | None) -> str:
    """Text as Courier stores it: Telegram allows NUL and unpaired surrogates in names and
    messages, PostgreSQL refuses them (and one such name would fail every message of that user)."""
    if not text:
        return ""
    return "".join(ch for ch in text if ch != "\x00" and not 0xD800 <= ord(ch) <= 0xDFFF)


def user_from(u: ptypes.User, access_hash: int | None = None) -> TgUser:
    return TgUser(
        id=u.id,
        first_name=clean(u.first_name),
        last_name=clean(u.last_name),
        username=clean(u.username),
        language_code=clean(u.language_code),
        access_hash=access_hash,
        is_bot=bool(u.is_bot),
    )


async def access_hash_of(client: Client, user_id: int) -> int | None:
    """The user's access hash, which kurigram cached from this very update (no call to Telegram)."""
    try:
        peer = await client.storage.get_peer_by_id(user_id)
    except KeyError:
        return None
    # 0: only what a send to a user with no stored hash put there (request.ZERO_HASH), never theirs.
    return getattr(peer, "access_hash", None) or None


def forward_origin(m: ptypes.Message) -> tuple[int | None, int | None]:
    """(channel id, message id) when `m` was forwarded from a channel."""
    origin = getattr(m, "forward_origin", None)
    origin_chat = getattr(origin, "chat", None) if origin else None
    if origin_chat is None:
        return None, None
    return origin_chat.id, getattr(origin, "message_id", None)


def reply_from(m: ptypes.Message) -> ReplyTo | None:
    """What `m` replies to; kurigram fetched the replied-to message while parsing (when it could)."""
    if not m.reply_to_message_id:
        return None
    replied = m.reply_to_message
    if replied is None or replied.empty:
        return ReplyTo(message_id=m.reply_to_message_id)
    chat_id, message_id = forward_origin(replied)
    return ReplyTo(
        message_id=m.reply_to_message_id,
        media_group_id=replied.media_group_id,
        forward_from_chat_id=chat_id,
        forward_from_message_id=message_id,
    )


MEDIA_KINDS = ("photo", "video", "document", "animation", "audio")


def channel_post_from(m: ptypes.Message) -> ChannelPost:
    text = m.text or m.caption
    media = None
    for kind in MEDIA_KINDS:
        found = getattr(m, kind, None)
        if found is not None:
            media = Media(kind, found.file_id)
            break
    return ChannelPost(
        chat_id=m.chat.id,
        message_id=m.id,
        text=clean(text),
        html=clean(entities_html(text)),
        media=media,
        media_group_id=m.media_group_id,
    )


def message_from(m: ptypes.Message, access_hash: int | None = None) -> IncomingMessage:
    origin = getattr(m, "forward_origin", None)
    origin_chat = getattr(origin, "chat", None) if origin else None
    return IncomingMessage(
        chat_id=m.chat.id,
        message_id=m.id,
        user=user_from(m.from_user, access_hash),
        text=clean(m.text or m.caption),
        has_media=m.media is not None,
        forward_from_chat_id=origin_chat.id if origin_chat else None,
        forward_from_message_id=getattr(origin, "message_id", None) if origin_chat else None,
        reply_to=reply_from(m),
        media_group_id=m.media_group_id,
    )


def callback_from(q: ptypes.CallbackQuery, access_hash: int | None = None) -> CallbackQuery | None:
    if q.message is None or not isinstance(q.data, str):
        return None  # inline-mode or game queries: not ours
    return CallbackQuery(
        id=q.id,
        user=user_from(q.from_user, access_hash),
        chat_id=q.message.chat.id,
        message_id=q.message.id,
        data=clean(q.data),
        buttons=buttons_from(q.message.reply_markup),
    )


def buttons_from(reply_markup) -> tuple[tuple[Button, ...], ...]:
    """A message's inline keyboard as domain buttons (link and callback buttons; others left out)."""
    if not isinstance(reply_markup, ptypes.InlineKeyboardMarkup):
        return ()
    rows = []
    for row in reply_markup.inline_keyboard:
        buttons = []
        for b in row:
            if b.url:
                buttons.append(Button(b.text, url=b.url))
            elif isinstance(b.callback_data, str):
                buttons.append(Button(b.text, callback_data=b.callback_data))
        rows.append(tuple(buttons))
    return tuple(rows)


class Conversation(Protocol):
    """Where the pump hands domain updates: the router (botapp/bot/router.py). Each call runs on a
    worker thread of the pump."""

    def channel_post_sources(self) -> frozenset[int]: ...
    def handle_message(self, msg: IncomingMessage) -> None: ...
    def handle_callback(self, cq: CallbackQuery) -> None: ...
    def handle_channel_post(self, post: ChannelPost) -> None: ...
    def handle_join_request(self, *, channel_id: int, user_id: int) -> None: ...
    def handle_bot_stopped(self, *, user_id: int, stopped: bool) -> None: ...
    def update_priority(self, update: object) -> int: ...  # on the loop: no database, no waiting
    def admit(self, update: object) -> bool: ...  # on a gate thread, before the update waits for a handler thread


# Seconds between two writes of runbot's position while updates come: after a kill, at most about
# this much work already handled is fetched again (and recognised as handled by the router).
POSITION_FLUSH = 1.0
# Seconds before a getDifference that failed (Telegram unreachable, a FloodWait) is asked again.
RECOVER_RETRY = 5.0


class PositionStore(Protocol):
    """Where runbot keeps its position between runs (services/updates.py: `UpdatePositions`, in
    PostgreSQL), and its claims on updates (`reset` forgets both). Called on a thread of the
    pump's own, never on the event loop."""

    def load(self) -> PositionState | None: ...
    def save(self, state: PositionState) -> None: ...
    def reset(self) -> None: ...


# Threads that run the router's gates (`admit`): a Redis call or two each, and now and then an
# answer to a user refused (once a window). Two keep up with a flood of hundreds a second.
GATE_THREADS = 2


class UpdatePump:
    """Hands each update to the router on a bounded thread pool; refuses new ones once draining.
    With a `positions` store it keeps runbot's place in the update stream and, at `resume`, fetches
    what was missed; without one (tests that do not restart), updates missed while down are not
    fetched."""

    def __init__(self, router: Conversation | None, *, threads: int = 8, positions: PositionStore | None = None):
        self.router = router
        # Updates waiting for a thread are taken by priority (the router's), not in arrival order.
        self.executor = PriorityPool(threads, name="update")
        # The router's gates (fair use, owner-only mode) run first, on threads of their own: an
        # update they refuse (a flood's) never waits for a handler thread, nor holds one.
        # One handler thread: one gate thread too (updates go through the gates in their order).
        self.gates = ThreadPoolExecutor(max_workers=min(GATE_THREADS, threads), thread_name_prefix="gate")
        self.accepting = True
        self.positions = positions
        self.position = Position()
        # Its own thread: the position is written even while every handler thread is busy.
        self._keeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="position") if positions else None
        self._saved: PositionState | None = None
        self._cursors: dict[int, PositionState] = {}  # per sequence: where fetching what was missed has got to
        self._tasks: list[asyncio.Task] = []
        self.recovered = 0  # updates fetched with getDifference since start
        # (chat, message id) of the private messages among them not dispatched yet: those are
        # marked `recovered`, so the gates do not count one handled before the restart again.
        self.replayable: set[tuple[int, int]] = set()

    def register(self, client: Client) -> None:
        """Before `client.start()`: the handlers, and (with a position store) the counting of updates handled."""
        client.add_handler(MessageHandler(self._on_message, filters.private & filters.incoming & ~filters.service))
        client.add_handler(CallbackQueryHandler(self._on_callback))
        client.add_handler(ChatJoinRequestHandler(self._on_join_request))
        client.add_handler(RawUpdateHandler(self._on_raw), group=1)  # seen alongside the parsed handlers
        # Posts in the channels the router acts on: the storage channel (share links) and the
        # broadcast source channel (posts starting with the marker).
        channels = self.router.channel_post_sources()
        if channels:
            client.add_handler(
                MessageHandler(self._on_channel_post, filters.channel & ~filters.service & filters.chat(sorted(channels)))
            )
        if self.positions is not None:
            updates_track(client, self.position)

    async def resume(self, client: Client) -> None:
        """After `client.start()`: the stored position (on first start, kurigram's own from its
        session file), then everything Telegram got after it handed to the dispatcher; from now on
        the position is written as updates are handled."""
        if self.positions is None:
            return
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(self._keeper, _with_connection, self.positions.load)
        now = await client.invoke(raw.functions.updates.GetState())
        if state is not None and (state.bot_id != client.me.id or state.pts > now.pts or state.qts > now.qts):
            # Another bot's numbers, or a Telegram whose are lower than ours (they never go down on
            # one account): nothing of this bot's can be fetched from them, and its claims mean nothing.
            log.warning("the stored update position (bot %s, pts %s) is not this bot's (%s, pts %s): starting afresh",
                        state.bot_id, state.pts, client.me.id, now.pts)  # fmt: skip
            await loop.run_in_executor(self._keeper, _with_connection, self.positions.reset)
            state = PositionState(pts=now.pts, qts=now.qts, date=now.date, seq=now.seq)
        if state is None:
            state = await _state_first(client, now)
        state.bot_id = client.me.id
        self.position.start(state)
        self._cursors = {PTS: state} | {box: PositionState(pts, 0, 0) for box, pts in state.channels.items()}
        self._tasks.append(loop.create_task(self._keep()))
        for box in list(self._cursors):
            await self._recover(client, box)
        log.info("runbot resumed at pts=%s qts=%s: %s updates fetched that came meanwhile", state.pts, state.qts, self.recovered)

    async def _recover(self, client: Client, box: int) -> None:
        """Fetch what sequence `box` got after its cursor, slice by slice, into the dispatcher (the
        stored position stays at the cursor meanwhile). When Telegram cannot answer now, ask again
        after RECOVER_RETRY; a channel Telegram refuses for good is no longer followed."""
        try:
            while True:
                cursor = self._cursors[box]
                self._hold(box, cursor)
                if box == PTS:
                    missed = await difference_get(client, pts=cursor.pts, qts=cursor.qts, date=cursor.date)
                    spans = [Span(PTS, cursor.pts, missed.pts), Span(QTS, cursor.qts, missed.qts or cursor.qts)]
                else:
                    missed = await channel_difference_get(client, box, pts=cursor.pts)
                    spans = [Span(box, cursor.pts, missed.pts)]
                self._fetched(client, box, cursor, missed, spans)
                if missed.final:
                    for held in (box, QTS) if box == PTS else (box,):
                        self.position.release(held)
                    return
        except (errors.RPCError, OSError, TimeoutError, KeyError, ValueError) as exc:  # Telegram's answer, the network
            if box != PTS and _refused_for_good(exc):
                # The bot was removed from the channel, or it is gone: kurigram's recover_gaps drops
                # such a channel too. Its posts from while runbot was down are not fetched.
                log.warning("channel %s: its missed posts cannot be fetched (%r); no longer followed", box, exc)
                self.position.forget(box)
                return
            log.warning("updates missed while runbot was down: asking again in %.0f s (box=%s): %r", RECOVER_RETRY, box, exc)
            self._tasks.append(asyncio.get_running_loop().create_task(self._recover_later(client, box)))
        except Exception:
            log.exception("fetching the updates missed while runbot was down failed (box=%s): a bug", box)
            raise

    def _hold(self, box: int, cursor: PositionState) -> None:
        self.position.hold(box, cursor.pts)
        if box == PTS:
            self.position.hold(QTS, cursor.qts)

    def _fetched(self, client: Client, box: int, cursor: PositionState, missed: Missed, spans: list[Span]) -> None:
        if missed.too_long:
            log.error(
                "Telegram will not send what box=%s got between pts %s and %s: those updates are lost",
                box,
                cursor.pts,
                missed.pts,
            )
        ticket = self.position.received([s for s in spans if s.hi > s.lo], packets=len(missed.packets))
        self.replayable.update(_private_messages(missed.packets))
        updates_feed(client, missed.packets, ticket)
        self.recovered += len(missed.packets)
        if box == PTS:
            self.position.dated(missed.date, missed.seq)
        self._cursors[box] = PositionState(
            pts=missed.pts, qts=missed.qts or cursor.qts, date=missed.date or cursor.date, seq=missed.seq
        )

    async def _recover_later(self, client: Client, box: int) -> None:
        await asyncio.sleep(RECOVER_RETRY)
        await self._recover(client, box)

    async def _keep(self) -> None:
        """Write the position once a second while it moves (holes close on their own time)."""
        while True:
            await asyncio.sleep(POSITION_FLUSH)
            if self.position.changed or self.position.holes():
                await self.position_save()

    async def position_save(self) -> None:
        """Write the position now if it moved; a failure (PostgreSQL away) is logged and retried by the next write."""
        state = self.position.snapshot()
        if state is None or state == self._saved:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._keeper, _with_connection, self.positions.save, state)
        except Exception:
            log.exception("runbot's update position was not stored (pts=%s): trying again in %.0f s", state.pts, POSITION_FLUSH)
            self.position.changed = True
            return
        self._saved = state

    async def submit(self, handle: Callable[[object], None], update: object) -> None:
        """Run `handle(update)` (a router call) on a worker thread: services are sync Django. The
        router says which waiting updates go first (`update_priority`)."""
        arrived = time.monotonic()  # the update-to-reply latency counts the wait for a thread too
        if self.router is None:
            await asyncio.wrap_future(self.executor.submit_first(DEFAULT, _with_db, handle, update, arrived))
            return
        priority = self.router.update_priority(update)
        if not await asyncio.get_running_loop().run_in_executor(self.gates, _admitted, self.router.admit, update):
            return
        await asyncio.wrap_future(self.executor.submit_first(priority, _with_db, handle, update, arrived))

    async def _on_message(self, client: Client, message: ptypes.Message) -> None:
        if not self.accepting or message.from_user is None:
            return
        update = message_from(message, await access_hash_of(client, message.from_user.id))
        key = (update.chat_id, update.message_id)
        if key in self.replayable:  # fetched with getDifference: maybe handled before the restart
            self.replayable.discard(key)
            update = dataclasses.replace(update, recovered=True)
        await self.submit(self.router.handle_message, update)

    async def _on_channel_post(self, client: Client, message: ptypes.Message) -> None:
        if not self.accepting or message.service:
            return
        await self.submit(self.router.handle_channel_post, channel_post_from(message))

    async def _on_callback(self, client: Client, query: ptypes.CallbackQuery) -> None:
        update = callback_from(query, await access_hash_of(client, query.from_user.id))
        if not self.accepting or update is None:
            return
        await self.submit(self.router.handle_callback, update)

    async def _on_join_request(self, client: Client, request: ptypes.ChatJoinRequest) -> None:
        if not self.accepting:
            return
        await self.submit(
            lambda _: self.router.handle_join_request(channel_id=request.chat.id, user_id=request.from_user.id), None
        )

    async def _on_raw(self, client: Client, update, users, chats) -> None:
        # Telegram tells a bot when a user blocks (or unblocks) it: keep the user's state true at once.
        if not self.accepting or not isinstance(update, raw.types.UpdateBotStopped):
            return
        await self.submit(lambda _: self.router.handle_bot_stopped(user_id=update.user_id, stopped=bool(update.stopped)), None)

    async def drain(self) -> None:
        """Stop taking updates and wait for the ones in flight (their replies still need the loop).
        The position stops moving first: what is handled from now on is fetched again at the next
        start and recognised, what is not handled is handled then."""
        self.position.close()
        self.accepting = False
        await asyncio.get_running_loop().run_in_executor(None, self.gates.shutdown, True)
        await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)

    async def close(self) -> None:
        """After the client has stopped: the last position written, the pump's tasks ended."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._keeper is not None:
            await self.position_save()
            self._keeper.shutdown(wait=True)


async def _state_first(client: Client, now: raw.types.updates.State) -> PositionState:
    """runbot's first start with a stored position: kurigram's own (its session file has the state
    of its last clean stop, or of the session's first start) when it is not ahead of Telegram's,
    else Telegram's state `now`."""
    stored = await client.storage.get_update_states(0)
    if stored and stored[0].pts is not None and stored[0].pts <= now.pts:
        s = stored[0]
        return PositionState(pts=s.pts, qts=min(s.qts or 0, now.qts), date=s.date or 0, seq=s.seq or 0)
    return PositionState(pts=now.pts, qts=now.qts, date=now.date, seq=now.seq)


def _refused_for_good(exc: Exception) -> bool:
    """Telegram refused the request itself (a 400 or 403: CHANNEL_PRIVATE, CHANNEL_INVALID), or
    kurigram does not know the channel: asking again changes nothing."""
    return isinstance(exc, KeyError | ValueError) or (isinstance(exc, errors.RPCError) and exc.CODE in (400, 403))


def _with_connection(fn, *args):
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


def _with_db(handle, update, arrived: float) -> None:
    """Like a Django request: drop broken or expired connections before and after (a quiet one is
    not asked "SELECT 1" first: botapp/db.py, connections_quiet_trusted)."""
    close_old_connections()
    connections_quiet_trusted()
    try:
        handle_reported(handle, update, arrived=arrived)
    finally:
        close_old_connections()


def _private_messages(packets: list[tuple]) -> set[tuple[int, int]]:
    """(chat, message id) of the messages users sent the bot in private chats among `packets`."""
    found = set()
    for update, *_ in packets:
        message = getattr(update, "message", None)
        if (
            isinstance(update, raw.types.UpdateNewMessage)
            and isinstance(message, raw.types.Message)
            and isinstance(message.peer_id, raw.types.PeerUser)
            and not message.out
        ):
            found.add((message.peer_id.user_id, message.id))
    return found


def _admitted(admit, update) -> bool:
    """`admit(update)` with the database connection looked after as for a handler (_with_db)."""
    close_old_connections()
    connections_quiet_trusted()
    try:
        return admit(update)
    finally:
        close_old_connections()


def handle_reported(handle, update, *, arrived: float) -> None:
    """`handle(update)`, timed from `arrived` (time.monotonic() when the update came in) to the end
    of its handling; an error reported meanwhile names the update (its kind and ids, never its
    text). Without SENTRY_DSN the scope costs next to nothing."""
    kind = type(update).__name__ if update is not None else "event"
    try:
        with sentry_sdk.new_scope() as report:
            report.set_tag("update", kind)
            report.set_context("update", update_ids(update))
            text = getattr(update, "text", "")
            if text:
                # The reports' scrubber (config/error_reports.py) takes the texts out of the event
                # and replaces each wherever it appears (an exception's message may quote them).
                report.set_extra(settings.ERROR_REPORTS_TEXTS_EXTRA, [text])
            handle(update)
    finally:
        UPDATE_SECONDS.labels(kind).observe(time.monotonic() - arrived)


def update_ids(update) -> dict:
    """Which update this is, for an error report: ids only."""
    if isinstance(update, IncomingMessage):
        return {"user_id": update.user.id, "chat_id": update.chat_id, "message_id": update.message_id}
    if isinstance(update, CallbackQuery):
        return {"user_id": update.user.id, "chat_id": update.chat_id, "message_id": update.message_id, "data": update.data}
    if isinstance(update, ChannelPost):
        return {"chat_id": update.chat_id, "message_id": update.message_id}
    return {}
