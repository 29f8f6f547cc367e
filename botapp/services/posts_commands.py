"""Commands the operator defines (PostsCommand) that answer with a channel's latest posts
mentioning a word: the drip bot's /results (shared/seeds/002: the last 5 "position" posts of a
channel, cached for an hour).

Guarantees: runbot keeps the posts it receives from the commands' channels (`channel_post_keep`,
once per post whatever Telegram sends again); an answer lists the latest `count` kept posts whose
text contains the word (any case), newest first, each with its link, in one message Telegram
accepts; the same answer is given for `cache_minutes` by the one clock, from the shared cache
(Redis), and worked out again when the cache is away. A command changed on its page is answered
anew at once (the cache is keyed by what it shows).

A command of a public channel the bot is not in (`channel_username`) reads the channel's latest
HISTORY_READ posts through the operator's user session (`history`, runbot's UserHistory) when its
answer is not cached, and lists those that match. When that session is not logged in or Telegram
refuses the read, the answer says the list is unavailable, is not cached, and the log says why.
"""

from __future__ import annotations

import hashlib
import html
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.core.cache import cache
from redis import RedisError

from botapp import clock
from botapp.cache import cache_answered, cache_failed, cache_usable
from botapp.models import KeptChannelPost, PostsCommand
from botapp.telegram.gateway import ChannelPost, TelegramError
from botapp.telegram.limits import TEXT_LENGTH, utf16_length
from botapp.telegram.user_session import HISTORY_READ, UserSessionMissing

log = logging.getLogger(__name__)

SNIPPET_MAX = 300  # UTF-16 units of a post's text shown, at most
UNAVAILABLE_TEXT = "This list cannot be read right now. Please try again later."


def posts_command_channels() -> frozenset[int]:
    """The channels whose posts the enabled commands list (runbot asks for their posts)."""
    return frozenset(PostsCommand.objects.filter(enabled=True, channel_id__isnull=False).values_list("channel_id", flat=True))


def channel_post_keep(*, post: ChannelPost) -> bool:
    """Keep a post of a commands' channel (its text or caption). False, keeping nothing, for a post
    without text, or one kept already (Telegram sent it again)."""
    if not post.text.strip():
        return False
    _, created = KeptChannelPost.objects.get_or_create(
        chat_id=post.chat_id, message_id=post.message_id, defaults={"text": post.text}
    )
    return created


def posts_command_answer(*, name: str, history: ChannelHistory | None = None) -> str | None:
    """The answer of the enabled command `name` (without its slash, any case) as Telegram HTML, or
    None when there is no such command. `history(username, limit)`: the latest posts of a public
    channel, newest first (runbot's user session); None: there is none."""
    command = PostsCommand.objects.filter(name=name.lower(), enabled=True).first()
    if command is None:
        return None
    key = _cache_key(command)
    kept = _cached(key)
    now = clock.now()
    if kept is not None and now - kept[0] < timedelta(minutes=command.cache_minutes):
        return kept[1]
    if command.channel_username:
        latest = _public_latest(command, history)
        if latest is None:
            return UNAVAILABLE_TEXT
    else:
        latest = _kept_latest(command)
    text = _answer(command, latest)
    if command.cache_minutes:
        _remember(key, (now, text), timeout=command.cache_minutes * 60)
    return text


ChannelHistory = Callable[[str, int], list[ChannelPost]]


def _kept_latest(command: PostsCommand) -> list[tuple[int, str]]:
    posts = KeptChannelPost.objects.filter(chat_id=command.channel_id)
    if command.word:
        posts = posts.filter(text__icontains=command.word)
    return list(posts.order_by("-message_id").values_list("message_id", "text")[: command.count])


def _public_latest(command: PostsCommand, history: ChannelHistory | None) -> list[tuple[int, str]] | None:
    """The matching posts among the public channel's latest HISTORY_READ (as the drip bot read
    its latest 100), or None when they cannot be read."""
    if history is None:
        log.error("posts command /%s: @%s cannot be read: this process has no user session", command.name,
                  command.channel_username)  # fmt: skip
        return None
    try:
        posts = history(command.channel_username, HISTORY_READ)
    except UserSessionMissing as exc:
        log.error("posts command /%s: @%s cannot be read: %s", command.name, command.channel_username, exc)
        return None
    except TelegramError as exc:
        log.error("posts command /%s: Telegram refused to read @%s: %s", command.name, command.channel_username, exc)
        return None
    word = command.word.casefold()
    matching = [(p.message_id, p.text) for p in posts if p.text.strip() and word in p.text.casefold()]
    return sorted(matching, reverse=True)[: command.count]


def _answer(command: PostsCommand, latest: list[tuple[int, str]]) -> str:
    head = f"<b>{html.escape(command.title)}</b>"
    if not latest:
        return f"{head}\n{html.escape(command.empty_text)}"
    # Every snippet gets an equal share of what one message holds, after the title and the links.
    room = (TEXT_LENGTH - utf16_length(head) - 16) // len(latest) - 64
    lines = [head]
    for message_id, text in latest:
        link = (
            f"https://t.me/{command.channel_username}/{message_id}"
            if command.channel_username
            else f"https://t.me/c/{-command.channel_id - 10**12}/{message_id}"
        )
        lines.append(f'• {html.escape(_cut(" ".join(text.split()), min(SNIPPET_MAX, room)))} <a href="{link}">»</a>')
    return "\n".join(lines)


def _cut(text: str, units: int) -> str:
    """`text` within `units` UTF-16 units, an ellipsis where it was cut."""
    if utf16_length(text) <= units:
        return text
    out, used = [], 0
    for ch in text:
        used += utf16_length(ch)
        if used > units - 1:
            break
        out.append(ch)
    return "".join(out).rstrip() + "…"


def _cache_key(command: PostsCommand) -> str:
    shown = repr((command.channel_id, command.channel_username, command.word, command.count, command.title, command.empty_text))
    return f"postscmd:{command.pk}:{hashlib.sha256(shown.encode()).hexdigest()[:16]}"


def _cached(key: str) -> tuple[datetime, str] | None:
    if not cache_usable():
        return None
    try:
        value = cache.get(key)
    except RedisError as exc:
        cache_failed(exc, "a posts command's answer")
        return None
    cache_answered()
    return value


def _remember(key: str, value: tuple[datetime, str], *, timeout: int) -> None:
    if not cache_usable():
        return
    try:
        cache.set(key, value, timeout=timeout)
    except RedisError as exc:
        cache_failed(exc, "a posts command's answer")
        return
    cache_answered()
