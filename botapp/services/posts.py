"""Prepared posts: the welcome, a sequence step or a broadcast can be a copy of a post the operator
keeps in the posts channel (Bot settings' `posts_channel_id`), named by its message id, with its
media and formatting, and buttons of its own under the copy.

A copy goes through `Gateway.copy_messages`, as a broadcast's copy does: without buttons, one
forward without the author; with buttons, the post is read and sent again with them (a forward
cannot carry buttons). The admin checks and previews a post through `Gateway.post_read`, which
reads it the way the copy does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from botapp.models import BotSettings, TelegramUser
from botapp.models.buttons import ButtonSpec, buttons_parse
from botapp.services.outgoing import Outgoing, keyboard_render
from botapp.services.texts import text_render
from botapp.telegram.gateway import (
    ChatNotFound,
    CopySource,
    Gateway,
    MessageNotFound,
    Sent,
    TelegramError,
    TgUser,
)

log = logging.getLogger(__name__)

WELCOME = "w"  # the welcome's buttons, for taps (a step is "s<id>", a broadcast "b<id>")


@dataclass(frozen=True)
class PostCopy:
    """A post of a channel, sent as a copy with buttons of its own: what `Outgoing` is for a
    composed message (the sweeps call `send` on either)."""

    chat_id: int
    message_id: int
    rows: Sequence[Sequence[ButtonSpec]] = ()
    protect: bool = False
    source: str = ""  # where the buttons are written, for taps
    optout: str = ""  # the opt-out button's text, under the buttons ("": none)

    def send(self, gateway: Gateway, chat_id: int, *, user_id: int | None = None, key: str = "") -> Sent:
        """Copy the post to `chat_id` with the buttons rendered for that user. A post that is gone
        raises MessageNotFound (Telegram's answer: the send's own result)."""
        buttons = keyboard_render(rows=self.rows, user_id=user_id, chat_id=chat_id, source=self.source, optout=self.optout)
        return gateway.copy_messages(
            chat_id, self.chat_id, [self.message_id], buttons=buttons, protect=self.protect, key=key
        )[0]  # fmt: skip

    def item(self, chat_id: int, *, user_id: int | None = None, key: str = "") -> None:
        return None  # never one send of a batch: a copy reads the post first


def post_read_checked(*, gateway: Gateway, chat_id: int | None, message_id: int) -> CopySource:
    """The post `message_id` of the posts channel `chat_id`, read through Telegram; a ValidationError
    saying what to do when there is no posts channel, the bot cannot read it, or there is no such
    post. Telegram not answering (a FloodWait, a network error) is a ValidationError too: nothing
    is saved on a guess."""
    if chat_id is None:
        raise ValidationError("Set the posts channel in Bot settings first: a post is named by its message id there.")
    try:
        return gateway.post_read(chat_id, message_id)
    except MessageNotFound:
        raise ValidationError(
            f"The posts channel has no post {message_id} (deleted, or not posted yet): open the post in the channel "
            f"and copy the number at the end of its link (t.me/c/…/{message_id})."
        ) from None
    except ChatNotFound as exc:
        raise ValidationError(
            f"The bot cannot read the posts channel {chat_id} ({exc}): add the bot to it as an admin."
        ) from None
    except TelegramError as exc:
        raise ValidationError(f"Telegram did not answer for post {message_id} ({exc}): try again in a minute.") from None


def post_preview(*, gateway: Gateway, chat_id: int | None, message_id: int) -> dict:
    """What the console shows of a post: {"kind", "file_name", "html"} (the text or caption as
    Telegram HTML), or {"error": why it cannot be shown}."""
    try:
        source = post_read_checked(gateway=gateway, chat_id=chat_id, message_id=message_id)
    except ValidationError as exc:
        return {"error": " ".join(exc.messages)}
    return {"kind": source.kind, "file_name": source.file_name, "html": source.text or source.caption}


def welcome_send(*, gateway: Gateway, conf: BotSettings, user: TelegramUser, tg: TgUser, chat_id: int) -> Sent:
    """A new user's welcome: the welcome post (a copy, with the welcome buttons) when Bot settings
    name one, else the welcome text with them. A welcome post that cannot be copied (deleted since)
    is logged and the welcome text goes instead: the user is never left without a welcome."""
    rows = buttons_parse(text=conf.welcome_buttons, check_links=False)
    if conf.welcome_post_id and conf.posts_channel_id:
        post = PostCopy(conf.posts_channel_id, conf.welcome_post_id, rows, protect=False, source=WELCOME)
        try:
            return post.send(gateway, chat_id, user_id=user.pk)
        except MessageNotFound as exc:
            log.warning(
                "welcome post %s/%s cannot be copied, sending the welcome text: %s",
                conf.posts_channel_id,
                conf.welcome_post_id,
                exc,
            )
    text = text_render(template=conf.welcome_text, tg=tg)
    return Outgoing(text=text, media=None, rows=rows, protect=False, source=WELCOME).send(gateway, chat_id, user_id=user.pk)
