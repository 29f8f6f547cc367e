"""Operator-written texts, filled in safely for one user."""

from __future__ import annotations

import html
import string
from datetime import timedelta

from botapp.models import Subscriber
from botapp.telegram.gateway import TgUser


class _Fields(dict):
    def __missing__(self, key):  # an unknown {placeholder} stays as written
        return "{" + key + "}"


def text_render(*, template: str, tg: TgUser | None = None, **extra) -> str:
    """Fill {first_name}, {last_name}, {username}, {mention}, the user's ids and any `extra` fields.

    {id} and {chat_id} are the user's Telegram id (a private chat's id is its user's); {user_id}
    is the id a scheduled-message system's clients know them by (shared/seeds/003: their
    subscriber id) when they have one, else their Telegram id: looked up only when the template
    asks for it. Names are HTML-escaped (messages are sent as HTML). A malformed template is sent
    as written rather than failing the reply.
    """
    fields = _Fields(extra)
    if tg is not None:
        first = html.escape(tg.first_name or "there")
        fields.update(
            first_name=first,
            last_name=html.escape(tg.last_name or ""),
            username=html.escape(tg.username or ""),
            mention=f'<a href="tg://user?id={tg.id}">{first}</a>',
            id=str(tg.id),
            chat_id=str(tg.id),
        )
        if "{user_id}" in template and "user_id" not in extra:
            subscriber = Subscriber.objects.filter(user__telegram_id=tg.id).values_list("subscriber_id", flat=True).first()
            fields["user_id"] = html.escape(subscriber or str(tg.id))
    try:
        return string.Formatter().vformat(template, (), fields)
    except (ValueError, IndexError, AttributeError, KeyError):
        return template


def human_span(*, delta: timedelta) -> str:
    """`delta` as users read it ("1 day 2 h 5 min"), to the minute; never less than "1 min"."""
    minutes = max(1, round(delta.total_seconds() / 60))
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    parts = [f"{days} day{'s' * (days != 1)}" if days else "", f"{hours} h" if hours else "", f"{mins} min" if mins else ""]
    return " ".join(p for p in parts if p)
