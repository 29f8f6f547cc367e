"""Share links on storage-channel posts: an operator who posts straight into the storage channel
gets the post's deep link on the post itself, without going through the bot."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import quote

from botapp.models import BotSettings, StoredFile
from botapp.services.files import deep_link, file_store
from botapp.telegram.gateway import Button, Gateway, TelegramError

log = logging.getLogger(__name__)

Mode = BotSettings.ChannelPostLinks
TITLE_LENGTH = 60


@dataclass(frozen=True)
class PostLink:
    link: str
    how: str  # "button" (on the post) or "reply"


def share_button(*, link: str) -> Button:
    """A button that opens Telegram's share dialog with the link."""
    return Button("🔁 Share", url=f"https://t.me/share/url?url={quote(link, safe='')}")


def post_link_attach(*, gateway: Gateway, chat_id: int, message_id: int, text: str, mode: str) -> PostLink | None:
    """Give a new storage-channel post its deep link, as Bot settings say: a Share button on the post
    (`button`; a reply instead when Telegram does not let the bot edit it), a reply to the post
    (`reply`), or nothing (`off`: returns None). The link is one stored file per post: a post
    seen again (updates recovered after a restart) keeps its link and is not answered twice."""
    if mode == Mode.OFF:
        return None
    if StoredFile.objects.filter(source_chat_id=chat_id, message_ids=[message_id]).exists():
        return None
    title = " ".join(text.split())[:TITLE_LENGTH] or f"Channel post #{message_id}"
    stored = file_store(source_chat_id=chat_id, message_ids=[message_id], title=title)
    link = deep_link(bot_username=gateway.bot_username, payload=stored.share_id)
    if mode == Mode.BUTTON:
        try:
            gateway.edit_buttons(chat_id, message_id, [[share_button(link=link)]])
            return PostLink(link, "button")
        except TelegramError as exc:  # no right to edit the posts of others: a reply still gives the link
            log.warning("cannot put a share button on post chat=%s message=%s, replying instead: %s", chat_id, message_id, exc)
    gateway.send_text(chat_id, f"🔗 {link}", buttons=[[share_button(link=link)]], reply_to=message_id)
    return PostLink(link, "reply")
