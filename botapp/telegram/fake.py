"""An in-memory Telegram with real behaviour, for tests and the offline sandbox.

What it does like Telegram: message ids count up per chat; a user who blocked the bot (or deleted
the account) makes sends fail; bots may delete their messages only within 48 hours (older ones are
skipped, like Telegram does); delete calls take at most 100 ids; FloodWait can be injected, and with
`enforce_rates` it is raised for real when a sender goes faster than Telegram allows; `latency`
makes every call take that long. Time comes from `botapp.clock`, so the sandbox can move it.

Every call is recorded in `calls` (method names, in order) and every visible effect in `events`,
which listeners (the sandbox printer) receive as they happen.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from botapp import clock
from botapp.telegram.gateway import (
    DELETE_CHUNK,
    Button,
    CallbackQuery,
    ChatNotFound,
    FloodWait,
    Gateway,
    IncomingMessage,
    Keyboard,
    Media,
    MessageNotFound,
    MessageTooOld,
    Sent,
    TelegramError,
    TgUser,
    UserBlocked,
    UserDeactivated,
    chunked,
)

DELETE_WINDOW = timedelta(hours=48)


@dataclass
class FakeMessage:
    chat_id: int
    id: int
    from_bot: bool
    date: datetime
    text: str = ""
    media: Media | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()
    protect: bool = False
    deleted: bool = False
    forward_from: tuple[int, int] | None = None


@dataclass
class Event:
    """One thing the bot did that a user could see."""

    action: str  # send | copy | delete | edit | answer
    chat_id: int
    message_ids: list[int] = field(default_factory=list)
    text: str = ""
    media: Media | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()


class FakeTelegram(Gateway):
    def __init__(
        self,
        *,
        username: str = "CourierBot",
        latency: float = 0.0,
        enforce_rates: bool = False,
        global_rate: int = 30,
        per_chat_rate: int = 1,
    ):
        self._username = username
        self.latency = latency
        self.enforce_rates = enforce_rates
        self.global_rate = global_rate
        self.per_chat_rate = per_chat_rate
        self._lock = threading.RLock()
        self._chats: dict[int, dict[int, FakeMessage]] = collections.defaultdict(dict)
        self._next_id: dict[int, itertools.count] = collections.defaultdict(lambda: itertools.count(1))
        self._channels: dict[int, set[int]] = {}
        self._blocked: set[int] = set()
        self._deactivated: set[int] = set()
        self._failures: collections.deque[tuple[TelegramError, frozenset[str] | None]] = collections.deque()
        self._send_times: collections.deque[float] = collections.deque()
        self._chat_send_times: dict[int, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._callback_ids = itertools.count(1)
        self._callback_users: dict[str, int] = {}
        self.calls: list[str] = []
        self.events: list[Event] = []
        self.callback_answers: list[tuple[str, str, bool]] = []
        self.listeners: list[Callable[[Event], None]] = []

    # --- test and sandbox controls ------------------------------------------------------------

    def create_channel(self, chat_id: int, *, members: Iterable[int] = ()) -> None:
        if chat_id >= 0:
            raise ValueError("channel ids are negative")
        with self._lock:
            self._channels.setdefault(chat_id, set()).update(members)

    def join(self, chat_id: int, user_id: int) -> None:
        with self._lock:
            self._channels[chat_id].add(user_id)

    def leave(self, chat_id: int, user_id: int) -> None:
        with self._lock:
            self._channels[chat_id].discard(user_id)

    def post(self, chat_id: int, text: str = "", *, media: Media | None = None) -> int:
        """Something (an admin) posts in a channel; returns the message id."""
        with self._lock:
            if chat_id not in self._channels:
                raise ChatNotFound(chat_id)
            return self._store(chat_id, from_bot=False, text=text, media=media).id

    def block(self, user_id: int) -> None:
        with self._lock:
            self._blocked.add(user_id)

    def unblock(self, user_id: int) -> None:
        with self._lock:
            self._blocked.discard(user_id)

    def deactivate(self, user_id: int) -> None:
        with self._lock:
            self._deactivated.add(user_id)

    def fail_next(self, error: TelegramError, *, times: int = 1, methods: Iterable[str] | None = None) -> None:
        """The next `times` calls (of `methods`, or any) raise `error`, as Telegram would."""
        with self._lock:
            for _ in range(times):
                self._failures.append((error, frozenset(methods) if methods else None))

    def user_sends(
        self,
        user: TgUser,
        text: str = "",
        *,
        media: Media | None = None,
        forward_from: tuple[int, int] | None = None,
    ) -> IncomingMessage:
        """A user writes to the bot in private. Returns the update the bot receives."""
        with self._lock:
            self._blocked.discard(user.id)  # writing to a bot unblocks it, as in Telegram
            msg = self._store(user.id, from_bot=False, text=text, media=media, forward_from=forward_from)
        return IncomingMessage(
            chat_id=user.id,
            message_id=msg.id,
            user=user,
            text=text,
            has_media=media is not None,
            forward_from_chat_id=forward_from[0] if forward_from else None,
            forward_from_message_id=forward_from[1] if forward_from else None,
        )

    def find_button(self, chat_id: int, label: str) -> tuple[FakeMessage, Button] | None:
        """The newest live bot message in the chat with a button whose text, callback data or URL is
        `label` (text also matches without its emoji and case: "get files again")."""
        wanted = _plain(label)
        with self._lock:
            for msg in sorted(self._chats.get(chat_id, {}).values(), key=lambda m: m.id, reverse=True):
                if msg.deleted or not msg.from_bot:
                    continue
                for row in msg.buttons:
                    for button in row:
                        if label in (button.text, button.callback_data, button.url) or _same_words(button.text, wanted):
                            return msg, button
        return None

    def callback_query(self, user: TgUser, msg: FakeMessage, data: str) -> CallbackQuery:
        """A user taps a callback button; the bot gets this update."""
        query_id = str(next(self._callback_ids))
        self._callback_users[query_id] = user.id
        return CallbackQuery(id=query_id, user=user, chat_id=msg.chat_id, message_id=msg.id, data=data)

    def messages(self, chat_id: int, *, include_deleted: bool = False) -> list[FakeMessage]:
        with self._lock:
            return [
                m for m in sorted(self._chats.get(chat_id, {}).values(), key=lambda m: m.id) if include_deleted or not m.deleted
            ]

    def bot_messages(self, chat_id: int) -> list[FakeMessage]:
        return [m for m in self.messages(chat_id) if m.from_bot]

    def message(self, chat_id: int, message_id: int) -> FakeMessage | None:
        with self._lock:
            return self._chats.get(chat_id, {}).get(message_id)

    # --- Gateway --------------------------------------------------------------------------------

    @property
    def bot_username(self) -> str:
        return self._username

    def send_text(self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False) -> Sent:
        if not text.strip():
            raise TelegramError("MESSAGE_EMPTY")
        with self._call("send_text", sending_to=chat_id):
            msg = self._store(chat_id, from_bot=True, text=text, buttons=buttons, protect=protect)
            self._emit(Event("send", chat_id, [msg.id], text=text, buttons=msg.buttons))
        return Sent(chat_id, msg.id)

    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False
    ) -> Sent:
        with self._call("send_media", sending_to=chat_id):
            msg = self._store(chat_id, from_bot=True, text=caption, media=media, buttons=buttons, protect=protect)
            self._emit(Event("send", chat_id, [msg.id], text=caption, media=media, buttons=msg.buttons))
        return Sent(chat_id, msg.id)

    def copy_messages(
        self, chat_id: int, from_chat_id: int, message_ids: Sequence[int], *, caption: str | None = None, protect: bool = False
    ) -> list[Sent]:
        sent: list[Sent] = []
        for message_id in message_ids:
            with self._call("copy_message", sending_to=chat_id):
                source = self._chats.get(from_chat_id, {}).get(message_id)
                if source is None or source.deleted:
                    raise MessageNotFound(f"{from_chat_id}/{message_id}")
                text = caption if (caption is not None and source.media is not None) else source.text
                msg = self._store(chat_id, from_bot=True, text=text, media=source.media, protect=protect)
                self._emit(Event("copy", chat_id, [msg.id], text=text, media=source.media))
            sent.append(Sent(chat_id, msg.id))
        return sent

    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        ids = list(message_ids)
        deleted = 0
        for chunk in chunked(ids, DELETE_CHUNK):
            with self._call("delete_messages"):
                if len(chunk) > DELETE_CHUNK:  # pragma: no cover - chunked() guarantees it
                    raise TelegramError("too many ids")
                done = []
                now = clock.now()
                for message_id in chunk:
                    msg = self._chats.get(chat_id, {}).get(message_id)
                    if msg is None or msg.deleted:
                        continue
                    if msg.from_bot and now - msg.date > DELETE_WINDOW:
                        continue  # Telegram silently refuses: the bot's window is over
                    msg.deleted = True
                    done.append(message_id)
                deleted += len(done)
                if done:
                    self._emit(Event("delete", chat_id, done))
        return deleted

    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None:
        with self._call("edit_text"):
            msg = self._chats.get(chat_id, {}).get(message_id)
            if msg is None or msg.deleted or not msg.from_bot:
                raise MessageNotFound(f"{chat_id}/{message_id}")
            if clock.now() - msg.date > DELETE_WINDOW:
                raise MessageTooOld(f"{chat_id}/{message_id}")
            msg.text = text
            msg.buttons = _freeze(buttons)
            self._emit(Event("edit", chat_id, [message_id], text=text, buttons=msg.buttons))

    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None:
        with self._call("answer_callback"):
            self.callback_answers.append((callback_id, text, alert))
            if text:  # a toast or alert the user sees
                self._emit(Event("answer", self._callback_users.get(callback_id, 0), [], text=text))

    def is_member(self, chat_id: int, user_id: int) -> bool:
        with self._call("is_member"):
            if chat_id not in self._channels:
                raise ChatNotFound(chat_id)
            return user_id in self._channels[chat_id]

    # --- internals ------------------------------------------------------------------------------

    def _store(self, chat_id, *, from_bot, text="", media=None, buttons=None, protect=False, forward_from=None) -> FakeMessage:
        msg = FakeMessage(
            chat_id=chat_id,
            id=next(self._next_id[chat_id]),
            from_bot=from_bot,
            date=clock.now(),
            text=text,
            media=media,
            buttons=_freeze(buttons),
            protect=protect,
            forward_from=forward_from,
        )
        self._chats[chat_id][msg.id] = msg
        return msg

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        for listener in self.listeners:
            listener(event)

    def _call(self, method: str, *, sending_to: int | None = None):
        return _Call(self, method, sending_to)

    def _check(self, method: str, sending_to: int | None) -> None:
        """Runs under the lock, before a call takes effect: raises what Telegram would."""
        self.calls.append(method)
        for i, (error, methods) in enumerate(self._failures):
            if methods is None or method in methods:
                del self._failures[i]
                raise error
        if sending_to is None:
            return
        if sending_to > 0:
            if sending_to in self._deactivated:
                raise UserDeactivated(sending_to)
            if sending_to in self._blocked:
                raise UserBlocked(sending_to)
        elif sending_to not in self._channels:
            raise ChatNotFound(sending_to)
        if self.enforce_rates:
            self._check_rates(sending_to)

    def _check_rates(self, chat_id: int) -> None:
        t = time.monotonic()
        window = self._send_times
        while window and t - window[0] >= 1.0:
            window.popleft()
        chat_window = self._chat_send_times[chat_id]
        while chat_window and t - chat_window[0] >= 1.0:
            chat_window.popleft()
        if len(window) >= self.global_rate or len(chat_window) >= self.per_chat_rate:
            raise FloodWait(seconds=1)
        window.append(t)
        chat_window.append(t)


class _Call:
    """Latency outside the lock (calls overlap, like network calls), checks and effects inside it."""

    def __init__(self, fake: FakeTelegram, method: str, sending_to: int | None):
        self.fake, self.method, self.sending_to = fake, method, sending_to

    def __enter__(self):
        if self.fake.latency:
            time.sleep(self.fake.latency)
        self.fake._lock.acquire()
        try:
            self.fake._check(self.method, self.sending_to)
        except BaseException:
            self.fake._lock.release()
            raise
        return self

    def __exit__(self, *exc):
        self.fake._lock.release()
        return False


def _plain(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch.isalnum() or ch.isspace()).split()).casefold()


def _same_words(button_text: str, wanted: str) -> bool:
    """ "get files again" names "♻️ Get files again"; "how to verify" names "ℹ️ How to verify"
    (some emoji count as letters, so a leading symbol word may be left over)."""
    plain = _plain(button_text)
    return bool(wanted) and (plain == wanted or plain.endswith(" " + wanted) and len(plain) - len(wanted) <= 3)


def _freeze(buttons: Keyboard | None) -> tuple[tuple[Button, ...], ...]:
    return tuple(tuple(row) for row in buttons or ())
