"""A Gateway that keeps to Telegram's limits: every call waits for the shared limiter, a FloodWait
pauses every sender, and transient failures are retried with exponential back-off.

Wraps any Gateway (the real one in production; the fake in tests), so the limits are enforced in
one place for runbot and every worker alike.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from botapp.telegram.gateway import FloodWait, Gateway, Keyboard, Media, Sent, TransientError, chunked

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_ATTEMPTS = 3
BACKOFF_BASE = 0.5  # seconds: 0.5, 1, 2 ...


class Limiter(Protocol):
    def acquire(self, chat_id: int | None = None) -> float: ...
    def pause(self, seconds: float) -> float: ...


class LimitedGateway(Gateway):
    def __init__(self, inner: Gateway, limiter: Limiter, *, max_flood_wait: int = 60, sleep=time.sleep):
        self.inner = inner
        self.limiter = limiter
        self.max_flood_wait = max_flood_wait
        self.sleep = sleep

    def _call(self, chat_id: int | None, fn: Callable[[], T]) -> T:
        attempt = 1
        while True:
            self.limiter.acquire(chat_id)
            try:
                return fn()
            except FloodWait as exc:
                self.limiter.pause(exc.seconds)
                log.warning("FloodWait %ss chat=%s: every sender pauses", exc.seconds, chat_id)
                if exc.seconds > self.max_flood_wait or attempt >= MAX_ATTEMPTS:
                    raise
            except TransientError as exc:
                if attempt >= MAX_ATTEMPTS:
                    raise
                delay = BACKOFF_BASE * 2 ** (attempt - 1)
                log.info("transient error chat=%s attempt=%s, retrying in %.1fs: %s", chat_id, attempt, delay, exc)
                self.sleep(delay)
            attempt += 1

    @property
    def bot_username(self) -> str:
        return self.inner.bot_username

    def send_text(self, chat_id: int, text: str, *, buttons: Keyboard | None = None, protect: bool = False) -> Sent:
        return self._call(chat_id, lambda: self.inner.send_text(chat_id, text, buttons=buttons, protect=protect))

    def send_media(
        self, chat_id: int, media: Media, *, caption: str = "", buttons: Keyboard | None = None, protect: bool = False
    ) -> Sent:
        return self._call(
            chat_id, lambda: self.inner.send_media(chat_id, media, caption=caption, buttons=buttons, protect=protect)
        )

    def copy_messages(
        self, chat_id: int, from_chat_id: int, message_ids: Sequence[int], *, caption: str | None = None, protect: bool = False
    ) -> list[Sent]:
        return self._call(
            chat_id, lambda: self.inner.copy_messages(chat_id, from_chat_id, message_ids, caption=caption, protect=protect)
        )

    def delete_messages(self, chat_id: int, message_ids: Iterable[int]) -> int:
        # One limiter slot per Telegram call (100 ids each). Deletes are not messages to the chat:
        # they count against the global rate only.
        return sum(
            self._call(None, lambda chunk=chunk: self.inner.delete_messages(chat_id, chunk))
            for chunk in chunked(list(message_ids))
        )

    def edit_text(self, chat_id: int, message_id: int, text: str, *, buttons: Keyboard | None = None) -> None:
        return self._call(chat_id, lambda: self.inner.edit_text(chat_id, message_id, text, buttons=buttons))

    def answer_callback(self, callback_id: str, text: str = "", *, alert: bool = False) -> None:
        # Answering a button press is not a message; Telegram does not rate it like one.
        return self.inner.answer_callback(callback_id, text, alert=alert)

    def is_member(self, chat_id: int, user_id: int) -> bool:
        return self._call(None, lambda: self.inner.is_member(chat_id, user_id))
