"""Callback buttons (`Text | tap:key`, botapp/models/buttons.py) under the welcome, sequence steps
and broadcasts: what a tap does.

Guarantees: a tap whose data Courier did not sign for that chat, or whose button is gone or has
another key since, is answered ("no longer available") and records nothing. A valid tap records a
click on the button's key in the store tracked links use (`click_count`: one row per user and key,
counting every tap), so the step conditions "clicked X" / "not clicked X" see both kinds; it is answered with the
button's toast or alert; the button turns into its `then:` button (the rest of the keyboard as the
user sees it); and its `reply:` message is sent on the user's first tap of that key. A button
with `member:` does all that only for a member of its channel (Telegram is asked on each tap);
anyone else gets an alert to join first, and nothing is recorded or turned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from botapp.models import BotSettings, Broadcast, SequenceStep, TelegramUser
from botapp.models.buttons import ButtonSpec, buttons_parse
from botapp.services.outgoing import button_render, click_count, tap_data_valid
from botapp.telegram.gateway import CallbackQuery, ChatNotFound, Gateway, TelegramError

log = logging.getLogger(__name__)

GONE = "This button is no longer available."
NOT_MEMBER = "You have not joined the channel yet: join it, then tap again."


@dataclass(frozen=True)
class Tap:
    """What a valid tap did."""

    key: str
    first: bool  # the user's first click on this key
    turned: bool  # the button became its next state


def tap_handle(*, gateway: Gateway, cq: CallbackQuery, user: TelegramUser, arg: str) -> Tap | None:
    """Handle a tap on a callback button (`arg`: its data after "tap:"). Returns what it did, or
    None when the data is not a button Courier signed for this chat (answered, nothing recorded)."""
    ref, _, signature = arg.rpartition(":")
    spec = _spec_at(ref)
    if spec is None or not spec.tap or not tap_data_valid(chat_id=cq.chat_id, ref=ref, key=spec.key, signature=signature):
        log.info("tap refused user=%s data=%r", cq.user.id, cq.data)
        gateway.answer_callback(cq.id, GONE)
        return None
    if spec.member is not None and not _member(gateway=gateway, channel_id=spec.member, user_id=cq.user.id):
        gateway.answer_callback(cq.id, NOT_MEMBER, alert=True)
        return None
    first = click_count(user_id=user.pk, key=spec.key, every=True)
    gateway.answer_callback(cq.id, spec.answer, alert=spec.alert)
    turned = False
    if spec.then is not None:
        keyboard = [list(row) for row in cq.buttons]
        nxt = button_render(spec=spec.then, user_id=user.pk, chat_id=cq.chat_id, ref=f"{ref}.t")
        for row in keyboard:
            for i, button in enumerate(row):
                if button.callback_data == cq.data:
                    row[i], turned = nxt, True
        if turned:
            try:
                gateway.edit_buttons(cq.chat_id, cq.message_id, keyboard)
            except TelegramError as exc:  # the message is gone, or too old to edit: the click counts all the same
                log.warning("tap button not turned user=%s message=%s: %s", cq.user.id, cq.message_id, exc)
                turned = False
    if spec.reply and first:
        gateway.send_text(cq.chat_id, spec.reply)
    return Tap(spec.key, first, turned)


def _member(*, gateway: Gateway, channel_id: int, user_id: int) -> bool:
    try:
        return gateway.is_member(channel_id, user_id)
    except ChatNotFound:
        # The bot cannot see the channel (not an admin there): a misconfiguration must not lock
        # every user out, as force-subscribe does not (services/delivery.py: channels_missing).
        log.error("member: channel %s unreachable: is the bot an admin there? user=%s counted as a member", channel_id, user_id)
        return True


def _spec_at(ref: str) -> ButtonSpec | None:
    """The button a ref names: `<source>.<row>.<column>`, then `.t` per state it went through;
    `<source>` is "w" (the welcome), "s<step id>" or "b<broadcast id>". None when there is none."""
    source, *place = ref.split(".")
    if len(place) < 2 or not place[0].isdigit() or not place[1].isdigit() or any(p != "t" for p in place[2:]):
        return None
    text = _buttons_of(source)
    if text is None:
        return None
    try:
        rows = buttons_parse(text=text, check_links=False)
    except ValidationError:
        return None
    row, column = int(place[0]), int(place[1])
    if row >= len(rows) or column >= len(rows[row]):
        return None
    spec: ButtonSpec | None = rows[row][column]
    for _ in place[2:]:
        spec = spec.then if spec is not None else None
    return spec


def _buttons_of(source: str) -> str | None:
    if source == "w":
        return BotSettings.load().welcome_buttons
    kind, number = source[:1], source[1:]
    if not number.isdigit() or len(number) > 18:
        return None
    model = {"s": SequenceStep, "b": Broadcast}.get(kind)
    if model is None:
        return None
    return model.objects.filter(pk=int(number)).values_list("buttons", flat=True).first()
