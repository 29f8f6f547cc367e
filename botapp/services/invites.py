"""The force-subscribe channels as runbot reads them, and their expiring invite links: the bot makes
them, and reuses one while valid.

A channel with `invite_ttl_minutes` gets links of the bot's own (messages.exportChatInvite with an
expiry date, needing an admin's approval in join-request mode) instead of one permanent link that
can be passed around for ever. One link is stored on the channel and shown to every user until it
nears its expiry (RENEW_AT of its lifetime left), so Telegram is asked once per lifetime, not per user.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from botapp import clock
from botapp.cache import HotValue
from botapp.models import ForceSubChannel
from botapp.telegram.gateway import Gateway, TelegramError

log = logging.getLogger(__name__)

FORCE_SUB_KEY = "courier:force-sub-channels:v1"
FORCE_SUB_TIMEOUT = 300  # seconds: a change the signals missed (a bulk update) shows within this


def _force_sub_load() -> list[dict]:
    names = [f.attname for f in ForceSubChannel._meta.concrete_fields]
    return [dict(zip(names, row, strict=True)) for row in ForceSubChannel.objects.filter(enabled=True).values_list(*names)]


FORCE_SUB = HotValue(FORCE_SUB_KEY, _force_sub_load, timeout=FORCE_SUB_TIMEOUT, what="force-subscribe channels")


def force_sub_channels() -> list[ForceSubChannel]:
    """The enabled force-subscribe channels, in their order: every /start <file> asks, so they are
    a HotValue (no query), forgotten when a channel is saved or deleted (botapp.apps) or gets a
    new invite link."""
    channels = []
    for values in FORCE_SUB.get():
        channel = ForceSubChannel(**values)
        channel._state.adding, channel._state.db = False, "default"
        channels.append(channel)
    return channels


def force_sub_forget() -> None:
    """Drop the cached channels: the next /start <file> reads them again."""
    FORCE_SUB.forget()


RENEW_AT = 0.25  # a link with less than this share of its lifetime left is replaced: users need time to tap it
RENEW_MAX = timedelta(hours=1)  # ... but never more than this before it expires


def invite_link_current(*, gateway: Gateway, channel: ForceSubChannel) -> str:
    """The invite link to show on the channel's Join button: the fixed one, or (with expiring
    links on) the stored link while it stays valid long enough, else a new one from Telegram,
    stored for everyone after. When Telegram refuses (the bot may not invite users), the fixed
    link if there is one, else "" (logged). Of two requests that make a link at once, both links
    work; the one stored first is kept."""
    if not channel.invite_ttl_minutes:
        return channel.invite_link
    now = clock.now()
    ttl = timedelta(minutes=channel.invite_ttl_minutes)
    expires = channel.current_link_expires_at
    if channel.current_link and expires is not None and expires - now > min(ttl * RENEW_AT, RENEW_MAX):
        return channel.current_link
    try:
        link = gateway.invite_link_create(channel.chat_id, expire_at=now + ttl, join_request=channel.join_request)
    except TelegramError as exc:
        log.error("invite link not made channel=%s (is the bot an admin allowed to invite users?): %s", channel.chat_id, exc)
        return channel.invite_link
    stored = ForceSubChannel.objects.filter(pk=channel.pk, current_link=channel.current_link).update(
        current_link=link, current_link_expires_at=now + ttl
    )
    force_sub_forget()  # the cached channel holds the old link
    if not stored:  # another request stored its link first: show that one to everybody from now on
        fresh = ForceSubChannel.objects.filter(pk=channel.pk).values_list("current_link", "current_link_expires_at").first()
        if fresh is not None and fresh[1] is not None and fresh[1] > now:
            link, expires = fresh
            channel.current_link, channel.current_link_expires_at = link, expires
            return link
    channel.current_link, channel.current_link_expires_at = link, now + ttl
    return link
