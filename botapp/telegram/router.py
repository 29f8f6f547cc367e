"""Updates -> service calls -> replies. No pyrogram here: `handlers.py` (real Telegram) and the
offline sandbox both feed this the same domain updates, so they run the very same code.

Each handler parses, calls services, and replies; business rules live in `botapp/services/`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from botapp.models import BotSettings, TelegramUser
from botapp.services import users
from botapp.services.texts import text_render
from botapp.telegram.gateway import (
    CallbackQuery,
    Gateway,
    IncomingMessage,
    TelegramError,
    UserBlocked,
    UserDeactivated,
)

log = logging.getLogger(__name__)

SORRY = "Sorry, something went wrong on our side. Please try again in a minute."
UNKNOWN = "I did not understand that. Send /help to see what I can do."


class Router:
    def __init__(self, gateway: Gateway, *, admin_ids: frozenset[int]):
        self.gateway = gateway
        self.admin_ids = admin_ids
        self.commands: dict[str, Callable[[IncomingMessage, str], None]] = {
            "start": self.cmd_start,
            "help": self.cmd_text("help_text"),
            "about": self.cmd_text("about_text"),
            "faq": self.cmd_text("faq_text"),
            "stop": self.cmd_stop,
            "stats": self.cmd_stats,
        }
        self.callbacks: dict[str, Callable[[CallbackQuery, str], None]] = {
            "close": self.cb_close,
        }

    # --- entry points: never raise ------------------------------------------------------------

    def handle_message(self, msg: IncomingMessage) -> None:
        self._guarded(msg.user.id, lambda: self._dispatch_message(msg))

    def handle_callback(self, cq: CallbackQuery) -> None:
        def run():
            name, _, arg = cq.data.partition(":")
            handler = self.callbacks.get(name)
            if handler is None:
                self.gateway.answer_callback(cq.id, "This button is no longer available.")
                return
            handler(cq, arg)

        self._guarded(cq.user.id, run)

    def _guarded(self, user_id: int, fn: Callable[[], None]) -> None:
        try:
            fn()
        except UserBlocked:
            users.user_mark_unreachable(telegram_id=user_id, state=TelegramUser.State.BLOCKED)
        except UserDeactivated:
            users.user_mark_unreachable(telegram_id=user_id, state=TelegramUser.State.DEACTIVATED)
        except Exception:
            log.exception("update failed user=%s", user_id)
            try:
                self.gateway.send_text(user_id, SORRY)
            except TelegramError:
                pass

    def _dispatch_message(self, msg: IncomingMessage) -> None:
        text = msg.text.strip()
        if text.startswith("/"):
            command, _, arg = text[1:].partition(" ")
            command = command.split("@", 1)[0].lower()  # /start@CourierBot
            handler = self.commands.get(command)
            if handler is not None:
                handler(msg, arg.strip())
                return
        users.user_seen(tg=msg.user)
        self.gateway.send_text(msg.chat_id, UNKNOWN)

    # --- commands -------------------------------------------------------------------------------

    def cmd_start(self, msg: IncomingMessage, payload: str) -> None:
        user, created = users.user_seen(tg=msg.user, start_payload=payload)
        if not created:
            users.user_resume(user=user)
        conf = BotSettings.load()
        self.gateway.send_text(msg.chat_id, text_render(conf.welcome_text, tg=msg.user))

    def cmd_text(self, field: str) -> Callable[[IncomingMessage, str], None]:
        def handler(msg: IncomingMessage, arg: str) -> None:
            users.user_seen(tg=msg.user)
            self.gateway.send_text(msg.chat_id, text_render(getattr(BotSettings.load(), field), tg=msg.user))

        return handler

    def cmd_stop(self, msg: IncomingMessage, arg: str) -> None:
        user, _ = users.user_seen(tg=msg.user)
        if users.user_stop(user=user):
            reply = "You will get no more messages from me. Send /start any time to come back."
        else:
            reply = "You had already stopped messages. Send /start to get them again."
        self.gateway.send_text(msg.chat_id, reply)

    def cmd_stats(self, msg: IncomingMessage, arg: str) -> None:
        users.user_seen(tg=msg.user)
        if msg.user.id not in self.admin_ids:
            self.gateway.send_text(msg.chat_id, UNKNOWN)
            return
        counts = users.user_counts()
        lines = [f"<b>Users</b>: {counts['total']} (new today: {counts['new_today']})"]
        lines += [f"• {label}: {counts['by_state'][state]}" for state, label in TelegramUser.State.choices]
        self.gateway.send_text(msg.chat_id, "\n".join(lines))

    # --- callbacks ------------------------------------------------------------------------------

    def cb_close(self, cq: CallbackQuery, arg: str) -> None:
        self.gateway.delete_messages(cq.chat_id, [cq.message_id])
        self.gateway.answer_callback(cq.id)
