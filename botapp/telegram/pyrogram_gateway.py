"""The real Telegram, through kurigram (import name `pyrogram`).

The client runs on an asyncio loop; the Gateway methods are synchronous and may be called from
any thread except the loop's own: each call is scheduled on the loop and waited for. `runbot`
runs the client on its main loop and calls services from worker threads; a Celery worker starts
a loop in a background thread (`PyrogramGateway.start_in_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from pyrogram import Client, enums, errors, types

from botapp.telegram.gateway import (
    DELETE_CHUNK,
    ChatNotFound,
    FloodWait,
    Gateway,
    Keyboard,
    Media,
    MessageNotFound,
    MessageTooOld,
    Sent,
    TelegramError,
    TransientError,
    UserBlocked,
    UserDeactivated,
    chunked,
)

log = logging.getLogger(__name__)

CALL_TIMEOUT = 120  # seconds; pyrogram retries transport errors itself well within this


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
) -> Client:
    """A bot client with a session file of its own under `workdir` (never share one between processes).

    `offline`: the in-memory Telegram to talk to instead of Telegram (a `TelegramServer` in this
    process, or the socket path of `manage.py telegram_server`); only the connection differs."""
    workdir.mkdir(parents=True, exist_ok=True)
    options = {"in_memory": in_memory}
    if offline is not None:  # the provisioned storage engine is in memory or not
        from botapp.telegram.server.connection import offline_client_options

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
        skip_updates=False,  # messages users sent while runbot was down are fetched at start
        parse_mode=enums.ParseMode.HTML,
        sleep_threshold=0,  # FloodWait reaches us; the global limiter decides who waits
        **options,
    )


async def client_start(client: Client) -> None:
    """Start the client; credentials Telegram refuses become a ConfigError naming the variable."""
    from botapp.config import ConfigError

    try:
        await client.start()
    except (errors.AccessTokenInvalid, errors.AccessTokenExpired) as exc:
        raise ConfigError([f"BOT_TOKEN was refused by Telegram ({exc.ID}): copy it again from @BotFather"]) from exc
    except errors.ApiIdInvalid as exc:
        raise ConfigError([f"API_ID / API_HASH were refused by Telegram ({exc.ID}): check them at my.telegram.org"]) from exc


def error_to_domain(exc: Exception) -> TelegramError:
    """Map a pyrogram exception to the domain error callers act on."""
    if isinstance(exc, errors.Flood):
        return FloodWait(seconds=int(getattr(exc, "value", 0) or 1))
    if isinstance(exc, errors.UserIsBlocked):
        return UserBlocked(str(exc))
    if isinstance(exc, (errors.InputUserDeactivated, errors.UserDeactivated, errors.UserDeactivatedBan)):
        return UserDeactivated(str(exc))
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
        return ChatNotFound(str(exc))
    if isinstance(exc, (errors.MessageIdInvalid, errors.MessageEmpty)):
        return MessageNotFound(str(exc))
    if isinstance(exc, (errors.MessageEditTimeExpired, errors.MessageDeleteForbidden)):
        return MessageTooOld(str(exc))
    if isinstance(exc, (errors.InternalServerError, errors.ServiceUnavailable, OSError, TimeoutError, asyncio.TimeoutError)):
        return TransientError(str(exc) or type(exc).__name__)
    return TelegramError(str(exc) or type(exc).__name__)


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


class PyrogramGateway(Gateway):
    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop, *, username: str = ""):
        self.client = client
        self.loop = loop
        client.loop = loop  # the client schedules its own tasks on client.loop: it must be this one
        self._username = username
        self._thread: threading.Thread | None = None

    @classmethod
    def start_in_thread(cls, client: Client, *, before_start=None) -> PyrogramGateway:
        """Start `client` on a private loop in a daemon thread (for workers, which are not async).
        `before_start(client)` runs on that loop first (to add update handlers)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="pyrogram", daemon=True)
        thread.start()
        gateway = cls(client, loop)
        gateway._thread = thread
        if before_start is not None:

            async def prepare():
                before_start(client)

            gateway._run(prepare())
        gateway._call(client.start)
        return gateway

    def stop(self) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self.client.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    # --- plumbing -----------------------------------------------------------------------------

    def _call(self, fn, *args, **kwargs):
        """Run `await fn(*args, **kwargs)` on the client's loop and wait for it. The call itself is made
        on the loop: pyrogram's methods behave differently (sync wrappers) when called elsewhere."""

        async def call():
            return await fn(*args, **kwargs)

        return self._run(call())

    def _run(self, coro):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("PyrogramGateway is synchronous: call it from a worker thread, not from its loop")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=CALL_TIMEOUT)
        except TelegramError:
            raise
        except errors.RPCError as exc:
            raise error_to_domain(exc) from exc
        except (OSError, TimeoutError) as exc:
            future.cancel()
            raise error_to_domain(exc) from exc

    # --- Gateway ------------------------------------------------------------------------------

    @property
    def bot_username(self) -> str:
        me = self.client.me  # known once the client has started
        return self._username or (me.username if me is not None and me.username else "")

    def send_text(self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False) -> Sent:
        message = self._call(
            self.client.send_message,
            chat_id,
            text,
            reply_markup=markup(buttons),
            protect_content=protect or None,
            link_preview_options=types.LinkPreviewOptions(is_disabled=True),
        )
        return Sent(chat_id, message.id)

    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False
    ) -> Sent:
        send = getattr(self.client, f"send_{media.kind}")
        message = self._call(
            send, chat_id, media.file, caption=caption, reply_markup=markup(buttons), protect_content=protect or None
        )
        return Sent(chat_id, message.id)

    def copy_messages(
        self, chat_id: int, from_chat_id: int, message_ids: Sequence[int], *, caption: str | None = None, protect: bool = False
    ) -> list[Sent]:
        if caption is None:
            # One ForwardMessages call per 100 messages, without the "forwarded from" header.
            return self._call(self._forward_hidden, chat_id, from_chat_id, list(message_ids), protect)
        # A new caption needs a real copy: get + send per message.
        return [
            Sent(
                chat_id,
                self._call(
                    self.client.copy_message, chat_id, from_chat_id, mid, caption=caption, protect_content=protect or None
                ).id,
            )
            for mid in message_ids
        ]

    async def _forward_hidden(self, chat_id, from_chat_id, ids, protect) -> list[Sent]:
        sent = []
        for chunk in chunked(ids, DELETE_CHUNK):
            messages = await self.client.forward_messages(
                chat_id, from_chat_id, chunk, hide_sender_name=True, protect_content=protect or None
            )
            if len(messages) < len(chunk):
                raise MessageNotFound(f"{len(chunk) - len(messages)} of {from_chat_id}/{chunk} could not be copied")
            sent.extend(Sent(chat_id, m.id) for m in messages)
        return sent

    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        deleted = 0
        for chunk in chunked(list(message_ids), DELETE_CHUNK):
            try:
                deleted += self._call(self.client.delete_messages, chat_id, chunk)
            except (MessageTooOld, MessageNotFound) as exc:
                log.info("delete skipped chat=%s ids=%s: %s", chat_id, chunk, exc)
        return deleted

    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None:
        self._call(self._edit_text, chat_id, message_id, text, buttons)

    async def _edit_text(self, chat_id, message_id, text, buttons):
        try:
            await self.client.edit_message_text(chat_id, message_id, text, reply_markup=markup(buttons))
        except errors.MessageNotModified:
            pass  # the user tapped twice: the message already says this

    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None:
        try:
            self._call(self.client.answer_callback_query, callback_id, text=text or None, show_alert=alert)
        except TelegramError as exc:
            # A query older than ~15 s cannot be answered any more; nothing is lost.
            log.info("callback %s not answered: %s", callback_id, exc)

    def is_member(self, chat_id: int, user_id: int) -> bool:
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
