"""Pyrogram updates -> domain updates -> the Router, on a worker thread (services are sync Django)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import sentry_sdk
from django.db import close_old_connections
from pyrogram import Client, filters, raw
from pyrogram import types as ptypes
from pyrogram.handlers import CallbackQueryHandler, ChatJoinRequestHandler, MessageHandler, RawUpdateHandler

from botapp.metrics import UPDATE_SECONDS
from botapp.telegram.entities import entities_html
from botapp.telegram.gateway import Button, CallbackQuery, ChannelPost, IncomingMessage, Media, ReplyTo, TgUser
from config.error_reports import TEXTS_TO_HIDE

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
    )


async def access_hash_of(client: Client, user_id: int) -> int | None:
    """The user's access hash, which kurigram cached from this very update (no call to Telegram)."""
    try:
        peer = await client.storage.get_peer_by_id(user_id)
    except KeyError:
        return None
    return getattr(peer, "access_hash", None)


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


class UpdatePump:
    """Hands each update to the router on a bounded thread pool; refuses new ones once draining."""

    def __init__(self, router: Conversation | None, *, threads: int = 8):
        self.router = router
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="update")
        self.accepting = True

    def register(self, client: Client) -> None:
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

    async def submit(self, handle: Callable[[object], None], update: object) -> None:
        """Run `handle(update)` (a router call) on a worker thread: services are sync Django."""
        arrived = time.monotonic()  # the update-to-reply latency counts the wait for a thread too
        await asyncio.get_running_loop().run_in_executor(self.executor, _with_db, handle, update, arrived)

    async def _on_message(self, client: Client, message: ptypes.Message) -> None:
        if not self.accepting or message.from_user is None:
            return
        update = message_from(message, await access_hash_of(client, message.from_user.id))
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
        """Stop taking updates and wait for the ones in flight (their replies still need the loop)."""
        self.accepting = False
        await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)


def _with_db(handle, update, arrived: float) -> None:
    """Like a Django request: drop broken or expired connections before and after."""
    close_old_connections()
    try:
        handle_reported(handle, update, arrived=arrived)
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
                report.set_extra(TEXTS_TO_HIDE, [text])  # taken out again before sending
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
