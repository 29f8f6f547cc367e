"""The broadcast that copies message(s): an admin's `/broadcast` reply, a marked channel post.

A copy goes without the "forwarded from" header, in one call per user (an album stays an album);
a pinned broadcast then pins the (first) message it delivered, silently.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from botapp.models import Broadcast
from botapp.models.buttons import buttons_parse
from botapp.services.outgoing import keyboard_render
from botapp.telegram.gateway import Gateway, Sent, TelegramError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MessageCopy:
    chat_id: int
    message_ids: tuple[int, ...]
    rows: tuple = ()  # the broadcast's buttons (ButtonSpec rows), under a copy of one message
    optout: str = ""  # the opt-out button's text, under a copy of one message ("": none)

    @classmethod
    def of(cls, broadcast: Broadcast, *, optout: str = "") -> MessageCopy | None:
        """The copy a broadcast sends: when it has copied messages and no composed content of its
        own (a channel post is sent composed, its marker taken out). A copy of one message (a
        post of the posts channel) carries the broadcast's buttons."""
        if not broadcast.copy_message_ids or broadcast.text or broadcast.media_kind:
            return None
        one = len(broadcast.copy_message_ids) == 1
        rows = buttons_parse(text=broadcast.buttons, check_links=False) if one else []
        return cls(
            broadcast.copy_chat_id, tuple(broadcast.copy_message_ids), tuple(tuple(r) for r in rows), optout if one else ""
        )

    def send(
        self, gateway: Gateway, chat_id: int, *, protect: bool = False, user_id: int | None = None, source: str = "",
        key: str = "",
    ) -> Sent:  # fmt: skip
        """Copy to `chat_id`, with the buttons rendered for that user (`source`: where they are
        written, for taps); returns the first message sent. Telegram's refusal is raised."""
        buttons = keyboard_render(rows=self.rows, user_id=user_id, chat_id=chat_id, source=source, optout=self.optout)
        return gateway.copy_messages(
            chat_id, self.chat_id, list(self.message_ids), protect=protect, buttons=buttons, key=key
        )[0]  # fmt: skip


def message_pin(*, gateway: Gateway, sent: Sent) -> bool:
    """Pin a delivered broadcast message without a notification. The message arrived whatever
    happens here: a refusal is logged, not raised, so the delivery still counts as sent."""
    try:
        gateway.pin_message(sent.chat_id, sent.message_id, silent=True)
    except TelegramError as exc:
        log.warning("broadcast message not pinned chat=%s message=%s: %s", sent.chat_id, sent.message_id, exc)
        return False
    return True
