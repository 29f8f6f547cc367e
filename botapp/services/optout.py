"""The opt-out button (Bot settings' `optout_enabled`, `optout_label`) under every broadcast and
sequence step: what a tap on it does.

The button is a signed tap (`tap:x:<signature>`, services/outgoing.py's `optout_button`: an HMAC
of the chat, the place and the key under SECRET_KEY, as every tap button has). Tapping it turns
its row into two buttons, "Yes, stop" and "Keep them" (signed alike), and answers with a toast
asking to confirm. "Yes, stop" does what /stop does (`user_stop`: no more broadcasts, the
onboarding steps still to come cancelled for good), removes the row and sends /stop's answer.
"Keep them" puts the opt-out button back and changes nothing. Data not signed for that chat is
answered "no longer available" and does nothing. A message Telegram no longer lets the bot edit
gets an alert saying to send /stop instead (nothing is changed on a tap that could not ask).
"""

from __future__ import annotations

import logging

from botapp.models import BotSettings, TelegramUser
from botapp.services.outgoing import OPTOUT_KEY, OPTOUT_REF, optout_button, tap_data_valid
from botapp.services.taps import GONE
from botapp.services.users import STOPPED_ALREADY_TEXT, STOPPED_TEXT, user_stop
from botapp.telegram.gateway import Button, CallbackQuery, Gateway, TelegramError

log = logging.getLogger(__name__)

CONFIRM, KEEP = f"{OPTOUT_REF}.y", f"{OPTOUT_REF}.n"
CONFIRM_TEXT, KEEP_TEXT = "Yes, stop", "Keep them"
ASK = "Stop all messages from this bot? Confirm with the buttons below."
KEPT = "Nothing changed: you keep getting messages."
CANNOT_ASK = "This message can no longer be changed: send /stop to stop messages."


def optout_data(*, arg: str) -> bool:
    """Whether tap data (`arg`, after "tap:") names the opt-out button or its confirmation."""
    ref, _, _ = arg.rpartition(":")
    return ref in (OPTOUT_REF, CONFIRM, KEEP)


def optout_handle(*, gateway: Gateway, cq: CallbackQuery, user: TelegramUser, arg: str) -> str:
    """Handle a tap on the opt-out button or on its confirmation; returns what it did: "refused"
    (not signed for this chat: answered, nothing changed), "asked", "kept", "stopped" (what /stop
    does, and /stop's answer sent), or "unchanged" (the message could not be edited to ask)."""
    ref, _, signature = arg.rpartition(":")
    if not optout_data(arg=arg) or not tap_data_valid(chat_id=cq.chat_id, ref=ref, key=OPTOUT_KEY, signature=signature):
        log.info("opt-out tap refused user=%s data=%r", cq.user.id, cq.data)
        gateway.answer_callback(cq.id, GONE)
        return "refused"
    if ref == OPTOUT_REF:
        row = [
            optout_button(chat_id=cq.chat_id, text=CONFIRM_TEXT, ref=CONFIRM),
            optout_button(chat_id=cq.chat_id, text=KEEP_TEXT, ref=KEEP),
        ]
        if not _row_replace(gateway, cq, row):
            gateway.answer_callback(cq.id, CANNOT_ASK, alert=True)
            return "unchanged"
        gateway.answer_callback(cq.id, ASK)
        return "asked"
    if ref == KEEP:
        _row_replace(gateway, cq, [optout_button(chat_id=cq.chat_id, text=BotSettings.load().optout_label, ref=OPTOUT_REF)])
        gateway.answer_callback(cq.id, KEPT)
        return "kept"
    stopped = user_stop(user=user)
    log.info("opt-out confirmed user=%s", cq.user.id)
    gateway.answer_callback(cq.id)
    _row_replace(gateway, cq, None)
    gateway.send_text(cq.chat_id, STOPPED_TEXT if stopped else STOPPED_ALREADY_TEXT)
    return "stopped"


def _row_replace(gateway: Gateway, cq: CallbackQuery, row: list[Button] | None) -> bool:
    """Replace the row of the tapped button with `row` (None: remove it), the message's other
    buttons as the user sees them. False when Telegram refused the edit (logged)."""
    keyboard = []
    for buttons in cq.buttons:
        if any(b.callback_data == cq.data for b in buttons):
            if row:
                keyboard.append(row)
        else:
            keyboard.append(list(buttons))
    try:
        gateway.edit_buttons(cq.chat_id, cq.message_id, keyboard or None)
    except TelegramError as exc:
        log.warning("opt-out buttons not edited user=%s message=%s: %s", cq.user.id, cq.message_id, exc)
        return False
    return True
