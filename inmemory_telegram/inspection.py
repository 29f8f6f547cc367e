"""Looking at what happened on the in-memory Telegram: what each chat received, which calls came,
which messages are still there, which button a user would tap. A mixin of server.TelegramServer.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from inmemory_telegram.state import Button, Message, buttons_of, channel_raw_id


class Inspection:
    """Reads only, each under the server's lock."""

    def received(self, *, since: int = 0, text: str | None = None) -> dict[int, int]:
        """How many messages each private chat received from the bot (sends and copies: what a
        user sees arrive, deleted later or not), from event number `since` on; with `text`, only
        messages whose text starts with it."""
        with self.lock:
            return dict(
                collections.Counter(
                    e.chat_id
                    for e in self.events[since:]
                    if e.action in ("send", "copy") and e.chat_id > 0 and (text is None or e.text.startswith(text))
                )
            )

    def update_state(self) -> dict[str, int]:
        """The bot's update sequences now: where a client that has every update stands."""
        with self.lock:
            return {"pts": self.pts, "qts": self.qts}

    def live(self, message_ids: Iterable[int]) -> list[int]:
        """Those of the bot's private-chat messages `message_ids` that are still there (not deleted)."""
        with self.lock:
            return [i for i in message_ids if (m := self.box.get(i)) is not None and not m.deleted]

    def count(self, method: str | None = None, *, chat_id: int | None = None, since: int = 0) -> int:
        """How many calls (of `method`, to `chat_id`) Telegram received, from call number `since` on."""
        with self.lock:
            return sum(
                1
                for call in self.calls[since:]
                if (method is None or call.method == method) and (chat_id is None or call.chat_id == chat_id)
            )

    def hashes_named(self, user_id: int, *, since: int = 0) -> list[int]:
        """The access hash each call naming the user carried, in the order they came (0: by id
        alone), from call number `since` on."""
        with self.lock:
            return [call.access_hash for call in self.calls[since:] if call.chat_id == user_id and call.access_hash is not None]

    def call_times(self, since: int = 0) -> list[tuple[str, int | None, float]]:
        """(method, chat id, time.monotonic() when it arrived) of every call from number `since` on:
        on Linux that clock is the machine's, so another process's monotonic times compare."""
        with self.lock:
            return [(call.method, call.chat_id, call.at) for call in self.calls[since:]]

    def send_times(self, since: int = 0) -> list[tuple[int, float, str]]:
        """(chat id, time.monotonic(), the text's first 40 characters) of every message the bot
        sent or copied (accepted, counted by the rates) from event number `since` on: what a
        benchmark counts as sends."""
        with self.lock:
            return [(e.chat_id, e.at, e.text[:40]) for e in self.events[since:] if e.action in ("send", "copy")]

    def events_count(self) -> int:
        with self.lock:
            return len(self.events)

    def methods_called(self, since: int = 0) -> list[str]:
        with self.lock:
            return [call.method for call in self.calls[since:]]

    def messages(self, chat_id: int, *, include_deleted: bool = False) -> list[Message]:
        with self.lock:
            source = (
                [m for m in self.box.values() if m.chat_id == chat_id]
                if chat_id > 0
                else list(self.channel_messages.get(channel_raw_id(chat_id), {}).values())
            )
            return sorted((m for m in source if include_deleted or not m.deleted), key=lambda m: m.id)

    def bot_messages(self, chat_id: int) -> list[Message]:
        return [m for m in self.messages(chat_id) if m.out]

    def file_info(self, chat_id: int, message_id: int) -> dict | None:
        """The file a stored message carries: {"id", "size", "dc_id", "mime_type", "name",
        "generated"} (None: no such message, or no file). A generated file's bytes are
        content.generated(id, offset, length)."""
        with self.lock:
            msg = self.stored(chat_id, message_id)
            file = msg.file if msg is not None else None
            if file is None:
                return None
            return {
                "id": file.id, "size": file.size, "dc_id": file.dc_id, "mime_type": file.mime_type,
                "name": file.name, "generated": file.content is None,
            }  # fmt: skip

    def message(self, chat_id: int, message_id: int) -> Message | None:
        with self.lock:
            return self.stored(chat_id, message_id)

    def find_button(self, chat_id: int, label: str) -> tuple[Message, Button] | None:
        """The newest live bot message in the chat with a button whose text, callback data or URL is
        `label` (text also matches without its emoji and case: "get files again")."""
        wanted = _plain(label)
        for msg in reversed(self.bot_messages(chat_id)):
            for row in buttons_of(msg.reply_markup):
                for button in row:
                    if label in (button.text, button.callback_data, button.url) or _same_words(button.text, wanted):
                        return msg, button
        return None


def _plain(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch.isalnum() or ch.isspace()).split()).casefold()


def _same_words(button_text: str, wanted: str) -> bool:
    """ "get files again" names "♻️ Get files again"; "how to verify" names "ℹ️ How to verify"
    (some emoji count as letters, so a leading symbol word may be left over)."""
    plain = _plain(button_text)
    return bool(wanted) and (plain == wanted or plain.endswith(" " + wanted) and len(plain) - len(wanted) <= 3)
